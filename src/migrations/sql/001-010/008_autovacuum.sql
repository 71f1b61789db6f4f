-- 008: vacuum the queue's tables by row count, not by table size.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- A queue rewrites its rows constantly: every job is inserted, updated by its claim and deleted by
-- its completion, so jobs and its indexes fill with dead versions at the rate work flows. The
-- default trigger (20% of the table dead, plus 50 rows) is proportional to the table's size, which
-- for a queue means "rarely while it is small, and far too late once it has grown": in a steady
-- 15k jobs/s churn the jobs heap grew from 34 MB to 125 MB in two minutes before autovacuum caught
-- up. A fixed threshold vacuums after a bounded amount of churn whatever the size, and no cost
-- delay lets a vacuum finish before the next one is due. (Vacuum can still remove nothing newer
-- than the oldest open snapshot: see docs/storage.md on pinned horizons.)
ALTER TABLE jobs SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 10000,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 10000,
  autovacuum_analyze_scale_factor = 0.05,
  autovacuum_vacuum_cost_delay = 0
);

-- Finished records are inserted by every completion and deleted in bulk by retention: vacuum them
-- on the same fixed schedule so the space retention frees is reused instead of growing the file.
ALTER TABLE finished_jobs SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 10000,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 10000,
  autovacuum_vacuum_cost_delay = 0
);

-- The audit trail is append-mostly; only the insert trigger matters, so pages are marked all-visible
-- (index-only scans of history stay cheap) without waiting for a fifth of the table to be new.
ALTER TABLE job_events SET (
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 10000
);
