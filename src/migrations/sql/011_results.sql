-- 011: a job's result and progress, and waiters' interest in a job's end (issue 15).
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- The handler's return value as JSON, written by the completion statement (JobCompleteMany) into
-- the finished record: kept as long as that record (succeeded-job retention), pruned with it.
-- NULL for a handler that returned nothing. Bounded by the worker (maxResultBytes, 64 KiB by
-- default); no database constraint, so a writer that skips the bound cannot make a completion
-- batch fail for everyone else in it.
ALTER TABLE finished_jobs ADD COLUMN result jsonb;

-- The latest `job.progress(detail)` of a running job, written by the lease renewal
-- (JobExtendLeaseMany) that carries it: no statement of its own. Bounded by the worker
-- (maxProgressBytes, 8 KiB by default). Kept on the row through retries and death: the last
-- progress any attempt reported.
ALTER TABLE jobs ADD COLUMN progress jsonb;

-- Someone waits for this job's end (`lh.waitFor`). The statements that end a job (completion, a
-- failure that kills it, cancel, the recovery sweep killing it) send one notification per batch
-- with the ids of such jobs, and only when the batch holds one: jobs nobody waits for never make
-- a transaction notify (a notifying commit takes a database-wide lock; see wakeup-coalescer.ts).
-- A constant default: adding the column rewrites nothing.
ALTER TABLE jobs ADD COLUMN notify_on_finish boolean NOT NULL DEFAULT false;

-- A waiter flags the jobs it waits for through this function rather than by UPDATE: every role
-- that may read jobs may wait for them (a producer's enqueueAndWait), yet none needs an UPDATE
-- privilege on jobs for it, and grant_roles() (which revokes and re-grants table privileges) leaves
-- it alone. It only ever sets the flag, on live jobs. Returns the ids it flagged.
CREATE FUNCTION wait_for_jobs(ids bigint[]) RETURNS SETOF bigint
LANGUAGE sql
SECURITY DEFINER
-- The Leasehold schema, as the migrator set it, whoever calls.
SET search_path FROM CURRENT
AS $wait$
  UPDATE jobs SET notify_on_finish = true
  WHERE id = ANY (ids) AND status IN ('pending', 'running') AND NOT notify_on_finish
  RETURNING id
$wait$;
REVOKE EXECUTE ON FUNCTION wait_for_jobs(bigint[]) FROM PUBLIC;

-- Grants where the roles exist (grant_roles() computes the worker's updatable columns itself, but
-- would repeat its notices about roles this owner may not create): the worker writes progress
-- (and gets the flag's column too, as grant_roles() grants it every jobs column but the job's
-- identity and input); every role may wait. A role without the grant can still wait: it polls (src/job-waiters.ts).
DO $grant$
DECLARE
  role_name text;
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
    GRANT UPDATE (progress, notify_on_finish) ON jobs TO leasehold_worker;
  END IF;
  FOREACH role_name IN ARRAY ARRAY['leasehold_producer', 'leasehold_worker', 'leasehold_admin'] LOOP
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION wait_for_jobs(bigint[]) TO %I', role_name);
    END IF;
  END LOOP;
END
$grant$;
