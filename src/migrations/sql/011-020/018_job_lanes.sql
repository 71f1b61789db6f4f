-- 018: jobs split into lanes, so that churn is emptied by TRUNCATE instead of left to VACUUM.
-- See docs/storage.md. The migrator runs this with search_path set to the Leasehold schema.
--
-- Why: every job is inserted, updated by its claim and deleted by its completion. Each of those
-- leaves a dead row version that only VACUUM can remove, and VACUUM removes nothing newer than the
-- oldest snapshot still open anywhere on the server (the xmin horizon). A ten-minute report, a
-- forgotten idle session or a lagging replication slot held that horizon in the churn bench, and
-- the jobs heap grew from 80 MB to 3.3 GB while throughput halved. TRUNCATE frees a table's space
-- at once, whatever the horizon, but only a table with no live row may be truncated.
--
-- The layout: jobs (and finished_jobs, part 5 below) is partitioned by LIST (lane).
--   lane 0       the cold lane: what was the jobs table before this migration, and the rows that
--                stay long (dead and cancelled jobs, jobs waiting for a predecessor, a parent, their
--                time or a free worker). Vacuumed as before; little churn reaches it.
--   lanes 1..3   the hot lanes. A new job goes to the lane of the current ten-second window
--                (job_lane_at(now()), the column's default): lanes take turns, each receiving new
--                jobs for ten seconds out of thirty. Its jobs are claimed and completed within
--                seconds, so by the time its turn comes again it is nearly empty: the rotation
--                (part 7 below, run by every worker) moves what is left to the lane now receiving
--                jobs (running jobs) or to the cold lane (the rest), and then truncates it.
-- Nothing depends on where a row lives: every statement reads and writes jobs (the parent), looks
-- jobs up by id, and keeps the fence (token and claim id) of a moved row unchanged. The lane is a
-- place, never a state.
--
-- Online: this migration holds jobs' ACCESS EXCLUSIVE lock while it runs, and does no rewrite and
-- one scan of the existing table (the check that makes it the cold lane without a second scan at
-- ATTACH). Workers' statements wait for it and then find jobs, now the partitioned parent, by name.

-- jobs first, then finished_jobs: the order in which a completion names them.
LOCK TABLE jobs, finished_jobs IN ACCESS EXCLUSIVE MODE;

-- 1. Ids. The identity moves from the old table to the new parent, continuing where it stopped.
--    ALTER SEQUENCE waits for every transaction that drew ids from it (nextval holds a lock on the
--    sequence until commit; jobs' lock is taken first, in the order enqueues take them) and keeps
--    new draws out, so the value read is the last id handed out.
CREATE TEMPORARY TABLE leasehold_018_ids ON COMMIT DROP AS SELECT 0::bigint AS next_id;
DO $ids$
DECLARE
  old_sequence text := pg_get_serial_sequence('jobs', 'id');
  last bigint;
  called boolean;
BEGIN
  EXECUTE format('ALTER SEQUENCE %s NO CYCLE', old_sequence);
  EXECUTE format('SELECT last_value, is_called FROM %s', old_sequence) INTO last, called;
  UPDATE leasehold_018_ids SET next_id = CASE WHEN called THEN last + 1 ELSE last END;
END
$ids$;
ALTER TABLE jobs ALTER COLUMN id DROP IDENTITY;

-- 2. The old table becomes the cold lane. 007's payload bound is validated first (a partition
--    may not hold a NOT VALID copy of its parent's constraint); the lane column is added with a
--    default, which rewrites nothing.
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_payload_size;
ALTER TABLE jobs ADD COLUMN lane smallint NOT NULL DEFAULT 0;
ALTER TABLE jobs RENAME TO jobs_lane_0;
ALTER INDEX jobs_pkey RENAME TO jobs_lane_0_pkey;
ALTER INDEX jobs_claimable_idx RENAME TO jobs_lane_0_claimable_idx;
ALTER INDEX jobs_dead_queue_idx RENAME TO jobs_lane_0_dead_queue_idx;
ALTER INDEX jobs_expired_lease_idx RENAME TO jobs_lane_0_expired_lease_idx;
ALTER INDEX jobs_flow_waiting_idx RENAME TO jobs_lane_0_flow_waiting_idx;
ALTER INDEX jobs_ordering_key_idx RENAME TO jobs_lane_0_ordering_key_idx;
ALTER INDEX jobs_ordering_waiting_idx RENAME TO jobs_lane_0_ordering_waiting_idx;
ALTER INDEX jobs_queue_slots_idx RENAME TO jobs_lane_0_queue_slots_idx;
ALTER INDEX jobs_terminal_error_idx RENAME TO jobs_lane_0_terminal_error_idx;
ALTER INDEX jobs_terminal_finished_idx RENAME TO jobs_lane_0_terminal_finished_idx;
ALTER INDEX jobs_terminal_id_idx RENAME TO jobs_lane_0_terminal_id_idx;
ALTER INDEX jobs_terminal_queue_idx RENAME TO jobs_lane_0_terminal_queue_idx;

-- The lane that receives new jobs at time t: 1, 2 or 3, ten seconds each, in turn (database time:
-- the default below evaluates it with now()). rotate_job_lanes() knows the same two numbers.
CREATE FUNCTION job_lane_at(t timestamptz) RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE
AS $lane$ SELECT (1 + (floor(extract(epoch FROM t) / 10)::bigint % 3))::smallint $lane$;

-- 3. The parent: the same columns, defaults and checks (LIKE copies them, in the same order).
CREATE TABLE jobs (
  LIKE jobs_lane_0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION
) PARTITION BY LIST (lane);
ALTER TABLE jobs ALTER COLUMN lane SET DEFAULT job_lane_at(now());
DO $identity$
BEGIN
  EXECUTE format(
    'ALTER TABLE jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME jobs_id_seq START WITH %s)',
    (SELECT greatest(next_id, 1) FROM leasehold_018_ids));
END
$identity$;
-- Only the cold lane's rows satisfy this, so ATTACH needs no second scan to prove it.
ALTER TABLE jobs_lane_0 ADD CONSTRAINT jobs_lane_0_is_cold CHECK (lane = 0);
ALTER TABLE jobs ATTACH PARTITION jobs_lane_0 FOR VALUES IN (0);
CREATE TABLE jobs_lane_1 PARTITION OF jobs FOR VALUES IN (1);
CREATE TABLE jobs_lane_2 PARTITION OF jobs FOR VALUES IN (2);
CREATE TABLE jobs_lane_3 PARTITION OF jobs FOR VALUES IN (3);
-- 4. Indexes, on the parent: each is built on the hot lanes (empty: instant) and attaches the cold
--    lane's existing index of the same definition instead of building it again. There is no
--    primary key: a partitioned table's unique keys must include the lane, which a row changes
--    when it moves. Ids come from the identity alone, as they always did, and each lane keeps a
--    unique index on id.
CREATE UNIQUE INDEX jobs_lane_1_pkey ON jobs_lane_1 (id);
CREATE UNIQUE INDEX jobs_lane_2_pkey ON jobs_lane_2 (id);
CREATE UNIQUE INDEX jobs_lane_3_pkey ON jobs_lane_3 (id);
CREATE INDEX jobs_claimable_idx ON jobs (queue_name, priority DESC, available_at, id)
  WHERE status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0;
CREATE INDEX jobs_dead_queue_idx ON jobs (queue_name, finished_at) WHERE status = 'dead';
CREATE INDEX jobs_expired_lease_idx ON jobs (lease_expires_at) WHERE status = 'running';
CREATE INDEX jobs_flow_waiting_idx ON jobs (queue_name, id) WHERE status = 'pending' AND waiting_parents > 0;
CREATE INDEX jobs_ordering_key_idx ON jobs (ordering_key, id) WHERE ordering_key IS NOT NULL;
CREATE INDEX jobs_ordering_waiting_idx ON jobs (queue_name, ordering_key, id) WHERE awaits_predecessor;
CREATE INDEX jobs_queue_slots_idx ON jobs (queue_name, lease_expires_at)
  WHERE status = 'running' AND holds_queue_slot;
CREATE INDEX jobs_terminal_error_idx ON jobs (last_error_code, id) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_terminal_finished_idx ON jobs (finished_at, id) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_terminal_id_idx ON jobs (id) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_terminal_queue_idx ON jobs (queue_name, finished_at, id) WHERE finished_at IS NOT NULL;

-- 5. finished_jobs in lanes too, the same way: the completion inserts each succeeded job's record
--    into the lane receiving jobs now, and the retention service deletes it later. Those deletes
--    leave dead versions that a pinned horizon keeps, so a lane whose records have all been pruned
--    is truncated as well. Finished records are never moved: a lane still holding records (a
--    retention longer than the lanes' turn, one hour by default) is left alone and reused as it is,
--    cleaned by VACUUM as the table was.
ALTER TABLE finished_jobs ADD COLUMN lane smallint NOT NULL DEFAULT 0;
ALTER TABLE finished_jobs RENAME TO finished_jobs_lane_0;
ALTER INDEX finished_jobs_pkey RENAME TO finished_jobs_lane_0_pkey;
ALTER INDEX finished_jobs_finished_at_idx RENAME TO finished_jobs_lane_0_finished_at_idx;
ALTER INDEX finished_jobs_queue_idx RENAME TO finished_jobs_lane_0_queue_idx;
CREATE TABLE finished_jobs (
  LIKE finished_jobs_lane_0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION
) PARTITION BY LIST (lane);
ALTER TABLE finished_jobs ALTER COLUMN lane SET DEFAULT job_lane_at(now());
ALTER TABLE finished_jobs_lane_0 ADD CONSTRAINT finished_jobs_lane_0_is_cold CHECK (lane = 0);
ALTER TABLE finished_jobs ATTACH PARTITION finished_jobs_lane_0 FOR VALUES IN (0);
CREATE TABLE finished_jobs_lane_1 PARTITION OF finished_jobs FOR VALUES IN (1);
CREATE TABLE finished_jobs_lane_2 PARTITION OF finished_jobs FOR VALUES IN (2);
CREATE TABLE finished_jobs_lane_3 PARTITION OF finished_jobs FOR VALUES IN (3);
CREATE UNIQUE INDEX finished_jobs_lane_1_pkey ON finished_jobs_lane_1 (id);
CREATE UNIQUE INDEX finished_jobs_lane_2_pkey ON finished_jobs_lane_2 (id);
CREATE UNIQUE INDEX finished_jobs_lane_3_pkey ON finished_jobs_lane_3 (id);
CREATE INDEX finished_jobs_finished_at_idx ON finished_jobs (finished_at);
CREATE INDEX finished_jobs_queue_idx ON finished_jobs (queue_name, id);

-- 008's autovacuum settings, for every hot lane of both tables: between truncations, and whenever
-- no snapshot holds the horizon back, vacuum keeps a lane compact as it kept the table.
DO $autovacuum$
DECLARE lane_table text;
BEGIN
  FOREACH lane_table IN ARRAY ARRAY['jobs_lane_1', 'jobs_lane_2', 'jobs_lane_3',
                                     'finished_jobs_lane_1', 'finished_jobs_lane_2', 'finished_jobs_lane_3'] LOOP
    EXECUTE format('ALTER TABLE %I SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
      autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000,
      autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0)', lane_table);
  END LOOP;
END
$autovacuum$;

-- 6. Row-level security as 006 set it on the table (the policies bind the parent; no role but the
--    admin has any privilege on a lane itself).
ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY leasehold_everyone ON jobs USING (true) WITH CHECK (true);

-- 7. The rotation, in two steps that run as two statements (two transactions): moving rows holds
--    their row locks until commit, and a truncation that waited behind its own moves' lockers would
--    wait for ever.
--
-- move_job_lane_rows(batch): moves up to `batch` rows out of each hot lane that is neither
-- receiving new jobs nor the one that just stopped (its jobs are still being claimed and
-- completed). Running jobs go to the lane receiving jobs now, and will likely finish there. The
-- rest goes to the cold lane, where it waits without being moved at every turn: dead and cancelled
-- jobs, jobs waiting for a predecessor, a parent or their time, and pending jobs that no worker
-- took in twenty seconds (a backlog: sent to the receiving lane, a backlog of a million jobs would
-- be moved again every thirty seconds until drained; sent to the cold lane, each job moves once,
-- and its claim and completion are then cleaned there by vacuum). Rows another
-- transaction has locked (a claim, a completion in flight) are skipped, and taken at the next call.
-- An UPDATE of the lane keeps every column: id, token, claim id, attempts, history are the job's.
-- A statement that read a moved row's old version and then tries to lock it fails with
-- serialization_failure (40001) and changes nothing; the library sends such autocommit statements
-- again (see run() in storage/db.ts), and they then find the row in its new lane.
-- Returns the rows moved and the hot lanes that still held rows afterwards.
CREATE FUNCTION move_job_lane_rows(batch integer) RETURNS TABLE (moved bigint, lanes_left integer)
LANGUAGE plpgsql SECURITY DEFINER
AS $move$
DECLARE
  receiving smallint := job_lane_at(now());
  finishing smallint := job_lane_at(now() - interval '10 seconds');
  from_lane smallint;
  n bigint;
BEGIN
  moved := 0;
  lanes_left := 0;
  FOR from_lane IN 1..3 LOOP
    CONTINUE WHEN from_lane = receiving OR from_lane = finishing;
    WITH picked AS (
      SELECT j.id FROM jobs AS j
      WHERE j.lane = from_lane
      LIMIT greatest(batch, 1)
      FOR UPDATE SKIP LOCKED
    )
    UPDATE jobs AS j
    SET lane = CASE WHEN j.status = 'running' THEN receiving ELSE 0 END
    FROM picked
    WHERE j.id = picked.id AND j.lane = from_lane;
    GET DIAGNOSTICS n = ROW_COUNT;
    moved := moved + n;
    IF EXISTS (SELECT 1 FROM jobs AS j WHERE j.lane = from_lane) THEN
      lanes_left := lanes_left + 1;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$move$;
COMMENT ON FUNCTION move_job_lane_rows(integer) IS 'leasehold:worker:move_job_lane_rows';

-- truncate_job_lanes(): truncates each hot lane of jobs and of finished_jobs, other than the one
-- receiving rows, that holds no row and still has storage (a lane already truncated is left alone:
-- TRUNCATE makes new files and catalog rows each time). A lane found holding rows is not locked
-- at all. Emptiness is checked again after taking the lane's ACCESS EXCLUSIVE lock, which waits for
-- every transaction that wrote to it, so no committed or in-flight row is lost. Every statement on
-- the parent locks every lane briefly, so the lock is queued behind them and ahead of new ones:
-- lock_timeout bounds that queueing at 50 ms, and a lane that cannot be locked in time (a long
-- report reading jobs holds its lock for the report's duration) is tried at the next call.
-- Returns the names of the lanes truncated.
CREATE FUNCTION truncate_job_lanes() RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER
SET lock_timeout = '50ms'
AS $truncate$
DECLARE
  receiving smallint := job_lane_at(now());
  lane_number smallint;
  parent text;
  lane_table text;
  holds_rows boolean;
  truncated text[] := '{}';
BEGIN
  FOREACH parent IN ARRAY ARRAY['jobs', 'finished_jobs'] LOOP
    FOR lane_number IN 1..3 LOOP
      CONTINUE WHEN lane_number = receiving;
      lane_table := parent || '_lane_' || lane_number;
      CONTINUE WHEN pg_relation_size(lane_table::regclass) = 0;
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', lane_table) INTO holds_rows;
      CONTINUE WHEN holds_rows;
      BEGIN
        EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', lane_table);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', lane_table) INTO holds_rows;
        IF NOT holds_rows THEN
          EXECUTE format('TRUNCATE %I', lane_table);
          truncated := truncated || lane_table;
        END IF;
      EXCEPTION WHEN lock_not_available THEN
        NULL; -- busy: the next call tries again
      END;
    END LOOP;
  END LOOP;
  RETURN truncated;
END
$truncate$;
COMMENT ON FUNCTION truncate_job_lanes() IS 'leasehold:worker:truncate_job_lanes';

-- Both functions run as the schema's owner for roles that may not write jobs themselves, so their
-- search_path is pinned: the schema, then pg_temp last. Left implicit, pg_temp would be searched
-- first for tables, and a caller's temporary table named jobs_lane_2 would stand in for the lane.
DO $pin$
BEGIN
  EXECUTE format('ALTER FUNCTION move_job_lane_rows(integer) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
  EXECUTE format('ALTER FUNCTION truncate_job_lanes() SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
END
$pin$;

SELECT grant_roles();
