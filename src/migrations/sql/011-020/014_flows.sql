-- 014: flows, jobs that depend on jobs. See "Flows" in docs/api.md and docs/state-machine.md.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- A parent's result, read by its children through job.parents(). Migration 011 (results) adds the
-- same column, written by the completion statement; IF NOT EXISTS lets either run first.
ALTER TABLE finished_jobs ADD COLUMN IF NOT EXISTS result jsonb;

-- A flow child waits for its parents the way a job waits behind its ordering key's head: outside the
-- claimable index. `waiting_parents` counts the parents whose success it still needs; the statement
-- that accepts a parent's completion decrements it, and at 0 the child is claimable in that same
-- statement. `has_children` marks a parent, so that completions, failures, the sweep and cancel of
-- plain jobs (false: every job not enqueued by enqueueFlow) never look at job_dependencies.
-- Both are NOT NULL with a constant default: adding them rewrites nothing.
ALTER TABLE jobs ADD COLUMN waiting_parents integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN has_children boolean NOT NULL DEFAULT false;

-- The claimable set now also excludes children waiting for their parents. Same columns and order as
-- 003's index; every statement that reads it repeats the predicate. Built without CONCURRENTLY (the
-- migrator runs in a transaction): on a large jobs table the build blocks writes for one scan.
DROP INDEX jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx
  ON jobs (queue_name, priority DESC, available_at, id)
  WHERE status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0;

-- One row per flow (one enqueueFlow call). Its nodes and edges go with it (ON DELETE CASCADE) once
-- the retention service finds none of its nodes left in jobs or finished_jobs.
CREATE TABLE flows (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  node_count integer NOT NULL CHECK (node_count >= 1)
);

-- Each job of a flow: the caller's name for it (`ref`) and what it does when a parent dies.
CREATE TABLE flow_nodes (
  job_id bigint PRIMARY KEY,
  flow_id bigint NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
  ref text NOT NULL CHECK (length(ref) BETWEEN 1 AND 200),
  on_parent_dead text NOT NULL DEFAULT 'block' CHECK (on_parent_dead IN ('block', 'cancel', 'run')),
  UNIQUE (flow_id, ref)
);

-- Each edge: child_id runs after parent_id succeeded. `resolved`: this edge no longer holds the child
-- back (the parent succeeded, or died with the child's policy 'run'); set by the statement that
-- decremented the child's waiting_parents, so that no edge is counted twice (a replayed parent that
-- succeeds after its 'run' child was released decrements nothing).
CREATE TABLE job_dependencies (
  parent_id bigint NOT NULL,
  child_id bigint NOT NULL,
  flow_id bigint NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
  resolved boolean NOT NULL DEFAULT false,
  PRIMARY KEY (parent_id, child_id)
);
-- Serves job.parents() and getFlow's edges by child; the primary key serves the release by parent.
CREATE INDEX job_dependencies_child_idx ON job_dependencies (child_id, parent_id);
-- Serves getFlow and the cascade delete of a pruned flow.
CREATE INDEX job_dependencies_flow_idx ON job_dependencies (flow_id);

-- Privileges: migration 016's grant_roles(), which runs after this. The producer writes a flow
-- only through its enqueue_flow function and the worker releases and cancels children only inside
-- its completion, failure and recovery functions (storage/functions.ts), so neither role needs a
-- write privilege or a row policy here; both read the flow tables (job.parents(), getFlow).
