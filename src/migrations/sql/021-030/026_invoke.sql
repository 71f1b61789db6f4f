-- 026: job.invoke (issue 30). See docs/api.md ("Durable steps") and src/storage/invoke.ts. The
-- migrator runs this with search_path set to the Leasehold schema.

-- An invoked job and the job that invoked it are joined by a flow edge read the other way round:
-- `parent_id` is the invoked job (the one whose end is awaited), `child_id` the invoking job, whose
-- waiting_parents the edge holds up. Such an edge belongs to no flow: its flow_id is NULL, which is
-- how flows' release tells it (storage/flow-release.ts): resolved on the invoked job's accepted
-- completion, and on its death or cancellation always as the policy 'run' (the invoking job wakes
-- and reads how it ended). Removed with the invoking job (retention). Dropping NOT NULL changes the
-- catalog only.
ALTER TABLE job_dependencies ALTER COLUMN flow_id DROP NOT NULL;

-- An invoke is a step of kind 'invoke': its result {"childId": "...", "queue": "..."}, recorded
-- with the child's insert, so a retried job finds the same child and enqueues no second one.
ALTER TABLE job_steps DROP CONSTRAINT job_steps_kind_check;
ALTER TABLE job_steps ADD CONSTRAINT job_steps_kind_check
  CHECK (kind IN ('step', 'sleep', 'wait', 'invoke'));

SELECT grant_roles();
