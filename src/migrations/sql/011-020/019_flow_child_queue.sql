-- 019: each flow edge records its child's queue. See docs/scaling.md, "Flow release".
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.
--
-- Why: a parent's completion releases its children (014). job_dependencies named a child by id
-- only, so the release looked it up by id in every queue's part of jobs: in a layout split by queue
-- (one Citus shard or one cluster per queue) it reached every shard. With the child's queue on the
-- edge, the release looks each child up by (queue, id), in its own queue's part.
--
-- A job never changes queue, so the value written when the flow is enqueued stays true. It is
-- nullable: an edge whose child record was already removed by retention has no queue to record
-- (there is nothing left to release), and a process of an older version still running during a
-- rolling upgrade writes edges without it. The release looks such an edge's child up by id, as
-- before (storage/flow-release.ts).
--
-- Online: adding a nullable column without a default changes the catalog only. The backfill writes
-- each unresolved edge once, child looked up by primary key; resolved edges are never read by a
-- release and keep NULL. It holds the row locks of the edges it writes until the migration
-- commits: a completion releasing one of them waits for that, never longer.
ALTER TABLE job_dependencies ADD COLUMN child_queue text;

UPDATE job_dependencies AS d
SET child_queue = j.queue_name
FROM jobs AS j
WHERE j.id = d.child_id AND NOT d.resolved;
