-- 009: one event kind per meaning.
-- The migrator runs this with search_path set to the Leasehold schema, so names are unqualified.
--
-- Until now `skipped` meant two things: a lease a worker handed back unstarted (written by the
-- snooze statement: status after `pending`, reason `unstarted` or `shutdown`), and an operator
-- giving up on a dead job so its ordering key moves on (written by `lh.skip`: status after
-- `cancelled`, error code `SKIPPED`, an actor). The operator's event is now `key_skipped`; the
-- worker's keeps `skipped`, so the worker role's event policy (006) needs no change.
-- The two are told apart by the status they left the job in, which each statement always set.
-- History readers accept both spellings of the operator's event (see src/job-history.ts), so a
-- row written by an older Leasehold between this migration and its upgrade still reads right.
ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check;

UPDATE job_events SET kind = 'key_skipped'
WHERE kind = 'skipped' AND status_after = 'cancelled' AND error_code = 'SKIPPED';

ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check CHECK (kind IN (
  'retried', 'dead', 'snoozed', 'skipped', 'key_skipped', 'lease_expired', 'replayed', 'cancelled',
  'refused', 'removed'
));
