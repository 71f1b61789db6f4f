import type pg from 'pg';

// The one factory for putting jobs into states that would otherwise take waiting: tests move a
// job's clock (lease expiry, claimable-since, finished-at) in database time instead of sleeping,
// through these helpers rather than UPDATEs of their own. (`expireLease` in db.ts does one job.)

/** Which jobs a helper changes: all of the schema's, those of some ids, or those of one queue. */
export interface JobFilter {
  ids?: readonly string[];
  queue?: string;
}

function where(filter: JobFilter, first: number): { sql: string; values: unknown[] } {
  const parts: string[] = [];
  const values: unknown[] = [];
  if (filter.ids) {
    values.push(filter.ids);
    parts.push(`id = ANY($${first + values.length - 1}::bigint[])`);
  }
  if (filter.queue !== undefined) {
    values.push(filter.queue);
    parts.push(`queue_name = $${first + values.length - 1}`);
  }
  return { sql: parts.length > 0 ? ` AND ${parts.join(' AND ')}` : '', values };
}

/** Every running job's lease (or those filtered) lapsed `agoMs` ago, as if its worker vanished. */
export async function expireLeases(
  pool: pg.Pool,
  schema: string,
  filter: JobFilter = {},
  agoMs = 1000,
): Promise<void> {
  const w = where(filter, 2);
  await pool.query(
    `UPDATE "${schema}".jobs SET lease_expires_at = now() - make_interval(secs => $1::double precision / 1000)
     WHERE status = 'running'${w.sql}`,
    [agoMs, ...w.values],
  );
}

/** Jobs (all, or those filtered) claimable since `agoMs` ago, as if they had waited that long. */
export async function claimableSince(
  pool: pg.Pool,
  schema: string,
  agoMs: number,
  filter: JobFilter = {},
): Promise<void> {
  const w = where(filter, 2);
  await pool.query(
    `UPDATE "${schema}".jobs SET available_at = now() - make_interval(secs => $1::double precision / 1000)
     WHERE true${w.sql}`,
    [agoMs, ...w.values],
  );
}

/** Finished jobs (dead or cancelled in `jobs`, or succeeded in `finished_jobs`) finished `agoMs` ago. */
export async function finishedSince(
  pool: pg.Pool,
  schema: string,
  agoMs: number,
  { succeeded = false, ...filter }: JobFilter & { succeeded?: boolean } = {},
): Promise<void> {
  const w = where(filter, 2);
  await pool.query(
    `UPDATE "${schema}".${succeeded ? 'finished_jobs' : 'jobs'}
     SET finished_at = now() - make_interval(secs => $1::double precision / 1000)
     WHERE true${w.sql}`,
    [agoMs, ...w.values],
  );
}
