-- 010: the claim id in the records that end an attempt (finished_jobs and job_events).
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- 005 put a random claim id beside the fencing token on the live job, because an asynchronous
-- failover can lose the newest claims and the new primary then reissues a token number an older
-- claim already carried. The records that end an attempt kept only owner and token, so a worker
-- whose write's answer was lost asked "did my completion land?" by job, token and owner, and a
-- newer claim with the same token number and owner, completed on the new primary, answered yes
-- for it (seen in a measured failover). Storing the claim id lets that lookup (outcome-lookup.ts)
-- and the history tell the two claims apart. Rows written before this migration keep null: they
-- predate the lookups that need it, and a null never matches a presented claim id.
-- Nullable without a default, so adding the columns rewrites nothing.
ALTER TABLE finished_jobs ADD COLUMN lease_claim_id bigint;
ALTER TABLE job_events ADD COLUMN lease_claim_id bigint;

-- The worker role inserts job_events by column (every column but id and actor): grant it the new
-- one, where the role exists (grant_roles() would grant the same, but would repeat its notices about
-- roles this owner may not create). grant_roles() run later includes the column by itself.
DO $grant$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
    GRANT INSERT (lease_claim_id) ON job_events TO leasehold_worker;
  END IF;
END
$grant$;
