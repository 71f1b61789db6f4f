/**
 * Notifications that a job ended, for `lh.waitFor`. A statement that ends jobs (completion, a
 * failure that kills, cancel, the recovery sweep) notifies only for jobs someone waits for
 * (`jobs.notify_on_finish`, set by the waiter: see wait.ts), once per batch, carrying only job ids.
 * A batch without such a job calls no pg_notify at all, so its transaction takes no notify lock at
 * commit: jobs nobody waits for cost one boolean in a RETURNING list.
 */

/** The NOTIFY channel on which a schema's ended jobs are announced (ids only, comma-separated). */
export function finishedChannel(schema: string): string {
  return `${schema}_finished`;
}

// pg_notify refuses payloads of 8000 bytes or more: at most 20 bytes per id (19 digits and a
// comma), 300 ids is 6,000 bytes.
const IDS_PER_NOTICE = 300;

/**
 * A CTE named `finish_notices` that sends one notification per 300 ids of `source`'s rows for which
 * `where` holds, on the channel in parameter `channel`. Data-modifying CTEs run by themselves, but
 * this one only SELECTs: the statement must read it (see `finishNoticesSent`).
 */
export function finishNoticesCte(source: string, where: string, channel: string): string {
  return `finish_notices AS (
    SELECT pg_notify(${channel}, string_agg(w.id::text, ',')) AS sent
    FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / ${IDS_PER_NOTICE} AS chunk
          FROM ${source} WHERE ${where}) AS w
    GROUP BY w.chunk
  )`;
}

/** A scalar reading `finish_notices`, so that it runs (once: an uncorrelated subquery). */
export function finishNoticesSent(): string {
  return '(SELECT count(*) FROM finish_notices)';
}
