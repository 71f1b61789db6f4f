import { defineStatement, type Queryable, run } from '../db.js';
import { schedulePauseUpdate } from '../schedules/schedules.js';

// Operators' pauses and resumes of queues and schedules, each recorded in operator_actions (017)
// by the statement that makes the change: the change and its audit row commit together.

/** Who made a change, and why (recorded beside it). */
export interface OperatorAudit {
  actor: string | null;
  reason: string | null;
}

/** An operator action as the audit log keeps it. */
export interface OperatorActionRow {
  id: string;
  at: Date;
  actor: string | null;
  action: 'pause' | 'resume';
  target_kind: 'queue' | 'schedule';
  target: string;
  reason: string | null;
}

/**
 * QueuePauseAudited: queue $1 paused ($2 true) or resumed, as QueueConfigure sets `paused` (the
 * settings row created if missing; the next claim statement sees it), and an operator_actions row
 * with actor $3 and reason $4, in one statement. Primary key of queues; one insert.
 */
const QueuePauseAudited = defineStatement(
  'queue_pause_audited',
  (s) => `
  WITH changed AS (
    INSERT INTO ${s}.queues AS q (name, paused) VALUES ($1, $2)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
    RETURNING q.name, q.paused
  ),
  audit AS (
    INSERT INTO ${s}.operator_actions (actor, action, target_kind, target, reason)
    SELECT $3, CASE WHEN $2 THEN 'pause' ELSE 'resume' END, 'queue', name, $4 FROM changed
  )
  SELECT name, paused FROM changed`,
);

/**
 * SchedulePauseAudited: SchedulePause (schedules.ts: a change bumps the revision, a resume moves
 * fire_after to now()) and an operator_actions row with actor $3 and reason $4, in one statement.
 * No row when no schedule has that name (and nothing recorded). Primary key of schedules.
 */
const SchedulePauseAudited = defineStatement(
  'schedule_pause_audited',
  (s) => `
  WITH changed AS (${schedulePauseUpdate(s)}
  ),
  audit AS (
    INSERT INTO ${s}.operator_actions (actor, action, target_kind, target, reason)
    SELECT $3, CASE WHEN $2 THEN 'pause' ELSE 'resume' END, 'schedule', name, $4 FROM changed
  )
  SELECT name FROM changed`,
);

/** OperatorActionList: the latest $1 operator actions, newest first. Primary key, backwards. */
const OperatorActionList = defineStatement(
  'operator_action_list',
  (s) => `
  SELECT id::text AS id, at, actor, action, target_kind, target, reason
  FROM ${s}.operator_actions ORDER BY id DESC LIMIT $1`,
);

/** Pauses or resumes a queue, recording who and why; returns the queue's paused state. */
export async function setQueuePausedAudited(
  db: Queryable,
  schema: string,
  queue: string,
  paused: boolean,
  audit: OperatorAudit,
): Promise<{ name: string; paused: boolean }> {
  const rows = await run<{ name: string; paused: boolean }>(db, QueuePauseAudited(schema), [
    queue,
    paused,
    audit.actor,
    audit.reason,
  ]);
  return rows[0] as { name: string; paused: boolean };
}

/** Pauses or resumes a schedule, recording who and why; false when there is none by that name. */
export async function setSchedulePausedAudited(
  db: Queryable,
  schema: string,
  name: string,
  paused: boolean,
  audit: OperatorAudit,
): Promise<boolean> {
  const rows = await run(db, SchedulePauseAudited(schema), [name, paused, audit.actor, audit.reason]);
  return rows.length > 0;
}

/** The latest `limit` operator actions, newest first. */
export function listOperatorActions(
  db: Queryable,
  schema: string,
  limit: number,
): Promise<OperatorActionRow[]> {
  return run<OperatorActionRow>(db, OperatorActionList(schema), [limit]);
}
