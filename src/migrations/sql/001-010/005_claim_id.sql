-- 005: a random claim id beside the fencing token.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- The token alone is a counter: if an asynchronous failover loses the last committed claims, the
-- new primary can hand out a token number that an older, lost claim already carried, and a worker
-- still holding that older lease would pass the fence. Every claim statement therefore also stamps
-- a random 64-bit claim id on the rows it claims, and every fenced write (heartbeat, completion,
-- failure, snooze, effects) must present it together with the owner and token. A reissued token
-- then matches a stale lease only if the claim id also collides (odds 2^-64).
-- Null until a job's first claim; nullable without a default, so adding it rewrites nothing.
ALTER TABLE jobs ADD COLUMN lease_claim_id bigint;
