-- 012: schedules (cron) and the ticks they fired.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- One row per schedule, shared by every process: `lh.schedule(name, ...)` creates or updates it,
-- and every worker's scheduler (src/maintenance/scheduler.ts) reads the active ones, computes their
-- due ticks from the database's now() with croner, and fires them with ScheduleFire
-- (src/storage/schedule-fire.ts). The job's fields are validated at schedule() time, as enqueue
-- validates them, and copied into every job the schedule fires.
CREATE TABLE schedules (
  name text PRIMARY KEY,
  cron text NOT NULL,
  -- IANA zone the cron is read in; null reads it in UTC.
  timezone text,
  queue_name text NOT NULL,
  -- Set when the schedule names a task (its name is its queue); null for a plain queue.
  task_name text,
  payload jsonb NOT NULL,
  priority integer NOT NULL,
  max_attempts integer NOT NULL CHECK (max_attempts >= 1),
  ordering_key text,
  concurrency_key text,
  -- Ticks missed while no worker fired them: skip ('none'), one run for the newest ('latest'), or
  -- up to catch_up_max of the newest ('backfill').
  catch_up text NOT NULL CHECK (catch_up IN ('none', 'latest', 'backfill')),
  catch_up_max integer NOT NULL DEFAULT 1 CHECK (catch_up_max BETWEEN 1 AND 1000),
  paused boolean NOT NULL DEFAULT false,
  -- Bumped by every change of the row's definition or pause state; a fire computed from an older
  -- revision changes nothing (ScheduleFire checks it under the row lock).
  revision bigint NOT NULL DEFAULT 1,
  -- Ticks at or before this database time never fire: set at creation, on a change of cron or
  -- zone and on resume, so that a new, changed or resumed schedule does not backfill the past.
  fire_after timestamptz NOT NULL DEFAULT now(),
  -- The newest tick handled (fired, or skipped by catch_up), advanced by the statement that fires.
  last_tick_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per fired tick. The primary key is the exactly-once guarantee: ScheduleFire inserts the
-- tick (ON CONFLICT DO NOTHING) and the job in one statement, so a tick that another worker, a
-- restarted one or a retry already fired inserts no job. No foreign keys: the row outlives its
-- job (retention) and its schedule (unschedule) as history, until the scheduler prunes it.
CREATE TABLE schedule_ticks (
  schedule_name text NOT NULL,
  tick_at timestamptz NOT NULL,
  job_id bigint NOT NULL,
  PRIMARY KEY (schedule_name, tick_at)
);

-- Serves getJob's "which schedule and tick created this job" and filtering jobs by schedule.
CREATE INDEX schedule_ticks_job_idx ON schedule_ticks (job_id);

-- The group roles' privileges on these tables (see 006): reading jobs back (getJob looks up
-- schedule_ticks) is every role's; keeping schedules and firing them (which enqueues) is the
-- admin's, and the owner's. A worker role, which may not enqueue, turns its scheduler off with a
-- PermissionError (src/maintenance/scheduler.ts). grant_roles() revokes and grants everything
-- anew, so it must repeat these: it is wrapped below (renamed, then called by a new grant_roles()
-- that adds these grants), which keeps 006's body as it was.
CREATE FUNCTION grant_schedule_roles() RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $grant$
BEGIN
  -- Admin first: grant_roles_before_schedules() leaves the admin's grant (ON ALL TABLES) on these
  -- tables before this runs, so the same order here gives the same ACLs after the migration as
  -- after a later grant_roles().
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_admin') THEN
    GRANT SELECT, INSERT, UPDATE, DELETE ON schedules, schedule_ticks TO leasehold_admin;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_producer') THEN
    GRANT SELECT ON schedules, schedule_ticks TO leasehold_producer;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'leasehold_worker') THEN
    GRANT SELECT ON schedules, schedule_ticks TO leasehold_worker;
  END IF;
END
$grant$;
REVOKE EXECUTE ON FUNCTION grant_schedule_roles() FROM PUBLIC;

ALTER FUNCTION grant_roles() RENAME TO grant_roles_before_schedules;
CREATE FUNCTION grant_roles() RETURNS text[]
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $grant$
DECLARE
  granted text[];
BEGIN
  granted := grant_roles_before_schedules();
  PERFORM grant_schedule_roles();
  RETURN granted;
END
$grant$;
REVOKE EXECUTE ON FUNCTION grant_roles() FROM PUBLIC;

-- Now, where the roles exist (as 010 does, without repeating grant_roles()'s notices).
SELECT grant_schedule_roles();
