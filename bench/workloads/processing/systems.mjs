// The systems the processing workload can run, by key. A fixed map: a child process is told a key,
// never a path, so it can load nothing else.
//
// Each system module exports:
//   label                                  name shown in the table
//   available()                            null, or why it cannot run (e.g. not installed)
//   setup(ctx)                             parent: create its schema (once per bench run)
//   load(ctx, jobs, rep) -> run            parent: reset, then enqueue `jobs` no-op jobs
//   tableShowsDone(ctx, run, jobs)         parent: true once the table shows every job succeeded
//   verify(ctx, run, jobs)                 parent: throw unless every job ran exactly once
//   teardown(ctx)                          parent: drop what setup made
//   prepareWorker({ connectionString, concurrency, rawClaimBatch, run, onHandled, onError })
//     -> { start(), stop() }               child: connect now, start claiming on start()
// where ctx = { connectionString, admin (a pg.Pool) }.

const SYSTEMS = {
  leasehold: () => import('./leasehold.mjs'),
  'leasehold-prefetch': () => import('./leasehold-prefetch.mjs'),
  'leasehold-features': () => import('./leasehold-features.mjs'),
  raw: () => import('./raw.mjs'),
  graphile: () => import('./graphile.mjs'),
  pgboss: () => import('./pgboss.mjs'),
};

export function isSystemKey(key) {
  return Object.hasOwn(SYSTEMS, key);
}

export function loadSystem(key) {
  if (!isSystemKey(key)) throw new Error(`unknown system ${key}`);
  return SYSTEMS[key]();
}
