-- 016: roles per schema, whose producer and worker write only through functions (issue 17).
-- See "Database roles" in docs/operators-guide.md and the threat model in docs/security.md.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.
--
-- Three NOLOGIN group roles per schema, named after it (schema names are at most 40 characters):
--   <schema>_producer  enqueue (one, many, keyed, ordered, deduped, a flow) through the schema's
--                      producer functions; read jobs' status, history and results, schedules and
--                      flows, never a payload; wait for jobs (wait_for_jobs()).
--   <schema>_worker    claim (plain, per-key, rate-limited), renew (with progress), complete (with
--                      results, releasing flow children), fail, snooze, the effects ledger,
--                      recovery, the fairness pass and ordering repair through the schema's worker
--                      functions; read jobs without payloads (a claimed job's payload comes back
--                      from the claim function), queue settings, stats, schedules without payloads,
--                      flows and the rate-limit tables; wait for jobs. Never fires schedules.
--   <schema>_admin     everything the CLI and the dashboard do, workers and retention included
--                      (table privileges, as 006's leasehold_admin had), and every function.
-- The producer and worker roles have no INSERT, UPDATE or DELETE on any table: each transition
-- is a SECURITY DEFINER function whose body is the library's own statement (the fence and the
-- state machine inside it), created by the migrator from src/storage/functions.ts, owned by the
-- migrating role (the schema owner), with a pinned search_path, EXECUTE revoked from PUBLIC and
-- granted by grant_function_roles() below. A role of one schema has nothing on another schema.
--
-- 006's cluster-wide roles: for the default schema "leasehold" the new names are the same names,
-- now meaning that schema only. On any other schema, leasehold_producer and leasehold_worker lose
-- every privilege here (they allowed the abuses issue 17 lists); leasehold_admin keeps the
-- privileges of <schema>_admin (deprecated: grant <schema>_admin instead).
--
-- As in 006, a migrating user who may not create roles is not locked out: missing roles are
-- skipped with a NOTICE saying how to finish (a superuser creates them, then grant_roles()).
-- Later migrations that add tables or columns end with `SELECT grant_roles();` as before.
-- 011-015 were written beside this one and leave their privileges to it: grant_roles() here covers
-- their tables (and is the only definition: none of them redefines it).

-- Who may execute the schema's functions: each function is tagged by its comment
-- 'leasehold:<role>:<statement>' (written by the migrator). EXECUTE is revoked from PUBLIC and
-- granted to the role named, and to the admin roles. Called by the migrator after it creates
-- functions, and by grant_roles(). Returns how many functions it granted.
CREATE FUNCTION grant_function_roles() RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $grant$
DECLARE
  s text := current_schema();
  fn record;
  grantee text;
  n integer := 0;
BEGIN
  FOR fn IN
    SELECT p.oid::regprocedure::text AS signature, split_part(d.description, ':', 2) AS role
    FROM pg_proc AS p
    JOIN pg_namespace AS ns ON ns.oid = p.pronamespace
    JOIN pg_description AS d ON d.objoid = p.oid AND d.classoid = 'pg_proc'::regclass AND d.objsubid = 0
    WHERE ns.nspname = s AND d.description LIKE 'leasehold:%'
  LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn.signature);
    FOREACH grantee IN ARRAY ARRAY[s || '_' || fn.role, s || '_admin', 'leasehold_admin'] LOOP
      IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = grantee) THEN
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn.signature, grantee);
      END IF;
    END LOOP;
    n := n + 1;
  END LOOP;
  RETURN n;
END
$grant$;

REVOKE EXECUTE ON FUNCTION grant_function_roles() FROM PUBLIC;

CREATE OR REPLACE FUNCTION grant_roles() RETURNS text[]
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $grant$
DECLARE
  s text := current_schema();
  producer text := s || '_producer';
  worker text := s || '_worker';
  admin text := s || '_admin';
  role_name text;
  granted text[] := '{}';
  readable_job_columns text;
  readable_schedule_columns text;
