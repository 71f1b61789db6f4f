import { ValidationError } from '../../shared/errors.js';
import {
  assertJobId,
  assertText,
  MAX_BATCH,
  optionalInt,
  optionalText,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import {
  type BulkActionRow,
  listBulkActions,
  recordBulkProgress,
  removeListed,
  startBulkAction,
} from '../../storage/operator/bulk.js';
import { cancelListed } from '../../storage/operator/cancel.js';
import { replayListed } from '../../storage/operator/replay.js';
import {
  countJobs,
  matchingIds,
  type SearchCriteria,
  type SearchStatus,
  searchJobs,
} from '../../storage/operator/search.js';
import { type JobSearch, searchCriteria } from './search.js';

/** What a bulk action does to every job its filter matches. */
export type BulkActionKind = 'replay' | 'cancel' | 'remove';

/** The statuses each action applies to; a filter's other jobs are not touched. */
export const BULK_STATUSES: Readonly<Record<BulkActionKind, readonly SearchStatus[]>> = {
  replay: ['dead'],
  cancel: ['pending', 'blocked', 'running'],
  remove: ['dead', 'cancelled', 'succeeded'],
};

/** Largest count a preview reports exactly (a bulk action may still change more). */
export const BULK_PREVIEW_CAP = 1_000_000;

/** Options of a bulk action. */
export interface BulkOptions {
  /** Why (recorded in every changed job's history and in the bulk action log; 1 to 1000 characters). */
  reason: string;
  /** Who (recorded too; up to 200 characters). */
  actor?: string;
  /** Jobs per statement (1..1000, default 500); each batch is its own short transaction. */
  batchSize?: number;
  /** The count the operator confirmed: the action is refused if the filter matches another number now. */
  expectedCount?: number;
  /** Called after each batch with the jobs changed so far. */
  onProgress?: (progress: { done: number; matched: number }) => void;
}

/** A bulk action under way. */
export interface BulkRun {
  /** Its id in the bulk action log. */
  id: string;
  /** Jobs the filter matched when it started. */
  matched: number;
  /** Resolves with the jobs changed when every batch has run. */
  finished: Promise<{ done: number }>;
}

/** A bulk action as logged: who, why, the filter, how far it got. */
export interface BulkActionRecord {
  id: string;
  action: BulkActionKind;
  filter: Record<string, unknown>;
  actor: string | null;
  reason: string;
  matched: number;
  done: number;
  state: 'running' | 'finished' | 'failed';
  error: string | null;
  startedAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

const KNOWN_OPTIONS = ['reason', 'actor', 'batchSize', 'expectedCount', 'onProgress'];

/** The search an action runs over: the filter's statuses narrowed to those the action applies to. */
async function actionCriteria(
  db: Queryable,
  schema: string,
  action: BulkActionKind,
  search: JobSearch,
): Promise<SearchCriteria> {
  const statuses = BULK_STATUSES[action];
  if (!statuses) throw new ValidationError('action', 'must be replay, cancel or remove');
  const criteria = await searchCriteria(db, schema, search);
  if (criteria.payload) throw new ValidationError('payload', 'bulk actions do not take a payload search');
  if (Object.keys(criteria.values).length === 0 && criteria.statuses === null) {
    throw new ValidationError('filter', 'name at least one criterion (a status counts)');
  }
  const narrowed = (criteria.statuses ?? statuses).filter((s) => statuses.includes(s));
  if (narrowed.length === 0) {
    throw new ValidationError('status', `${action} applies only to ${statuses.join(', ')} jobs`);
  }
  return { ...criteria, statuses: narrowed };
}

/** How many jobs an action on `search` would change now (exact up to BULK_PREVIEW_CAP). */
export async function previewBulk(
  db: Queryable,
  schema: string,
  action: BulkActionKind,
  search: JobSearch,
): Promise<{ matched: number; capped: boolean }> {
  const criteria = await actionCriteria(db, schema, action, search);
  const matched = await countJobs(db, schema, criteria, BULK_PREVIEW_CAP);
  return { matched, capped: matched >= BULK_PREVIEW_CAP };
}

/**
 * Starts a bulk action: checks everything, counts the matching jobs, logs the action, then runs it
 * in bounded batches (one statement per batch for replay and remove; cancel repeats its statement
 * for jobs sharing an ordering key). Jobs that start matching after it began (a job that dies
 * later) are not included: it stops at the newest job matching when it started.
 */
export async function beginBulk(
  db: Queryable,
  schema: string,
  action: BulkActionKind,
  search: JobSearch,
  options: BulkOptions,
): Promise<BulkRun> {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'must be an object with at least a reason');
  }
  rejectUnknownOptions(options, KNOWN_OPTIONS, 'options');
  const reason = assertText(options.reason, 'reason', 1000);
  const actor = optionalText(options.actor, 'actor', 200);
  const batchSize = optionalInt(options.batchSize, 'batchSize', 1, MAX_BATCH, 500);
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new ValidationError('onProgress', 'must be a function');
  }
  const criteria = await actionCriteria(db, schema, action, search);
  const { matched } = await previewBulk(db, schema, action, search);
  if (options.expectedCount !== undefined && options.expectedCount !== matched) {
    throw new ValidationError(
      'expectedCount',
      `the filter matches ${matched} jobs now, not the ${options.expectedCount} confirmed: nothing was changed; preview again`,
    );
  }
  const newest = (await searchJobs(db, schema, criteria, null, 1))[0]?.id ?? '0';
  const id = await startBulkAction(db, schema, { action, filter: search, actor, reason, matched });
  const params = { actor, reason };
  const finished = (async () => {
    let done = 0;
    let after = '0';
    try {
      while (BigInt(after) < BigInt(newest)) {
        const rows = (await matchingIds(db, schema, criteria, after, batchSize)).filter(
          (row) => BigInt(row.id) <= BigInt(newest),
        );
        if (rows.length === 0) break;
        const ids = rows.map((row) => row.id);
        if (action === 'replay') {
          // A filter naming the queue (or the task, which is its queue) keeps the replay in it.
          done += await replayListed(
            db,
            schema,
            ids,
            { ...params, resetAttempts: true, retryUncertainEffects: false },
            search.queue ?? search.task ?? null,
          );
        } else if (action === 'cancel') {
          done += await cancelListed(db, schema, ids, params);
        } else {
          done += await removeListed(db, schema, ids, params);
        }
        after = ids.at(-1) as string;
        await recordBulkProgress(db, schema, id, done, 'running');
        options.onProgress?.({ done, matched });
      }
      await recordBulkProgress(db, schema, id, done, 'finished');
      return { done };
    } catch (err) {
      const message = err instanceof Error ? err.message.slice(0, 1000) : 'failed';
      await recordBulkProgress(db, schema, id, done, 'failed', message).catch(() => {});
      throw err;
    }
  })();
  return { id, matched, finished };
}

