/**
 * `leasehold/prisma`: Leasehold's writes inside a Prisma interactive transaction, and
 * `job.transaction` handing the handler that transaction client. Typed structurally: this module
 * imports nothing from Prisma (whose client is generated per project), so it loads without it.
 * Statements go through `$queryRawUnsafe` with `$n` parameters.
 */
import type { TransactionAdapter } from '../runtime/run/job-transaction.js';
import type { Queryable } from '../storage/db.js';
import { toQueryable } from './queryable.js';

/** The part of a Prisma client or transaction client the adapter uses. */
export interface PrismaExecutor {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
}

/** A Prisma client that opens interactive transactions. */
export interface PrismaClientLike<Tx extends PrismaExecutor> extends PrismaExecutor {
  $transaction<T>(fn: (tx: Tx) => Promise<T>, options?: { timeout?: number; maxWait?: number }): Promise<T>;
}

/** `{ client }` for a Prisma transaction client: `{ client: fromPrisma(tx) }`. */
export function fromPrisma(prisma: PrismaExecutor): Queryable {
  return toQueryable(async (text, values) => {
    const rows = (await prisma.$queryRawUnsafe<unknown[]>(text, ...values)) ?? [];
    return { rows, rowCount: rows.length };
  });
}

/**
 * `job.transaction(fn, { with: prismaAdapter(prisma) })`: `fn` gets a Prisma transaction client.
 * `timeoutMs` is Prisma's own interactive-transaction limit (its default is 5 s); Leasehold's lease
 * bound applies inside it as well.
 */
export function prismaAdapter<Tx extends PrismaExecutor>(
  prisma: PrismaClientLike<Tx>,
  options: { timeoutMs?: number } = {},
): TransactionAdapter<Tx> {
  return {
    transaction: (body) =>
      prisma.$transaction((tx) => body(tx, fromPrisma(tx)), { timeout: options.timeoutMs ?? 60_000 }),
  };
}
