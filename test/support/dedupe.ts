import type pg from 'pg';

/**
 * Ends the dedupe windows of a schema's keys (all, or those named) in database time, as if they had
 * run out: a throttle's next enqueue then opens a new window. Instead of sleeping through them.
 */
export async function endDedupeWindows(pool: pg.Pool, schema: string, keys?: string[]): Promise<void> {
  await pool.query(
    `UPDATE "${schema}".dedupe_keys SET window_ends_at = now() - interval '1 millisecond'
     WHERE $1::text[] IS NULL OR dedupe_key = ANY ($1::text[])`,
    [keys ?? null],
  );
}

/** A job's run time as milliseconds after the database's clock at the moment of the call. */
export async function msUntilAvailable(pool: pg.Pool, schema: string, id: string): Promise<number> {
  const { rows } = await pool.query<{ ms: number }>(
    `SELECT extract(epoch FROM available_at - clock_timestamp())::double precision * 1000 AS ms
     FROM "${schema}".jobs WHERE id = $1`,
    [id],
  );
  return rows[0]?.ms as number;
}

/** The database's clock, read now (not the transaction's start). */
export async function databaseNow(pool: pg.Pool): Promise<Date> {
  const { rows } = await pool.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0]?.now as Date;
}

/** A schema's `deduplicated` events, oldest first: job id and detail. */
export async function dedupeEvents(
  pool: pg.Pool,
  schema: string,
): Promise<{ jobId: string; statusAfter: string | null; detail: Record<string, unknown> }[]> {
  const { rows } = await pool.query(
    `SELECT job_id::text, status_after, detail FROM "${schema}".job_events WHERE kind = 'deduplicated' ORDER BY id`,
  );
  return rows.map((row) => ({ jobId: row.job_id, statusAfter: row.status_after, detail: row.detail }));
}
