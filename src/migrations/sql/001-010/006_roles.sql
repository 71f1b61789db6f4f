-- 006: least-privilege group roles. See "Database roles" in docs/operators-guide.md.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.
--
-- Three NOLOGIN group roles, granted by users to their own login roles:
--   leasehold_producer  enqueue (one, many, keyed, ordered) and read jobs back; nothing else.
--   leasehold_worker    run a worker: claim, renew, complete, fail, snooze, the effects ledger,
--                       the recovery sweep and the fairness pass; no replay, cancel, skip, prune,
--                       queue settings or enqueue.
--   leasehold_admin     everything the CLI and the dashboard do, workers and retention included.
--
-- Roles are cluster-wide while Leasehold lives in a schema, and several schemas may share a server:
-- the roles are created once (whoever gets there first) and every schema grants them its own
-- privileges. The grants live in grant_roles() below so that they can be applied again later: by
-- an owner whose roles a superuser created after this migration ran, and by later migrations that
-- add tables or columns (they end with `SELECT grant_roles();`).
--
-- A migrating user who may not create roles (neither superuser nor CREATEROLE) is not locked out:
-- the missing roles are skipped with a NOTICE and the migration goes on; roles that already exist
-- get their grants. The notice says how to finish: create the roles, then run grant_roles().
--
-- Row-level rules. Table privileges cannot say "delete only running jobs" or "never touch a dead
-- job", so jobs and job_events get row-level security, with policies that bind only the
-- restricted roles:
--   - a permissive policy for PUBLIC that allows every row, so any role that had privileges before
--     this migration (granted by hand) keeps exactly the access it had;
--   - RESTRICTIVE policies for leasehold_worker, ANDed with it: the worker may update only pending
--     and running jobs (into pending, running or dead), delete only running ones (a completion),
--     and append only the events a worker writes (never an operator's replayed/cancelled/removed).
-- The table owner (who migrates, and usually runs the hot path) and superusers bypass row-level
-- security entirely: FORCE ROW LEVEL SECURITY is deliberately not set, so the owner's claim and
-- completion plans carry no policy qual and cost exactly what they did before.
-- Column privileges close the rest: the worker may not rewrite a job's payload, queue or attempt
-- budget, nor name an `actor` in an event (so an operator action attempted under the worker role
-- fails when planned, with a permission error, rather than silently changing no row); the producer
-- inserts only the columns enqueue sets, so it cannot insert a job that is already running or dead.

CREATE FUNCTION grant_roles() RETURNS text[]
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
                  concurrency_key, awaits_predecessor) ON jobs TO leasehold_producer;
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
      WITH CHECK (status IN ('pending', 'running', 'dead'));
    CREATE POLICY worker_deletes_running_jobs ON jobs AS RESTRICTIVE FOR DELETE TO leasehold_worker
      USING (status = 'running');
    CREATE POLICY worker_appends_attempt_events ON job_events AS RESTRICTIVE FOR INSERT TO leasehold_worker
      WITH CHECK (kind IN ('retried', 'dead', 'snoozed', 'skipped', 'lease_expired', 'refused'));
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

-- Only the owner can grant on the schema's tables anyway; nobody else needs to call it.
REVOKE EXECUTE ON FUNCTION grant_roles() FROM PUBLIC;

SELECT grant_roles();
