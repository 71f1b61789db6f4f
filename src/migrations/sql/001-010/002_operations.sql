-- 002: durable history and operations: the audit trail, per-queue settings (owner, retention,
-- pause), cancellation, idempotent enqueue and the effects ledger. See docs/history.md.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- A cancelled job is terminal and distinct from dead: it is an operator's decision, not a failure,
-- so it must not page anyone, show up in dead-job lists or be replayed by a filter.
-- ADD VALUE may run inside the migrator's transaction (PostgreSQL 12+), but the new value may not
-- be used until that transaction commits: nothing below mentions it (indexes key on finished_at).
ALTER TYPE job_status ADD VALUE IF NOT EXISTS 'cancelled';

-- Heartbeats are counted, not logged: the heartbeat statement increments this, the claim resets it,
-- and the record that ends an attempt (an event row, or the finished_jobs row) copies it.
ALTER TABLE jobs ADD COLUMN lease_extensions integer NOT NULL DEFAULT 0;
ALTER TABLE finished_jobs ADD COLUMN lease_extensions integer NOT NULL DEFAULT 0;

-- Terminal jobs kept in the hot table (dead, cancelled) are exactly those with finished_at set.
-- These partial indexes hold only them, so live work never pays for their upkeep.
-- Serves listDead by queue (newest first) and dead-job retention per queue.
CREATE INDEX jobs_terminal_queue_idx
  ON jobs (queue_name, finished_at, id)
  WHERE finished_at IS NOT NULL;
-- Serves listDead across queues (newest first).
CREATE INDEX jobs_terminal_finished_idx
  ON jobs (finished_at, id)
  WHERE finished_at IS NOT NULL;
-- Serves replay by filter, paged by id.
CREATE INDEX jobs_terminal_id_idx
  ON jobs (id)
  WHERE finished_at IS NOT NULL;

-- The audit trail: append-only, one row per recorded transition, written by the statement that
-- makes the transition. Claims and completions write no row here (the hot path stays one statement
-- without an extra insert): a claim is recorded on the job row and copied into the record that ends
-- its attempt, and a completion is its finished_jobs row. No payload data is ever copied here.
CREATE TABLE job_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id bigint NOT NULL,
  queue_name text NOT NULL,
  kind text NOT NULL CHECK (kind IN (
    'retried', 'dead', 'snoozed', 'skipped', 'lease_expired', 'replayed', 'cancelled', 'refused', 'removed'
  )),
  at timestamptz NOT NULL DEFAULT now(),
  -- The job's status right after the event (null for events that change nothing: refusals).
  status_after text,
  -- The claim whose attempt this event ends (or, for a refusal, the stale claim presented).
  attempt integer,
  lease_owner text,
  lease_token bigint,
  claimed_at timestamptz,
  lease_extensions integer,
  error_code text CHECK (length(error_code) <= 64),
  error_class text CHECK (length(error_class) <= 100),
  message text CHECK (length(message) <= 1000),
  -- A retry's or snooze's delay before the job may run again.
  delay_ms double precision,
  actor text CHECK (length(actor) <= 200),
  reason text CHECK (length(reason) <= 1000),
  detail jsonb CHECK (pg_column_size(detail) <= 2048)
);

-- Serves a job's history in order, and the cleanup of a removed job's events.
CREATE INDEX job_events_job_idx ON job_events (job_id, id);

-- Per-queue settings. A queue without a row has the defaults: not paused, no owner, succeeded jobs
-- kept for the default retention, dead jobs kept until an operator acts.
CREATE TABLE queues (
  name text PRIMARY KEY,
  owner text CHECK (length(owner) <= 200),
  dead_retention_ms bigint CHECK (dead_retention_ms >= 0),
  succeeded_retention_ms bigint CHECK (succeeded_retention_ms >= 0),
  paused boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Idempotent enqueue: one row per (queue, key) for as long as the job it names is kept. Kept apart
-- from jobs because a job moves to finished_jobs when it succeeds; this row does not move, so the
-- key stays taken until retention removes the job itself.
CREATE TABLE job_keys (
  queue_name text NOT NULL,
  idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 200),
  job_id bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue_name, idempotency_key)
);

-- Serves the cleanup of a removed job's key.
CREATE INDEX job_keys_job_idx ON job_keys (job_id);

-- The effects ledger: an external side effect's intent is recorded before it is performed and its
-- result after, both fenced by the lease. An intent without a result is an uncertain outcome.
CREATE TABLE job_effects (
  job_id bigint NOT NULL,
  name text NOT NULL,
  effect_key text NOT NULL,
  -- The claim that recorded (or last re-armed) the intent.
  attempt integer NOT NULL,
  lease_token bigint NOT NULL,
  intent_at timestamptz NOT NULL DEFAULT now(),
  result jsonb,
  result_at timestamptz,
  PRIMARY KEY (job_id, name),
  CONSTRAINT job_effects_result_bounded CHECK (pg_column_size(result) <= 65536)
);

-- Effects writes are fenced like every lease-holding write, and refused ones counted.
ALTER TABLE lease_refusals DROP CONSTRAINT lease_refusals_operation_check;
ALTER TABLE lease_refusals ADD CONSTRAINT lease_refusals_operation_check
  CHECK (operation IN ('heartbeat', 'complete', 'fail', 'snooze', 'effect'));
