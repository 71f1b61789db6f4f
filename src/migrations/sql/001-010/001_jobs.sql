-- 001: the jobs table and its lease/fence state machine.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- pending -> running -> succeeded | pending (retry) | dead. See docs/state-machine.md.
-- A succeeded job moves to finished_jobs; jobs.status is never 'succeeded' in practice, but the
-- value names the state in the API and in finished_jobs' rows as read back.
CREATE TYPE job_status AS ENUM ('pending', 'running', 'succeeded', 'dead');

CREATE TABLE jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue_name text NOT NULL,
  payload jsonb NOT NULL,
  status job_status NOT NULL DEFAULT 'pending',
  priority integer NOT NULL DEFAULT 0,
  -- Database time from which the job may be claimed (schedules, backoff and snoozes move it).
  available_at timestamptz NOT NULL DEFAULT now(),
  attempt_count integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL DEFAULT 8 CHECK (max_attempts >= 1),
  -- Lease: who holds the job and until when. Only meaningful while status = 'running'.
  lease_owner text,
  -- Fencing token: incremented by every claim, presented by every heartbeat, completion and failure.
  lease_token bigint NOT NULL DEFAULT 0,
  lease_expires_at timestamptz,
  claimed_at timestamptz,
  -- Last failure, bounded in size and never containing payload data.
  last_error_code text,
  last_error_class text,
  last_error_message text,
  last_error_stack text,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  CONSTRAINT jobs_running_has_lease CHECK (
    status <> 'running' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
  )
);

-- Serves the claim: the next pending jobs of one queue in preference order.
CREATE INDEX jobs_claimable_idx
  ON jobs (queue_name, priority DESC, available_at, id)
  WHERE status = 'pending';

-- Serves the recovery sweep: running jobs whose lease has lapsed.
CREATE INDEX jobs_expired_lease_idx
  ON jobs (lease_expires_at)
  WHERE status = 'running';

-- Succeeded jobs leave the hot table in the statement that completes them, as a compact record
-- (no payload: finished work keeps no copy of its input). The jobs table and its indexes then hold
-- only live work (pending, running) and dead jobs awaiting an operator, so they stay small under
-- churn. Pruned by the retention service.
CREATE TABLE finished_jobs (
  id bigint PRIMARY KEY,
  queue_name text NOT NULL,
  priority integer NOT NULL,
  attempt_count integer NOT NULL,
  max_attempts integer NOT NULL,
  lease_owner text NOT NULL,
  lease_token bigint NOT NULL,
  created_at timestamptz NOT NULL,
  claimed_at timestamptz,
  finished_at timestamptz NOT NULL
);

CREATE INDEX finished_jobs_finished_at_idx ON finished_jobs (finished_at);

-- Lost-fence attempts: a heartbeat, completion or failure presented with a lease that was no longer
-- current. Counted per queue and operation in the same statement that refused them.
CREATE TABLE lease_refusals (
  queue_name text NOT NULL,
  operation text NOT NULL CHECK (operation IN ('heartbeat', 'complete', 'fail', 'snooze')),
  refused_count bigint NOT NULL DEFAULT 0,
  last_refused_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue_name, operation)
);
