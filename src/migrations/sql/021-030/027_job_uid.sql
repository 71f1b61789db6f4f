-- 027: every job carries an identity that no other job can have, even after a failover reissued
-- its id (issue 31). See docs/api.md ("job.idempotencyKey") and docs/operations.md.
-- The migrator runs this with search_path set to the Leasehold schema.
--
-- Why: ids come from a sequence, and a sequence is not made durable by each nextval (PostgreSQL
-- logs sequence advances ahead, 32 values at a time, and an asynchronous standby can be behind
-- the primary's last commits). A standby promoted after losing the primary's last transactions
-- hands out again ids that acknowledged jobs already had. The idempotency key was `schema:id`, so
-- a new job could get the key of a lost one, and a downstream system that had seen that key would
-- drop the new job's side effect as a duplicate, silently.
--
-- The identity is a random UUID, drawn by the column's default at insert: no enqueue statement
-- names it, and a reissued id comes with a fresh one. A job keeps it for its whole life (retries,
-- lane moves, a replay of a dead job: the same job, so the same key), and the completion copies it
-- into the finished record.
--
-- Jobs enqueued before this migration keep NULL, and with it their old key `schema:id`: a job
-- whose side effects are already recorded downstream under that key goes on using it.
--
-- Online: ADD COLUMN without a default rewrites nothing (a catalog change), and SET DEFAULT
-- applies to rows inserted from now on; both recurse from the partitioned parents to their lanes.
-- gen_random_uuid() is built into PostgreSQL 13 and later (no extension).
ALTER TABLE jobs ADD COLUMN job_uid uuid;
ALTER TABLE jobs ALTER COLUMN job_uid SET DEFAULT gen_random_uuid();
-- The finished record carries the identity the completion copies; it has no default of its own.
ALTER TABLE finished_jobs ADD COLUMN job_uid uuid;

COMMENT ON COLUMN jobs.job_uid IS
  'The job''s identity across failovers (027): a reissued id never repeats it. NULL for jobs enqueued before 027.';
COMMENT ON COLUMN finished_jobs.job_uid IS 'The finished job''s jobs.job_uid, copied by its completion.';

-- The roles read jobs column by column (016's grant_roles() lists the columns present): the new
-- column is granted to the schema's producer and worker where they exist, rather than by running
-- grant_roles() again (it would repeat its notices about roles this owner may not create, and
-- redo every grant of the schema). grant_roles() run later includes the column by itself.
DO $grant$
DECLARE
  role_name text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY[current_schema() || '_producer', current_schema() || '_worker'] LOOP
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      EXECUTE format('GRANT SELECT (job_uid) ON jobs TO %I', role_name);
    END IF;
  END LOOP;
END
$grant$;
