import type pg from 'pg';
import { waitFor } from './db.js';

/**
 * The hot lane due to be emptied now (neither receiving jobs nor the one that just stopped, see
 * migration 018), read at least 3.5 s before the window ends so that it stays due for the test's
 * next steps.
 */
export async function dueLane(db: pg.Pool): Promise<number> {
  for (;;) {
    const { rows } = await db.query<{ into_window: number; receiving: number; finishing: number }>(
      `SELECT (extract(epoch FROM now())::numeric % 10)::float8 AS into_window,
              lanes.receiving, lanes.finishing
       FROM (SELECT 1 + (floor(extract(epoch FROM now()) / 10)::bigint % 3) AS receiving,
                    1 + (floor(extract(epoch FROM now() - interval '10 seconds') / 10)::bigint % 3) AS finishing) AS lanes`,
    );
    const row = rows[0];
    if (row && row.into_window >= 0.2 && row.into_window <= 6.5) {
      return [1, 2, 3].find((lane) => lane !== Number(row.receiving) && lane !== Number(row.finishing)) ?? 0;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Moves the given jobs to `lane` (as the rotation would have left them there). */
export async function putInLane(db: pg.Pool, schema: string, ids: string[], lane: number): Promise<void> {
  await db.query(`UPDATE "${schema}".jobs SET lane = $2 WHERE id = ANY ($1::bigint[])`, [ids, lane]);
}

/** Waits until some statement waits for transaction `xid` (a lane move holding a row it needs). */
export async function waitUntilBlockedBy(db: pg.Pool, xid: string): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await db.query(
        `SELECT 1 FROM pg_locks WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = $1`,
        [xid],
      );
      return rows.length > 0;
    },
    { what: 'the completion to wait for the moved row' },
  );
}
