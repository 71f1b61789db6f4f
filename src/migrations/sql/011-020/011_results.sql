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
-- that may read jobs may wait for them (a producer's enqueueAndWait, a worker's waitFor), yet none
-- needs an UPDATE privilege on jobs for it. It only ever sets the flag, on live jobs. Returns the
-- ids it flagged. Like the functions of storage/functions.ts (issue 17): owned by the migrating
-- role, search_path pinned to pg_catalog, pg_temp, the table qualified with the schema (written in
-- here by format(), so a caller's temporary table cannot stand in for it), EXECUTE revoked from
-- PUBLIC. Migration 016's grant_roles() grants EXECUTE to the schema's producer, worker and admin.
DO $create$
BEGIN
  EXECUTE format($fn$
    CREATE FUNCTION wait_for_jobs(ids bigint[]) RETURNS SETOF bigint
    LANGUAGE sql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $wait$
      UPDATE %I.jobs SET notify_on_finish = true
      WHERE id = ANY (ids) AND status IN ('pending', 'running') AND NOT notify_on_finish
      RETURNING id
    $wait$
  $fn$, current_schema());
END
$create$;
REVOKE EXECUTE ON FUNCTION wait_for_jobs(bigint[]) FROM PUBLIC;
