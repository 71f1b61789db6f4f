-- 004: observability: an index for the gauges (lh.stats(), the health check, the dashboard), and
-- the trace context of OpenTelemetry spans.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.

-- Serves the per-queue dead count (capped) and the age of the oldest unresolved dead job, both
-- index-only. The terminal indexes of 002 also hold cancelled jobs and need a heap visit per row to
-- tell them apart, which at a large dead backlog in one queue made those gauges scan every terminal
-- job of the others. Only dead rows are indexed, so live work never pays for its upkeep.
-- Built without CONCURRENTLY (the migrator runs in a transaction): on a large jobs table the build
-- blocks writes to jobs for as long as one scan of the table takes.
CREATE INDEX jobs_dead_queue_idx
  ON jobs (queue_name, finished_at)
  WHERE status = 'dead';

-- Trace context carried from enqueue to the handler when OpenTelemetry is in use: a W3C
-- `traceparent` (55 characters), never payload data. Null otherwise; adding a nullable column
-- without a default rewrites nothing.
ALTER TABLE jobs ADD COLUMN traceparent text CHECK (length(traceparent) <= 55);
