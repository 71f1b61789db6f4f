import type pg from 'pg';
import type { Queryable } from '../storage/db.js';

/** What an adapter's library answers for one statement. */
export interface AdapterResult {
  rows: unknown[];
  rowCount: number | null;
}

/**
 * Builds the `Queryable` seam (what `{ client }` accepts) from a function that runs one statement,
 * `$1..$n` placeholders and their values, on a library's connection or transaction. Statement
 * names are dropped: through an adapter every statement runs unnamed (the library owns its
 * connection, and may sit behind a transaction-pooling pooler).
 */
export function toQueryable(run: (text: string, values: unknown[]) => Promise<AdapterResult>): Queryable {
  return {
    async query<R extends pg.QueryResultRow>(config: pg.QueryConfig<unknown[]>): Promise<pg.QueryResult<R>> {
      const { rows, rowCount } = await run(config.text, config.values ?? []);
      return { rows: rows as R[], rowCount, command: '', oid: 0, fields: [] };
    },
  };
}
