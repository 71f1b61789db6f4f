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

-- The parent-dead cascade cancels children with its own code; the roles below let a worker write it.
-- grant_roles() is redefined with the flows grants (producer: enqueueFlow; worker: releases and
-- job.parents(); the worker's policies admit a PARENT_DEAD cancel and its event, nothing else new).
CREATE OR REPLACE FUNCTION grant_roles() RETURNS text[]
LANGUAGE plpgsql
-- The Leasehold schema, as the migrator set it: the function works the same when called later.
SET search_path FROM CURRENT
AS $grant$
DECLARE
  s text := current_schema();
  role_name text;
  granted text[] := '{}';
  worker_updatable text;
  worker_event_columns text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY['leasehold_producer', 'leasehold_worker', 'leasehold_admin'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
      EXCEPTION
        -- Another schema's migration created it concurrently (unique_violation when we waited on it).
        WHEN duplicate_object OR unique_violation THEN NULL;
        WHEN insufficient_privilege THEN
          RAISE NOTICE 'leasehold: role % does not exist and % may not create roles; its grants on schema % were skipped. Have a superuser run CREATE ROLE % NOLOGIN, then run SELECT %.grant_roles();',
            role_name, current_user, s, role_name, quote_ident(s);
      END;
    END IF;
  END LOOP;

  -- Row-level security with an allow-all policy for PUBLIC: nothing changes for anyone until a
  -- restrictive policy below names a role.
  ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
  ALTER TABLE job_events ENABLE ROW LEVEL SECURITY;
  DROP POLICY IF EXISTS leasehold_everyone ON jobs;
  CREATE POLICY leasehold_everyone ON jobs USING (true) WITH CHECK (true);
  DROP POLICY IF EXISTS leasehold_everyone ON job_events;
  CREATE POLICY leasehold_everyone ON job_events USING (true) WITH CHECK (true);
  DROP POLICY IF EXISTS worker_updates_live_jobs ON jobs;
  DROP POLICY IF EXISTS worker_deletes_running_jobs ON jobs;
  DROP POLICY IF EXISTS worker_appends_attempt_events ON job_events;

  -- Each role's privileges are revoked and granted anew, so running this again leaves exactly
  -- what it describes (revoking a table privilege also revokes its column privileges).
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_producer') THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM leasehold_producer', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM leasehold_producer', s);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO leasehold_producer', s);
    -- Reading jobs back (status, history); migrations: the migrator's up-to-date check.
    GRANT SELECT ON jobs, finished_jobs, job_events, migrations TO leasehold_producer;
    -- Exactly the columns the enqueue statements set; status, lease and error columns keep their
    -- defaults, so a producer's job is always a fresh pending one.
    GRANT INSERT (id, queue_name, payload, priority, available_at, max_attempts, ordering_key,
                  concurrency_key, awaits_predecessor, waiting_parents, has_children) ON jobs TO leasehold_producer;
    -- Flows (014): enqueueFlow writes the graph, getFlow reads it back.
    GRANT SELECT, INSERT ON flows, flow_nodes, job_dependencies TO leasehold_producer;
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO leasehold_producer',
                   pg_get_serial_sequence(format('%I.flows', s), 'id'));
    -- The enqueue span's trace context, written after the insert when OpenTelemetry records.
    GRANT UPDATE (traceparent) ON jobs TO leasehold_producer;
    -- Keyed enqueue claims its key row (ON CONFLICT DO UPDATE locks and returns the existing one);
    -- ordered enqueue takes its ordering key's row the same way.
    GRANT SELECT, INSERT ON job_keys TO leasehold_producer;
    GRANT UPDATE (queue_name) ON job_keys TO leasehold_producer;
    GRANT SELECT, INSERT, UPDATE ON ordering_keys TO leasehold_producer;
    -- Keyed and ordered enqueue draw job ids with nextval() before inserting.
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO leasehold_producer',
                   pg_get_serial_sequence(format('%I.jobs', s), 'id'));
    granted := granted || 'leasehold_producer'::text;
  END IF;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM leasehold_worker', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM leasehold_worker', s);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO leasehold_worker', s);
    -- Reads: claims (queue settings), getJob and history, stats for metrics, the up-to-date check.
    GRANT SELECT ON jobs, finished_jobs, lease_refusals, job_events, queues, ordering_keys,
                    concurrency_keys, job_effects, migrations TO leasehold_worker;
    -- Flows (014): completions release children (an edge is marked resolved), job.parents() reads.
    GRANT SELECT ON flows, flow_nodes, job_dependencies TO leasehold_worker;
    GRANT UPDATE (resolved) ON job_dependencies TO leasehold_worker;
    -- Every jobs column but the job's identity and input, computed so that columns added by later
    -- migrations (the claim id of 005) are included when grant_roles() runs after them.
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO worker_updatable
    FROM pg_attribute
    WHERE attrelid = format('%I.jobs', s)::regclass AND attnum > 0 AND NOT attisdropped
      AND attname NOT IN ('id', 'queue_name', 'payload', 'max_attempts', 'created_at', 'ordering_key',
                          'concurrency_key', 'traceparent');
    EXECUTE format('GRANT UPDATE (%s) ON jobs TO leasehold_worker', worker_updatable);
    -- A completion deletes the job and inserts its finished record; the policy below limits the
    -- delete to running jobs.
    GRANT DELETE ON jobs TO leasehold_worker;
    GRANT INSERT ON finished_jobs TO leasehold_worker;
    -- Lost-fence counters and the effects ledger (no delete: forgetting effects is a replay's).
    GRANT INSERT, UPDATE ON lease_refusals, job_effects, concurrency_keys TO leasehold_worker;
    -- Ordering hand-overs, and the fairness pass removing idle keys.
    GRANT INSERT, UPDATE, DELETE ON ordering_keys TO leasehold_worker;
    -- Attempt events: every column but `actor`, which only operators' events carry.
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO worker_event_columns
    FROM pg_attribute
    WHERE attrelid = format('%I.job_events', s)::regclass AND attnum > 0 AND NOT attisdropped
      AND attname NOT IN ('id', 'actor');
    EXECUTE format('GRANT INSERT (%s) ON job_events TO leasehold_worker', worker_event_columns);

    CREATE POLICY worker_updates_live_jobs ON jobs AS RESTRICTIVE FOR UPDATE TO leasehold_worker
      USING (status IN ('pending', 'running'))
      -- A worker's fail or sweep that makes a flow parent dead cancels its 'cancel' children (014),
      -- and only those: the cancel carries the PARENT_DEAD code. Compared as text: a fresh schema
      -- migrates in one transaction, and the enum value 'cancelled' (002) may not be used in it.
      WITH CHECK (status IN ('pending', 'running', 'dead')
                  OR (status::text = 'cancelled' AND last_error_code = 'PARENT_DEAD'));
    CREATE POLICY worker_deletes_running_jobs ON jobs AS RESTRICTIVE FOR DELETE TO leasehold_worker
      USING (status = 'running');
    CREATE POLICY worker_appends_attempt_events ON job_events AS RESTRICTIVE FOR INSERT TO leasehold_worker
      WITH CHECK (kind IN ('retried', 'dead', 'snoozed', 'skipped', 'lease_expired', 'refused')
                  OR (kind = 'cancelled' AND error_code = 'PARENT_DEAD'));
    granted := granted || 'leasehold_worker'::text;
  END IF;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_admin') THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM leasehold_admin', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM leasehold_admin', s);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO leasehold_admin', s);
    -- Operations (replay, cancel, skip, prune, queue settings), reads for the dashboard, and all a
    -- worker does: an admin may run workers and their retention. No DDL, no TRUNCATE, and the
    -- migrations table only to read: the schema's shape stays the owner's.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO leasehold_admin', s);
    REVOKE INSERT, UPDATE, DELETE ON migrations FROM leasehold_admin;
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO leasehold_admin', s);
    granted := granted || 'leasehold_admin'::text;
  END IF;
  RETURN granted;
END
$grant$;
-- Applied now where any of the roles exists. Where none does, 006 already said how to create them and
-- run grant_roles() (now this version); calling it here would only repeat that notice.
DO $apply$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles
             WHERE rolname IN ('leasehold_producer', 'leasehold_worker', 'leasehold_admin')) THEN
    PERFORM grant_roles();
  END IF;
END
$apply$;
