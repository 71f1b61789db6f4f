-- 025: durable events (issue 30): job.waitForEvent and sendEvent. See docs/api.md ("Durable
-- steps") and src/storage/events.ts. The migrator runs this with search_path set to the schema.

-- Events sent (`sendEvent`), kept for a retention window (24 h) so that a wait that begins after
-- its event was sent still finds it; pruned by the sender (events older than the window go when
-- a new event is sent) and by retention.
CREATE TABLE job_events_sent (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  key text NOT NULL CHECK (length(key) BETWEEN 1 AND 200),
  payload jsonb,
  sent_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT job_events_sent_payload_bounded CHECK (pg_column_size(payload) <= 1048576 + 1024)
);
CREATE INDEX job_events_sent_lookup_idx ON job_events_sent (name, key, sent_at, id);
CREATE INDEX job_events_sent_age_idx ON job_events_sent (sent_at);

-- The jobs waiting now, one row per job (a job waits on one event at a time): written by the
-- fenced statement that records the wait, removed when the wait ends (event or timeout) or with
-- the job. `woken_at` is set by the event that wakes it, under the row lock that the wait's
-- hand-back takes too, so an event sent while the job is still handing itself back is not lost.
CREATE TABLE job_waits (
  job_id bigint PRIMARY KEY,
  seq integer NOT NULL,
  name text NOT NULL,
  key text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  woken_at timestamptz
);
CREATE INDEX job_waits_event_idx ON job_waits (name, key);

-- A wait is a step of kind 'wait': its timeout is its wake_at, its result (set once, when it
-- ends) {"timedOut": false, "payload": ...} or {"timedOut": true}.
ALTER TABLE job_steps DROP CONSTRAINT job_steps_kind_check;
ALTER TABLE job_steps ADD CONSTRAINT job_steps_kind_check CHECK (kind IN ('step', 'sleep', 'wait'));
ALTER TABLE job_steps DROP CONSTRAINT job_steps_sleep_wakes;
ALTER TABLE job_steps ADD CONSTRAINT job_steps_sleep_wakes
  CHECK ((kind IN ('sleep', 'wait')) = (wake_at IS NOT NULL));

SELECT grant_roles();
