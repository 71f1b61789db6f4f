/**
 * `leasehold/postgres-js`: Leasehold's writes inside a postgres.js transaction (`sql.begin`), and
 * `job.transaction` handing the handler that transaction's `sql`. postgres.js is an optional peer
 * dependency, loaded only from here (this module imports only its types).
 */
import type { Sql, TransactionSql } from 'postgres';
import type { TransactionAdapter } from '../runtime/run/job-transaction.js';
import type { Queryable } from '../storage/db.js';
import { toQueryable } from './queryable.js';

/**
 * postgres.js infers each parameter's type from the statement and JSON-encodes a value bound to a
 * `jsonb` parameter, but Leasehold binds JSON already serialised (its size is checked as text):
 * declared `text` first, the value is sent as it is and the server parses it once.
 */
export function postgresJsText(text: string): string {
  return text.replace(/\$(\d+)::(jsonb?)(?![\w[])/g, '$$$1::text::$2');
}

/** `{ client }` for a postgres.js transaction (or `sql`): statements run unnamed (`prepare: false`). */
export function fromPostgresJs(sql: Sql | TransactionSql): Queryable {
  return toQueryable(async (text, values) => {
    const result = await sql.unsafe(postgresJsText(text), values as never[], { prepare: false });
    return { rows: [...result], rowCount: result.count ?? result.length };
  });
}

/** `job.transaction(fn, { with: postgresJsAdapter(sql) })`: `fn` gets the `sql` of a `sql.begin` transaction. */
export function postgresJsAdapter(sql: Sql): TransactionAdapter<TransactionSql> {
  return {
    transaction: <T>(body: (tx: TransactionSql, db: Queryable) => Promise<T>) =>
      sql.begin((tx) => body(tx, fromPostgresJs(tx))) as Promise<T>,
  };
}
