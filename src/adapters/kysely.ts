/**
 * `leasehold/kysely`: Leasehold's writes inside a Kysely transaction, and `job.transaction` handing
 * the handler a Kysely transaction. Kysely is an optional peer dependency, loaded only from here.
 */
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import type { TransactionAdapter } from '../runtime/run/job-transaction.js';
import type { Queryable } from '../storage/db.js';
import { toQueryable } from './queryable.js';

/** `{ client }` for a Kysely transaction (or database): `lh.enqueue(q, payload, { client: fromKysely(trx) })`. */
export function fromKysely<DB>(db: Kysely<DB> | Transaction<DB>): Queryable {
  return toQueryable(async (text, values) => {
    const result = await db.executeQuery(CompiledQuery.raw(text, values));
    const affected = result.numAffectedRows;
    return { rows: result.rows, rowCount: affected === undefined ? result.rows.length : Number(affected) };
  });
}

/** `job.transaction(fn, { with: kyselyAdapter(db) })`: `fn` gets a Kysely transaction of `db`. */
export function kyselyAdapter<DB>(db: Kysely<DB>): TransactionAdapter<Transaction<DB>> {
  return { transaction: (body) => db.transaction().execute((trx) => body(trx, fromKysely(trx))) };
}
