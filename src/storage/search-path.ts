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

/**
 * A startup option of the connections Leasehold opens directly (not behind a pooler), beside the
 * pinned search_path: sequential scans are off (a cost the planner avoids when any
 * index serves the query, not a ban). The jobs table's lanes (migration 018) change size by orders
 * of magnitude within seconds: a lane is truncated, then takes every new job for ten seconds. A
 * cached generic plan made while a lane was empty scanned it sequentially for each batch once it
 * held 100,000 rows (throughput fell from 25,000 to 500 jobs/s until autovacuum's next analyze).
 * Every statement of the library reaches jobs through an index, so none wants a sequential scan
 * there. Planning each execution instead (plan_cache_mode = force_custom_plan) avoided the
 * collapse too but cost 10–20% of throughput in planning. Behind a transaction pooler the setting
 * cannot be sent at connect; statements run unnamed there, so each is planned with the lanes'
 * current sizes.
 * JIT is off beside it: a query left with a sequential scan (a small table no index serves) costs
 * 10^10 with sequential scans off, far past jit_above_cost, and a server built with LLVM then
 * compiled it on every execution (65 ms instead of 0.1 ms on the system PostgreSQL 15 here).
 * Leasehold's statements are short; none gains from JIT.
 * Prepared statements keep their generic plan (plan_cache_mode = force_generic_plan): left to
 * choose, PostgreSQL re-planned the claim on every execution, because a generic plan costs
 * `LIMIT $3` at a tenth of the queue while a custom plan knows the batch, so the custom plan always
 * looked cheaper. Over the four lanes and their twelve indexes each, that planning cost 0.8 ms per
 * claim: the claim's server CPU went from 31 to 13 µs per job once the generic plan was kept
 * (PostgreSQL 15, batches of 64; the completion, already generic, did not change). Every statement
 * of the library is written to be planned generically (the fence's lateral probe, the queue as a
 * plain `queue_name = $n`); a query of yours on `lh.pool` is planned the same way.
 */
export const INDEX_PLANS_OPTION = '-c enable_seqscan=off -c jit=off -c plan_cache_mode=force_generic_plan';
