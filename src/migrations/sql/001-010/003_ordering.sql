-- 003: ordering and fairness: per-aggregate ordering keys, per-key concurrency limits and aging.
-- See docs/ordering.md. The migrator runs this with search_path set to the Leasehold schema.

-- Per-aggregate ordering. A job with an ordering key is inserted claimable only when it is the
-- head of its key (the earliest unfinished job); the others wait with awaits_predecessor set, which
-- keeps them out of the claimable index. The statement that finishes a head (completion, cancel,
-- skip) releases the next one in the same statement. Jobs without a key never touch any of this.
ALTER TABLE jobs ADD COLUMN ordering_key text CHECK (length(ordering_key) BETWEEN 1 AND 200);
ALTER TABLE jobs ADD COLUMN awaits_predecessor boolean NOT NULL DEFAULT false;

-- Per-key concurrency limits: the key a job counts against, and whether its current claim took one
-- of the key's slots (set by the limited claim; the statements that end a run give it back).
ALTER TABLE jobs ADD COLUMN concurrency_key text CHECK (length(concurrency_key) BETWEEN 1 AND 200);
ALTER TABLE jobs ADD COLUMN holds_key_slot boolean NOT NULL DEFAULT false;

-- Aging raises priority; the priority the job was enqueued with is kept here (null: never aged),
-- so history and replay stay truthful.
ALTER TABLE jobs ADD COLUMN base_priority integer;

-- The claimable set excludes jobs waiting behind their key's head. Same columns and order as 001's
-- index; the claim statements repeat the predicate so they keep using it.
DROP INDEX jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx
  ON jobs (queue_name, priority DESC, available_at, id)
  WHERE status = 'pending' AND NOT awaits_predecessor;

-- Serves the release of a key's next job: the earliest waiting job of (queue, key), one index probe.
CREATE INDEX jobs_ordering_waiting_idx
  ON jobs (queue_name, ordering_key, id)
  WHERE awaits_predecessor;

-- One row per (queue, ordering key) that has unfinished jobs: its head (the job allowed to run,
-- null when none is) and how many wait behind it. The row lock serialises enqueues of the key with
-- the statements that finish its head. A row with head_id null and waiting > 0 is a key whose
-- finishing statement could not see a job enqueued concurrently; the repair step releases it.
CREATE TABLE ordering_keys (
  queue_name text NOT NULL,
  ordering_key text NOT NULL,
  head_id bigint,
  waiting integer NOT NULL DEFAULT 0 CHECK (waiting >= 0),
  PRIMARY KEY (queue_name, ordering_key)
);

-- Serves the repair step: keys with waiting jobs and no head, and idle keys to remove.
CREATE INDEX ordering_keys_headless_idx ON ordering_keys (queue_name) WHERE head_id IS NULL;

-- Per-key running counters for queues with concurrency_limit_per_key. `granted` is scratch space:
-- the claim statement writes how many slots it took there, to read them back in RETURNING.
CREATE TABLE concurrency_keys (
  queue_name text NOT NULL,
  concurrency_key text NOT NULL,
  running integer NOT NULL DEFAULT 0 CHECK (running >= 0),
  granted integer NOT NULL DEFAULT 0,
  PRIMARY KEY (queue_name, concurrency_key)
);

ALTER TABLE queues ADD COLUMN concurrency_limit_per_key integer CHECK (concurrency_limit_per_key >= 1);
ALTER TABLE queues ADD COLUMN aging_interval_ms bigint CHECK (aging_interval_ms >= 1);
ALTER TABLE queues ADD COLUMN aging_max_boost integer CHECK (aging_max_boost >= 1);
