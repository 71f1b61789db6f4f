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

-- Grants where the roles exist (grant_roles() computes the worker's updatable columns itself, but
-- would repeat its notices about roles this owner may not create): the worker writes progress
-- (and may wait for a job, as a parent of a flow does); a producer may register a wait. A role
-- without the grant can still wait: it falls back to polling (see src/job-waiters.ts).
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
    GRANT UPDATE (progress, notify_on_finish) ON jobs TO leasehold_worker;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_producer') THEN
    GRANT UPDATE (notify_on_finish) ON jobs TO leasehold_producer;
  END IF;
END
$grant$;
