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

-- Privileges (migration 016's grant_roles(), which runs after this and covers these tables): the
-- producer and worker roles read both (getJob looks up the tick that made a job); keeping schedules
-- and firing them (which enqueues, with ticks the caller computed) is the admin's and the owner's.
-- A worker process under the worker role turns its scheduler off with one PermissionError
-- (src/maintenance/scheduler.ts).
