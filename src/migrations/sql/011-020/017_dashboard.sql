-- 017: the dashboard: indexes for job search, the payload-search opt-in, an audit log of bulk
-- actions and a small per-minute metrics rollup. See docs/dashboard.md.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.
--
-- Search pages every source newest first (keyset on id). Most filters are already served: the
-- primary keys, jobs_claimable_idx and jobs_ordering_waiting_idx (queue of live work),
-- jobs_expired_lease_idx (running), the terminal indexes of 002 and 004, finished_jobs_finished_at_idx.
-- The indexes below serve the rest. None is on a column every job writes: each is partial on rows
-- plain live work never has (terminal rows, rows with an ordering key), or on a table only keyed
-- enqueues write, or on finished_jobs. What each costs is stated beside it and measured in
-- docs/dashboard.md. Built without CONCURRENTLY (the migrator runs in a transaction): on a large
-- table each build blocks writes to it for one scan.

-- Succeeded jobs by queue, newest first. Cost: one more index entry per completion (finished_jobs
-- already carries two); the only new index a plain job pays for.
CREATE INDEX finished_jobs_queue_idx ON finished_jobs (queue_name, id);

-- Dead and cancelled jobs by the error code they ended with. Partial on terminal rows: a job pays
-- only when it dies or is cancelled (and when a replay moves it back).
CREATE INDEX jobs_terminal_error_idx
  ON jobs (last_error_code, id)
  WHERE finished_at IS NOT NULL;

-- Jobs by ordering key, whatever their state (live, waiting or terminal). Partial: only jobs
-- enqueued with an ordering key have an entry, so plain jobs pay nothing.
CREATE INDEX jobs_ordering_key_idx
  ON jobs (ordering_key, id)
  WHERE ordering_key IS NOT NULL;

-- Jobs by idempotency key across queues (the primary key serves a key within one queue). Only
-- keyed enqueues write job_keys.
CREATE INDEX job_keys_key_idx ON job_keys (idempotency_key);

-- Jobs made by a schedule, newest first: the primary key (schedule_name, tick_at) finds a
-- schedule's ticks but not in job order, so a schedule with many ticks would be read whole before
-- the newest page; this one is read backwards from the cursor, each entry a probe of the jobs'
-- primary keys, index-only. Cost: one entry per tick, written by the statement that fires it
-- (schedule_ticks already has two); plain jobs write none.
CREATE INDEX schedule_ticks_name_job_idx ON schedule_ticks (schedule_name, job_id);

-- Flow children waiting for their parents (status `blocked`, beside jobs_ordering_waiting_idx's
-- jobs waiting behind an ordering key), by queue, newest first. Partial on waiting_parents > 0:
-- only flow children have an entry, and only until their last parent succeeds (waiting_parents is
-- already in jobs_claimable_idx's predicate, so no update that was HOT stops being so).
-- The jobs of one flow need no new index: flow_nodes' UNIQUE (flow_id, ref) serves them.
CREATE INDEX jobs_flow_waiting_idx
  ON jobs (queue_name, id)
  WHERE status = 'pending' AND waiting_parents > 0;

-- Payload search is off unless a queue opts in: then the dashboard searches the first this many
-- characters of the payload's JSON text of that queue's newest jobs (a bounded scan, never an index).
ALTER TABLE queues ADD COLUMN payload_search_chars integer
  CHECK (payload_search_chars BETWEEN 1 AND 4096);

-- One row per bulk action (replay, cancel or remove by filter): who, why, what the filter was,
-- how many it matched when previewed and how far it got. Each job it changes also records the
-- actor and reason in its own history (job_events).
CREATE TABLE bulk_actions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  action text NOT NULL CHECK (action IN ('replay', 'cancel', 'remove')),
  filter jsonb NOT NULL CHECK (pg_column_size(filter) <= 4096),
  actor text CHECK (length(actor) <= 200),
  reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
  matched integer NOT NULL,
  done integer NOT NULL DEFAULT 0,
  state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'finished', 'failed')),
  error text CHECK (length(error) <= 1000),
  started_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);

-- Per queue and minute: what the charts draw. Written by the rollup pass (src/maintenance/
-- metrics-rollup.ts, run by the dashboard), never by the hot path. Counts are recomputed for the
-- recent minutes from finished_jobs and job_events on each pass; gauges are sampled.
CREATE TABLE metrics_rollup (
  queue_name text NOT NULL,
  minute timestamptz NOT NULL,
  completed integer NOT NULL DEFAULT 0,
  retried integer NOT NULL DEFAULT 0,
  dead integer NOT NULL DEFAULT 0,
  lease_expired integer NOT NULL DEFAULT 0,
  -- Retries by error code in this minute: { code: count }, at most 20 codes.
  retries_by_code jsonb NOT NULL DEFAULT '{}' CHECK (pg_column_size(retries_by_code) <= 2048),
  -- Lost-fence attempts refused so far (cumulative, as lease_refusals counts them): the chart
  -- draws the difference between minutes.
  refused_total bigint,
  -- Gauges sampled during the minute (null: not sampled, e.g. backfilled minutes).
  pending integer,
  running integer,
  near_expiry integer,
  oldest_claimable_ms double precision,
  PRIMARY KEY (queue_name, minute)
);

-- The rollup's own pruning (rows older than two days) and the charts across queues.
CREATE INDEX metrics_rollup_minute_idx ON metrics_rollup (minute);

-- The audit log of operators' pauses and resumes of queues and schedules (from the dashboard): who,
-- what, when and why. Written by the statement that makes the change (storage/operator-actions.ts),
-- so a change is never left unrecorded. Newest first by the primary key.
CREATE TABLE operator_actions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  actor text CHECK (length(actor) <= 200),
  action text NOT NULL CHECK (action IN ('pause', 'resume')),
  target_kind text NOT NULL CHECK (target_kind IN ('queue', 'schedule')),
  target text NOT NULL CHECK (length(target) BETWEEN 1 AND 128),
  reason text CHECK (length(reason) <= 1000)
);

SELECT grant_roles();
