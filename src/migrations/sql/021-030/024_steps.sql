-- 024: durable steps (issue 30). See docs/api.md ("Durable steps") and src/storage/steps.ts. The
-- migrator runs this with search_path set to the Leasehold schema.

-- A job's recorded steps, one row per `job.step` / `job.sleep` call, numbered in the order the
-- handler made them (`seq`, from 0). Written only when a handler calls a step, by a fenced
-- statement (the lease that runs the job, still current): a plain job never touches this table,
-- and a stale holder's step is refused (counted as operation 'step') and writes nothing.
-- `name` is the step's name with its occurrence (`charge#0`, `charge#1`), so a resumed handler
-- that calls its steps in another order is told which it called and which was recorded.
-- A sleep (`kind` 'sleep') records its wake time once, in database time; `result` is null.
-- Removed with the job (retention, prune), like job_effects.
CREATE TABLE job_steps (
  job_id bigint NOT NULL,
  seq integer NOT NULL CHECK (seq >= 0 AND seq < 1000),
  name text NOT NULL CHECK (length(name) BETWEEN 3 AND 110),
  kind text NOT NULL CHECK (kind IN ('step', 'sleep')),
  result jsonb,
  wake_at timestamptz,
  -- The claim that recorded it.
  attempt integer NOT NULL,
  lease_token bigint NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, seq),
  -- A step's result is bounded by the worker's maxResultBytes (at most 8 MiB, as a job's result).
  CONSTRAINT job_steps_result_bounded CHECK (pg_column_size(result) <= 8388608 + 1024),
  CONSTRAINT job_steps_sleep_wakes CHECK ((kind = 'sleep') = (wake_at IS NOT NULL))
);

-- Step writes are fenced like every lease-holding write, and refused ones counted.
ALTER TABLE lease_refusals DROP CONSTRAINT lease_refusals_operation_check;
ALTER TABLE lease_refusals ADD CONSTRAINT lease_refusals_operation_check
  CHECK (operation IN ('heartbeat', 'complete', 'fail', 'snooze', 'effect', 'step'));

-- A recorded step leaves a `step` event in the job's history (getJob(id, { history: true })),
-- written by the same fenced statement: detail {"step": "charge#0", "kind": "step"} (a sleep adds
-- "wakeAt"). The kind list is extended from the constraint as it stands (as 013 does), so that
-- this migration composes with others that add kinds of their own.
DO $kinds$
DECLARE
  definition text;
BEGIN
  SELECT pg_get_constraintdef(oid) INTO definition
  FROM pg_constraint
  WHERE conrelid = 'job_events'::regclass AND conname = 'job_events_kind_check';
  IF definition IS NULL OR position('ARRAY[' IN definition) = 0 THEN
    RAISE EXCEPTION 'leasehold 024: unexpected job_events_kind_check: %', definition;
  END IF;
  IF position('''step''' IN definition) = 0 THEN
    ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check;
    EXECUTE 'ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check '
      || replace(definition, 'ARRAY[', 'ARRAY[''step''::text, ');
  END IF;
END
$kinds$;

-- The admin roles get it with every table; the worker reads and writes it only through the step
-- functions (storage/functions.ts).
SELECT grant_roles();
