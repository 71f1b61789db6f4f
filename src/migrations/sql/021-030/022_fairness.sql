-- 022: fair turns between the tenants of a queue (issue 34). See docs/api.md ("Fair turns between
-- tenants") and docs/storage.md. The migrator runs this with search_path set to the Leasehold schema.

-- The key a job takes turns under (a tenant, a customer), set at enqueue; null for none. Bounded
-- here as ordering and concurrency keys are (003), so a direct function call cannot pass more.
ALTER TABLE jobs ADD COLUMN fairness_key text CHECK (length(fairness_key) BETWEEN 1 AND 200);

-- A queue's claim policy: null (the default) claims in preference order; 'round-robin' claims
-- through JobClaimManyFair (storage/claim-fair.ts), taking turns between fairness keys. The plain
-- claim does not look at it: a queue without fairness keeps its statement, to the letter.
-- Fairness composes with a per-key concurrency limit (JobClaimManyLimitedFair, claim-limited.ts),
-- not with the rate and concurrency limits of the throttled claim (yet): one or the other.
ALTER TABLE queues ADD COLUMN fairness text CHECK (fairness IN ('round-robin'));
ALTER TABLE queues ADD CONSTRAINT queues_fairness_alone
  CHECK (fairness IS NULL OR (rate_limit_max IS NULL AND concurrency_limit IS NULL));

-- Serves the fair claim's walk over the distinct keys with work at one priority (a skip scan: one
-- probe per key) and each key's oldest claimable jobs (a range on the fourth column after three
-- equalities). Only rows with a fairness key enter it: plain jobs never write an entry here.
-- `awaits_predecessor IS FALSE` (the column is NOT NULL: the same rows as NOT awaits_predecessor)
-- so that the fair claim's probes, which say it the same way, cannot be served by
-- jobs_claimable_idx instead: in a lane holding none of a key's jobs the planner found the two
-- equally cheap and walked all of the lane's other jobs looking for that key.
CREATE INDEX jobs_fairness_idx ON jobs (queue_name, priority DESC, fairness_key, available_at, id)
  WHERE status = 'pending' AND awaits_predecessor IS FALSE AND waiting_parents = 0
    AND fairness_key IS NOT NULL;

-- Where a round-robin queue's next turn starts: the key its last claim served last. Written by the
-- fair claim in the same statement, only when no other claim holds the row (SKIP LOCKED): claims
-- never wait for one another here, and a claim that could not move it starts the next one a turn
-- early, which a concurrent claim made up for. Apart from queues so that these writes never touch
-- the row every plain claim reads. Created by configureQueue with fairness on.
CREATE TABLE fair_turns (
  queue_name text PRIMARY KEY,
  last_key text
);

-- The admin roles get it with every table; the worker writes it only through the claim function.
SELECT grant_roles();
