/**
 * `leasehold/drizzle`: Leasehold's writes inside a Drizzle transaction, and `job.transaction`
 * handing the handler a Drizzle transaction. drizzle-orm is an optional peer dependency, loaded
 * only from here. Works with Drizzle on node-postgres and on postgres.js.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { TransactionAdapter } from '../runtime/run/job-transaction.js';
import type { Queryable } from '../storage/db.js';
import { toQueryable } from './queryable.js';

/** The part of a Drizzle database or transaction the adapter uses. */
export interface DrizzleExecutor {
  execute(query: SQL): PromiseLike<unknown>;
}

/** A Drizzle database that opens transactions. */
export interface DrizzleDatabase<Tx extends DrizzleExecutor> extends DrizzleExecutor {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
}

/** Leasehold's `$n` statement as a Drizzle `SQL`, each value a bound parameter (arrays stay arrays). */
export function drizzleStatement(text: string, values: readonly unknown[]): SQL {
  const parts = text.split(/\$(\d+)/);
  const chunks: SQL[] = [];
  parts.forEach((part, i) => {
    chunks.push(i % 2 === 0 ? sql.raw(part) : sql`${sql.param(values[Number(part) - 1])}`);
  });
  return sql.join(chunks);
}

/** `{ client }` for a Drizzle transaction (or database): `{ client: fromDrizzle(tx) }`. */
export function fromDrizzle(db: DrizzleExecutor): Queryable {
  return toQueryable(async (text, values) => {
    const result = (await db.execute(drizzleStatement(text, values))) as
      | { rows: unknown[]; rowCount: number | null }
      | (unknown[] & { count?: number });
    if (Array.isArray(result)) return { rows: [...result], rowCount: result.count ?? result.length };
    return { rows: result.rows, rowCount: result.rowCount };
  });
}

/** `job.transaction(fn, { with: drizzleAdapter(db) })`: `fn` gets a Drizzle transaction of `db`. */
export function drizzleAdapter<Tx extends DrizzleExecutor>(db: DrizzleDatabase<Tx>): TransactionAdapter<Tx> {
  return { transaction: (body) => db.transaction((tx) => body(tx, fromDrizzle(tx))) };
}
