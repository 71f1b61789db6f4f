-- 015: rate limits and a global concurrency limit per queue, enforced by the claim statement.
-- See docs/rate-limits.md. The migrator runs this with search_path set to the Leasehold schema.

-- The limits, beside the queue's other settings. The plain claim already probes this row by
-- primary key (paused, per-key limit); it now also yields nothing for a queue with these set, whose
-- claims go through JobClaimManyThrottled (storage/claim-throttled.ts). At most rate_limit_max jobs
-- of the queue start in any interval of rate_limit_per_ms; with rate_limit_per_key, at most that
-- many of each concurrency key (jobs without a key share one allowance). At most
-- concurrency_limit of the queue's jobs hold a live lease at once.
ALTER TABLE queues ADD COLUMN rate_limit_max integer CHECK (rate_limit_max BETWEEN 1 AND 10000);
ALTER TABLE queues ADD COLUMN rate_limit_per_ms integer CHECK (rate_limit_per_ms BETWEEN 1 AND 86400000);
ALTER TABLE queues ADD COLUMN rate_limit_per_key boolean NOT NULL DEFAULT false;
ALTER TABLE queues ADD COLUMN concurrency_limit integer CHECK (concurrency_limit BETWEEN 1 AND 100000);
ALTER TABLE queues ADD CONSTRAINT queues_rate_limit_whole
  CHECK ((rate_limit_max IS NULL) = (rate_limit_per_ms IS NULL));
-- The per-key counters of concurrency_limit_per_key belong to another claim statement; the two
-- are not combined (yet): a queue has one or the other.
ALTER TABLE queues ADD CONSTRAINT queues_one_limited_claim
  CHECK (concurrency_limit_per_key IS NULL OR (rate_limit_max IS NULL AND concurrency_limit IS NULL));

-- One row per limited queue (created by configureQueue): the row every claim of the queue locks,
-- so limited claims of one queue take turns. Apart from queues so that these hot writes never
-- touch the row every plain claim reads.
--   claimed_total: jobs ever claimed through the limit; a claim compares the value its snapshot saw
--     with the one its lock reads to count claims committed in between (see claim-throttled.ts).
--   throttled_claims: claims the limit cut short while claimable jobs waited.
--   throttled_ms: the union of the intervals those claims were told to wait (not one per claimer).
--   throttled_until: the end of the latest such interval.
CREATE TABLE rate_limits (
  queue_name text PRIMARY KEY,
  claimed_total bigint NOT NULL DEFAULT 0,
  throttled_claims bigint NOT NULL DEFAULT 0,
  throttled_ms double precision NOT NULL DEFAULT 0,
  throttled_until timestamptz NOT NULL DEFAULT '-infinity'
);

-- The sliding window of starts: per (queue, bucket) the times of the claims inside the last window
-- and how many jobs each started (one entry per claim statement, not per job). The bucket is ''
-- for a queue-wide limit, or the concurrency key with rate_limit_per_key ('' for jobs without one:
-- a key is never empty). Written only by a claim holding the queue's rate_limits row lock.
-- `granted` is scratch space: the claim writes how many starts it took there, to read them back.
CREATE TABLE rate_limit_keys (
  queue_name text NOT NULL,
  bucket_key text NOT NULL,
  start_at timestamptz[] NOT NULL DEFAULT '{}',
  start_n integer[] NOT NULL DEFAULT '{}',
  granted integer NOT NULL DEFAULT 0,
  PRIMARY KEY (queue_name, bucket_key)
);

-- Set by the throttled claim on the jobs it claims; the plain and per-key claims clear it.
ALTER TABLE jobs ADD COLUMN holds_queue_slot boolean NOT NULL DEFAULT false;

-- Serves the live-lease count of a concurrency-limited queue. Only jobs claimed through a limit
-- enter it, so plain claims and heartbeats of other queues never write to it.
CREATE INDEX jobs_queue_slots_idx
  ON jobs (queue_name, lease_expires_at)
  WHERE status = 'running' AND holds_queue_slot;

-- Privileges: migration 016's grant_roles(), which runs after this. The worker writes the limiter
-- rows only through its throttled claim function (storage/functions.ts); producer and worker read
-- both tables (stats and metrics), and nobody but the admin and the owner writes them directly.
