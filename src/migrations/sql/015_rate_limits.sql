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

-- The roles' grants, again with the new tables: grant_roles() as 006 defined it, plus the worker's
-- privileges on the limiter tables (jobs columns, holds_queue_slot included, are computed by it).
-- Later migrations that add tables redefine it the same way, then run it.
CREATE OR REPLACE FUNCTION grant_roles() RETURNS text[]
LANGUAGE plpgsql
-- The Leasehold schema, as the migrator set it: the function works the same when called later.
SET search_path FROM CURRENT
AS $grant$
DECLARE
  s text := current_schema();
  role_name text;
  granted text[] := '{}';
  worker_updatable text;
  worker_event_columns text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY['leasehold_producer', 'leasehold_worker', 'leasehold_admin'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
      EXCEPTION
        -- Another schema's migration created it concurrently (unique_violation when we waited on it).
        WHEN duplicate_object OR unique_violation THEN NULL;
        WHEN insufficient_privilege THEN
          RAISE NOTICE 'leasehold: role % does not exist and % may not create roles; its grants on schema % were skipped. Have a superuser run CREATE ROLE % NOLOGIN, then run SELECT %.grant_roles();',
            role_name, current_user, s, role_name, quote_ident(s);
      END;
    END IF;
  END LOOP;

  -- Row-level security with an allow-all policy for PUBLIC: nothing changes for anyone until a
  -- restrictive policy below names a role.
  ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
  ALTER TABLE job_events ENABLE ROW LEVEL SECURITY;
  DROP POLICY IF EXISTS leasehold_everyone ON jobs;
  CREATE POLICY leasehold_everyone ON jobs USING (true) WITH CHECK (true);
  DROP POLICY IF EXISTS leasehold_everyone ON job_events;
  CREATE POLICY leasehold_everyone ON job_events USING (true) WITH CHECK (true);
  DROP POLICY IF EXISTS worker_updates_live_jobs ON jobs;
  DROP POLICY IF EXISTS worker_deletes_running_jobs ON jobs;
  DROP POLICY IF EXISTS worker_appends_attempt_events ON job_events;

  -- Each role's privileges are revoked and granted anew, so running this again leaves exactly
  -- what it describes (revoking a table privilege also revokes its column privileges).
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_producer') THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM leasehold_producer', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM leasehold_producer', s);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO leasehold_producer', s);
    -- Reading jobs back (status, history); migrations: the migrator's up-to-date check.
    GRANT SELECT ON jobs, finished_jobs, job_events, migrations TO leasehold_producer;
    -- Exactly the columns the enqueue statements set; status, lease and error columns keep their
    -- defaults, so a producer's job is always a fresh pending one.
    GRANT INSERT (id, queue_name, payload, priority, available_at, max_attempts, ordering_key,
                  concurrency_key, awaits_predecessor) ON jobs TO leasehold_producer;
    -- The enqueue span's trace context, written after the insert when OpenTelemetry records.
    GRANT UPDATE (traceparent) ON jobs TO leasehold_producer;
    -- Keyed enqueue claims its key row (ON CONFLICT DO UPDATE locks and returns the existing one);
    -- ordered enqueue takes its ordering key's row the same way.
    GRANT SELECT, INSERT ON job_keys TO leasehold_producer;
    GRANT UPDATE (queue_name) ON job_keys TO leasehold_producer;
    GRANT SELECT, INSERT, UPDATE ON ordering_keys TO leasehold_producer;
    -- Keyed and ordered enqueue draw job ids with nextval() before inserting.
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO leasehold_producer',
                   pg_get_serial_sequence(format('%I.jobs', s), 'id'));
    granted := granted || 'leasehold_producer'::text;
  END IF;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM leasehold_worker', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM leasehold_worker', s);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO leasehold_worker', s);
    -- Reads: claims (queue settings), getJob and history, stats for metrics, the up-to-date check.
    GRANT SELECT ON jobs, finished_jobs, lease_refusals, job_events, queues, ordering_keys,
                    concurrency_keys, job_effects, migrations TO leasehold_worker;
    -- Every jobs column but the job's identity and input, computed so that columns added by later
    -- migrations (the claim id of 005) are included when grant_roles() runs after them.
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO worker_updatable
    FROM pg_attribute
    WHERE attrelid = format('%I.jobs', s)::regclass AND attnum > 0 AND NOT attisdropped
      AND attname NOT IN ('id', 'queue_name', 'payload', 'max_attempts', 'created_at', 'ordering_key',
                          'concurrency_key', 'traceparent');
    EXECUTE format('GRANT UPDATE (%s) ON jobs TO leasehold_worker', worker_updatable);
    -- A completion deletes the job and inserts its finished record; the policy below limits the
    -- delete to running jobs.
    GRANT DELETE ON jobs TO leasehold_worker;
    GRANT INSERT ON finished_jobs TO leasehold_worker;
    -- Lost-fence counters and the effects ledger (no delete: forgetting effects is a replay's).
    GRANT INSERT, UPDATE ON lease_refusals, job_effects, concurrency_keys TO leasehold_worker;
    -- Ordering hand-overs, and the fairness pass removing idle keys.
    GRANT INSERT, UPDATE, DELETE ON ordering_keys TO leasehold_worker;
    -- Rate and concurrency limits (015): the throttled claim locks and writes the limiter rows;
    -- stats read them.
    GRANT SELECT, UPDATE ON rate_limits TO leasehold_worker;
    GRANT SELECT, INSERT, UPDATE ON rate_limit_keys TO leasehold_worker;
    -- Attempt events: every column but `actor`, which only operators' events carry.
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO worker_event_columns
    FROM pg_attribute
    WHERE attrelid = format('%I.job_events', s)::regclass AND attnum > 0 AND NOT attisdropped
      AND attname NOT IN ('id', 'actor');
    EXECUTE format('GRANT INSERT (%s) ON job_events TO leasehold_worker', worker_event_columns);

    CREATE POLICY worker_updates_live_jobs ON jobs AS RESTRICTIVE FOR UPDATE TO leasehold_worker
      USING (status IN ('pending', 'running'))
      WITH CHECK (status IN ('pending', 'running', 'dead'));
    CREATE POLICY worker_deletes_running_jobs ON jobs AS RESTRICTIVE FOR DELETE TO leasehold_worker
      USING (status = 'running');
    CREATE POLICY worker_appends_attempt_events ON job_events AS RESTRICTIVE FOR INSERT TO leasehold_worker
      WITH CHECK (kind IN ('retried', 'dead', 'snoozed', 'skipped', 'lease_expired', 'refused'));
    granted := granted || 'leasehold_worker'::text;
  END IF;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_admin') THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM leasehold_admin', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM leasehold_admin', s);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO leasehold_admin', s);
    -- Operations (replay, cancel, skip, prune, queue settings), reads for the dashboard, and all a
    -- worker does: an admin may run workers and their retention. No DDL, no TRUNCATE, and the
    -- migrations table only to read: the schema's shape stays the owner's.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO leasehold_admin', s);
    REVOKE INSERT, UPDATE, DELETE ON migrations FROM leasehold_admin;
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO leasehold_admin', s);
    granted := granted || 'leasehold_admin'::text;
  END IF;
  RETURN granted;
END
$grant$;

-- Applied at once where all three roles exist. Otherwise 006 already told the owner to run
-- grant_roles() once a superuser made them (saying it again would repeat its notices), and the
-- roles that do exist get the new tables' privileges here.
DO $apply$
BEGIN
  IF (SELECT count(*) FROM pg_roles
      WHERE rolname IN ('leasehold_producer', 'leasehold_worker', 'leasehold_admin')) = 3 THEN
    PERFORM grant_roles();
  ELSE
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
      GRANT UPDATE (holds_queue_slot) ON jobs TO leasehold_worker;
      GRANT SELECT, UPDATE ON rate_limits TO leasehold_worker;
      GRANT SELECT, INSERT, UPDATE ON rate_limit_keys TO leasehold_worker;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_admin') THEN
      GRANT SELECT, INSERT, UPDATE, DELETE ON rate_limits, rate_limit_keys TO leasehold_admin;
    END IF;
  END IF;
END
$apply$;
