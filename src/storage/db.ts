import { createHash } from 'node:crypto';
import type pg from 'pg';
import { toDatabaseError } from '../shared/errors.js';

/**
 * The smallest seam Leasehold needs from a connection: a `pg.Pool`, a checked-out `pg.PoolClient`
 * or a `pg.Client` inside the caller's transaction all fit, so every write can join a transaction.
 */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: pg.QueryConfig<unknown[]>,
  ): Promise<pg.QueryResult<R>>;
}

/** A named SQL statement bound to one schema; the name lets `pg` prepare it once per connection. */
export interface Statement {
  readonly name: string;
  /** The short name it was defined with (`claim_jobs`): what errors and the function registry call it. */
  readonly label: string;
  readonly text: string;
  /** The text led by a comment naming it, sent when statements run unnamed (see `runUnnamedOn`). */
  readonly unnamedText: string;
}

/** Quotes a validated identifier for SQL text (doubling any quote, though validation allows none). */
export function quoteIdent(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/**
 * Declares a statement whose text depends only on the (validated, quoted) schema.
 * The text is built once per schema and memoised, so hot paths never rebuild SQL.
 */
export function defineStatement(
  name: string,
  build: (schema: string) => string,
): (schema: string) => Statement {
  const bySchema = new Map<string, Statement>();
  return (schema) => {
    let statement = bySchema.get(schema);
    if (!statement) {
      const text = build(quoteIdent(schema));
      // Prepared statement names are per connection; the hash keeps two schemas on one pool apart.
      const digest = createHash('sha1').update(schema).update('\0').update(text).digest('hex').slice(0, 10);
      const fullName = `leasehold_${name}_${digest}`;
      // Unnamed, the comment still tells pg_stat_activity and the server log which statement runs.
      statement = { name: fullName, label: name, text, unnamedText: `/* ${fullName} */ ${text}` };
      bySchema.set(schema, statement);
    }
    return statement;
  };
}

// Connections (pools, their clients, callers' clients) on which statements run unnamed: behind a
// transaction-pooling pooler, a statement prepared on one server connection is unknown on the
// next. The flag spares every other process even the set lookup.
const unnamedOn = new WeakSet<object>();
let anyUnnamed = false;

/**
 * Makes `run` send its statements unnamed (parsed every time, never prepared) on this connection.
 * For a transaction-pooling pooler such as PgBouncer before 1.21 (see `preparedStatements`).
 */
export function runUnnamedOn(db: Queryable): void {
  anyUnnamed = true;
  unnamedOn.add(db);
}

/** As `runUnnamedOn`, for a pool and every client it hands out (`pool.connect()` included). */
export function runUnnamedOnPool(pool: pg.Pool): void {
  // Once per pool, however many clients share it.
  if (unnamedOn.has(pool)) return;
  runUnnamedOn(pool);
  pool.on('acquire', (client) => unnamedOn.add(client));
}

/**
 * Listens for a lost connection on a client checked out of a pool, until the returned function is
 * called (just before release). pg emits 'error' on a client whose connection ends, and a pool
 * listens only to its idle clients: unheard, that event would crash the process. The statement in
 * flight, if any, fails by itself, and the next one fails at once ("not queryable").
 */
export function guardCheckedOut(client: pg.PoolClient): () => void {
  const ignore = () => {};
  client.on('error', ignore);
  return () => client.off('error', ignore);
}

// Connections whose transitions run through the schema's SECURITY DEFINER functions (the
// producer and worker roles: see functions.ts), each with its map from a statement's name to the
// statement that stands in for it (the function call, or a read without payloads). The flag spares
// every other process even the map lookup.
const routedOn = new WeakMap<object, ReadonlyMap<string, Statement>>();
let anyRouted = false;

/**
 * Makes `run` send, on this connection, the statement `routes` maps a statement's name to in its
 * place (built by `functionRoutes` in functions.ts): the same parameters, the same rows.
 */
export function routeOn(db: Queryable, routes: ReadonlyMap<string, Statement>): void {
  anyRouted = true;
  routedOn.set(db, routes);
}

/** As `routeOn`, for a pool and every client it hands out (`pool.connect()` included). */
export function routeOnPool(pool: pg.Pool, routes: ReadonlyMap<string, Statement>): void {
  if (routedOn.has(pool)) return;
  routeOn(pool, routes);
  pool.on('acquire', (client) => routeOn(client, routes));
}

/** True when `run` on this connection goes through the schema's functions (see `routeOn`). */
export function isRouted(db: Queryable): boolean {
  return anyRouted && routedOn.has(db);
}

/** Runs a statement, translating driver errors into `DatabaseError` at this boundary. */
export async function run<R extends pg.QueryResultRow>(
  db: Queryable,
  direct: Statement,
  values: unknown[],
): Promise<R[]> {
  const statement = (anyRouted && routedOn.get(db)?.get(direct.name)) || direct;
  const config =
    anyUnnamed && unnamedOn.has(db)
      ? { text: statement.unnamedText, values }
      : { name: statement.name, text: statement.text, values };
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await db.query<R>(config);
      return result.rows;
    } catch (err) {
      if (attempt < MOVED_ROW_ATTEMPTS && isMovedRowConflict(err) && isPool(db)) continue;
      throw toDatabaseError(err, statement.name);
    }
  }
}

// A statement that read a job's row just before the lane rotation moved it to another lane (see
// migration 018) fails with serialization_failure and changes nothing. Sent on a pool it ran in a
// transaction of its own, so it is sent again, and then finds the row where it now lives. Inside a
// caller's transaction the error is the caller's to handle: the transaction is aborted.
const MOVED_ROW_ATTEMPTS = 4;

function isMovedRowConflict(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '40001';
}

/** True for a pg.Pool (each statement in a transaction of its own), false for a client. */
export function isPool(db: Queryable): boolean {
  return typeof (db as Partial<pg.Pool>).totalCount === 'number';
}
