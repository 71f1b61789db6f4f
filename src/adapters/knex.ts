/**
 * `leasehold/knex`: Leasehold's writes inside a Knex transaction, and `job.transaction` handing the
 * handler a Knex transaction. Knex is an optional peer dependency, loaded only from here.
 */
import type { Knex } from 'knex';
import type { TransactionAdapter } from '../runtime/run/job-transaction.js';
import type { Queryable } from '../storage/db.js';
import { toQueryable } from './queryable.js';

/**
 * Rewrites `$n` placeholders as Knex's positional `?` (a literal `?`, as in a jsonb operator, is
 * escaped), repeating a value used twice, since Knex numbers its bindings itself.
 */
export function knexBindings(text: string, values: readonly unknown[]): { sql: string; bindings: unknown[] } {
  const bindings: unknown[] = [];
  const sql = text.replace(/\?/g, '\\?').replace(/\$(\d+)/g, (_, n: string) => {
    bindings.push(values[Number(n) - 1]);
    return '?';
  });
  return { sql, bindings };
}

/** `{ client }` for a Knex transaction (or instance) on the `pg` client: `{ client: fromKnex(trx) }`. */
export function fromKnex(knex: Knex | Knex.Transaction): Queryable {
  return toQueryable(async (text, values) => {
    const { sql, bindings } = knexBindings(text, values);
    const result = (await knex.raw(sql, bindings as Knex.RawBinding[])) as {
      rows: unknown[];
      rowCount: number | null;
    };
    return { rows: result.rows, rowCount: result.rowCount };
  });
}

/** `job.transaction(fn, { with: knexAdapter(knex) })`: `fn` gets a Knex transaction. */
export function knexAdapter(knex: Knex): TransactionAdapter<Knex.Transaction> {
  return { transaction: (body) => knex.transaction((trx) => body(trx, fromKnex(trx))) };
}