/** Runs a bulk action to its end (see `beginBulk`); resolves with its log id and the jobs changed. */
export async function bulkAction(
  db: Queryable,
  schema: string,
  action: BulkActionKind,
  search: JobSearch,
  options: BulkOptions,
): Promise<{ id: string; matched: number; done: number }> {
  const run = await beginBulk(db, schema, action, search, options);
  const { done } = await run.finished;
  return { id: run.id, matched: run.matched, done };
}

/** Reads the bulk action log: one action by id, or the latest `limit` (default 20). */
export async function bulkActions(
  db: Queryable,
  schema: string,
  options: { id?: string; limit?: number } = {},
): Promise<BulkActionRecord[]> {
  rejectUnknownOptions(options, ['id', 'limit'], 'options');
  const id = options.id === undefined ? null : assertJobId(options.id, 'id');
  const rows = await listBulkActions(db, schema, id, optionalInt(options.limit, 'limit', 1, 1000, 20));
  return rows.map(toRecord);
}

function toRecord(row: BulkActionRow): BulkActionRecord {
  return {
    id: row.id,
    action: row.action,
    filter: row.filter,
    actor: row.actor,
    reason: row.reason,
    matched: row.matched,
    done: row.done,
    state: row.state,
    error: row.error,
    startedAt: row.started_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
  };
}