BEGIN
  FOREACH role_name IN ARRAY ARRAY[producer, worker, admin] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
      EXCEPTION
        WHEN duplicate_object OR unique_violation THEN NULL;
        WHEN insufficient_privilege THEN
          RAISE NOTICE 'leasehold: role % does not exist and % may not create roles; its grants on schema % were skipped. Have a superuser run CREATE ROLE % NOLOGIN, then run SELECT %.grant_roles();',
            role_name, current_user, s, role_name, quote_ident(s);
      END;
    END IF;
  END LOOP;

  -- 006's restrictive policies bound leasehold_worker's direct writes; no role writes directly now.
  DROP POLICY IF EXISTS worker_updates_live_jobs ON jobs;
  DROP POLICY IF EXISTS worker_deletes_running_jobs ON jobs;
  DROP POLICY IF EXISTS worker_appends_attempt_events ON job_events;

  -- Every jobs column but the payload, computed so that columns added later are included when
  -- grant_roles() runs after the migration that adds them.
  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO readable_job_columns
  FROM pg_attribute
  WHERE attrelid = format('%I.jobs', s)::regclass AND attnum > 0 AND NOT attisdropped
    AND attname <> 'payload';
  -- The same for schedules (012): a schedule's payload is a job's payload before it is enqueued.
  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO readable_schedule_columns
  FROM pg_attribute
  WHERE attrelid = format('%I.schedules', s)::regclass AND attnum > 0 AND NOT attisdropped
    AND attname <> 'payload';

  -- Each role's privileges are revoked and granted anew, so running this again leaves exactly
  -- what it describes (revoking a table privilege also revokes its column privileges).
  FOREACH role_name IN ARRAY ARRAY[producer, worker, admin, 'leasehold_producer', 'leasehold_worker', 'leasehold_admin'] LOOP
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', s, role_name);
      EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I', s, role_name);
      EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA %I FROM %I', s, role_name);
      EXECUTE format('REVOKE ALL ON SCHEMA %I FROM %I', s, role_name);
    END IF;
  END LOOP;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = producer) THEN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', s, producer);
    -- Status and history of jobs (getJob reads no payload under this role), results and waiting
    -- (011: waitFor reads finished_jobs.result; wait_for_jobs() flags the jobs waited for), the
    -- schedule and tick that made a job and the schedules without their payloads (012), flows
    -- (014: getFlow); migrations: the migrator's up-to-date check. Not dedupe_keys (013: written
    -- and read only by the producer's enqueue_deduped function) nor the rate-limit tables (015).
    EXECUTE format('GRANT SELECT (%s) ON jobs TO %I', readable_job_columns, producer);
    EXECUTE format('GRANT SELECT (%s) ON schedules TO %I', readable_schedule_columns, producer);
    EXECUTE format('GRANT SELECT ON finished_jobs, job_events, migrations, schedule_ticks, flows,
                    flow_nodes, job_dependencies TO %I', producer);
    EXECUTE format('GRANT EXECUTE ON FUNCTION wait_for_jobs(bigint[]) TO %I', producer);
    granted := granted || producer;
  END IF;

  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = worker) THEN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', s, worker);
    -- Reads: claims (queue settings), getJob without payload, history, stats for metrics, the
    -- recovery timer, the up-to-date check. No job_effects (effect results go through functions).
    -- 011-015: results and waiting (wait_for_jobs()), schedules without payloads and their ticks
    -- (the scheduler finds it may not fire: that is the admin's), job.parents() and getFlow, the
    -- rate-limit tables for stats and metrics (written only by the throttled claim function).
    -- Not dedupe_keys.
    EXECUTE format('GRANT SELECT (%s) ON jobs TO %I', readable_job_columns, worker);
    EXECUTE format('GRANT SELECT (%s) ON schedules TO %I', readable_schedule_columns, worker);
    EXECUTE format('GRANT SELECT ON finished_jobs, lease_refusals, job_events, queues, ordering_keys,
                    concurrency_keys, migrations, schedule_ticks, flows, flow_nodes, job_dependencies,
                    rate_limits, rate_limit_keys TO %I', worker);
    EXECUTE format('GRANT EXECUTE ON FUNCTION wait_for_jobs(bigint[]) TO %I', worker);
    granted := granted || worker;
  END IF;

  -- The schema's admin, and 006's leasehold_admin (deprecated) with the same privileges.
  FOREACH role_name IN ARRAY (CASE WHEN admin = 'leasehold_admin' THEN ARRAY[admin]
                                   ELSE ARRAY[admin, 'leasehold_admin'] END) LOOP
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      -- Operations (replay, cancel, skip, prune, queue settings), reads for the dashboard, and all
      -- a worker does. No DDL, no TRUNCATE, and the migrations table only to read.
      EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', s, role_name);
      EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', s, role_name);
      EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON migrations FROM %I', role_name);
      EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO %I', s, role_name);
      EXECUTE format('GRANT EXECUTE ON FUNCTION wait_for_jobs(bigint[]) TO %I', role_name);
      granted := granted || role_name;
    END IF;
  END LOOP;

  PERFORM grant_function_roles();
  RETURN granted;
END
$grant$;

SELECT grant_roles();
