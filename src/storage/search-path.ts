/**
 * The search_path of the connections Leasehold opens itself: pg_catalog, then the session's own
 * temporary schema, and nothing anyone else may create objects in. Every statement names its
 * schema's tables, but functions and operators (`now()`, `unnest`, `pg_notify`, `=`) resolve
 * through the search_path: with a writable `public` on it (the default before PostgreSQL 15), a
 * function there with a closer argument type would run instead of pg_catalog's (CVE-2018-1058).
 */
export const PINNED_SEARCH_PATH = 'pg_catalog, pg_temp';

/**
 * Connection settings that pin the search_path at connect (a startup `options` parameter: no
 * statement, no round trip). Empty behind a transaction pooler (`pin` false): PgBouncer refuses a
 * startup `options`, and a session `SET` there would leak to other clients' transactions. Pin it
 * on the role instead (`ALTER ROLE app SET search_path = pg_catalog, pg_temp`; docs/security.md).
 */
export function pinnedSearchPath(pin: boolean): { options?: string } {
  return pin ? { options: `-c search_path=${PINNED_SEARCH_PATH.replace(' ', '')}` } : {};
}
