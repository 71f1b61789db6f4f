-- 013: deduplication modes (throttle, debounce, replace). See "Deduplication modes" in docs/api.md.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- One row per (queue, dedupe key) ever used: the job the key currently names. The row is the
-- arbiter concurrent enqueues of one key serialise on (INSERT ... ON CONFLICT DO UPDATE locks and
-- returns its latest committed version), as job_keys is for idempotency keys. Kept apart from
-- jobs so that plain enqueues, claims and completions never touch it: only an enqueue with
-- `dedupe` reads or writes here.
CREATE TABLE dedupe_keys (
  queue_name text NOT NULL,
  dedupe_key text NOT NULL CHECK (length(dedupe_key) BETWEEN 1 AND 200),
  job_id bigint NOT NULL,
  -- The mode of the enqueue that last wrote the row.
  mode text NOT NULL CHECK (mode IN ('throttle', 'debounce', 'replace')),
  -- throttle: the end of the window opened when job_id was created; debounce: when the debounced
  -- job becomes claimable (database time); replace: null.
  window_ends_at timestamptz,
  -- Scratch space, as concurrency_keys.granted: what the last enqueue did with the key, written by
  -- its upsert so the same statement can read it back in RETURNING. `ordering_conflict` (a key
  -- whose pending or running job has another ordering key than the new enqueue) is refused by the
  -- constraint, which aborts the whole statement: the client turns it into a ValidationError.
  outcome text NOT NULL DEFAULT 'created'
    CONSTRAINT dedupe_keys_ordering_key_mismatch
    CHECK (outcome IN ('created', 'collapsed', 'replaced', 'stale')),
  PRIMARY KEY (queue_name, dedupe_key)
);

-- Serves the cleanup of a removed job's key row (retention).
CREATE INDEX dedupe_keys_job_idx ON dedupe_keys (job_id);

-- A collapsed enqueue leaves a `deduplicated` event on the surviving job. The kind list is
-- extended from the constraint as it stands rather than restated, so that this migration composes
-- with others that add kinds of their own.
DO $kinds$
DECLARE
  definition text;
BEGIN
  SELECT pg_get_constraintdef(oid) INTO definition
  FROM pg_constraint
  WHERE conrelid = 'job_events'::regclass AND conname = 'job_events_kind_check';
  IF definition IS NULL OR position('ARRAY[' IN definition) = 0 THEN
    RAISE EXCEPTION 'leasehold 013: unexpected job_events_kind_check: %', definition;
  END IF;
  IF position('''deduplicated''' IN definition) = 0 THEN
    ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check;
    EXECUTE 'ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check '
      || replace(definition, 'ARRAY[', 'ARRAY[''deduplicated''::text, ');
  END IF;
END
$kinds$;

-- Privileges: migration 016's grant_roles() (the admin's table privileges cover this table; the
-- producer dedupes through its function, storage/functions.ts, and has no privilege on the table).
