// The core of `npm run check:pruning` (scripts/check-queue-pruning.mjs): does every hot statement
// of Leasehold touch the partitions of one queue only, when the hot tables are LIST-partitioned by
// queue? The statements are the library's own: each operation is run through the public client or
// the storage functions of dist/ against a recording connection, which keeps the text and the
// parameters the library sends and answers nothing; each is then explained against real rows.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Leasehold } from '../../dist/index.js';
import { claimJobs } from '../../dist/storage/leases/claim.js';
import { recoverExpiredLeases } from '../../dist/storage/leases/recover.js';
import { replayListed } from '../../dist/storage/operator/replay.js';
import { explainStatement } from './explain.mjs';
import { buildQueueLayout, QUEUE_TABLES } from './layout.mjs';

/** The queues of the layout; every statement is checked for the first. */
export const QUEUES = ['alpha', 'beta', 'gamma'];
/** The shards of the per-shard statements: one cluster holding alpha and beta, another gamma. */
export const SHARDS = [['alpha', 'beta'], ['gamma']];
const QUEUE = QUEUES[0];
/** The queues of the flow whose children span two queues. */
const SPANNED = [QUEUES[0], QUEUES[1]];

/** A connection that records what the library sends and answers every statement with no rows. */
class RecordingConnection {
  statements = [];
  async query(config) {
    this.statements.push({ label: labelOf(config), text: config.text, values: config.values ?? [] });
    return { rows: [], rowCount: 0, command: '', oid: 0, fields: [] };
  }
}

/** `leasehold_claim_jobs_0a1b2c3d4e` -> `claim_jobs`: the name the statement was defined with. */
function labelOf(config) {
  const name = config.name ?? /^\/\* (\S+) \*\//.exec(config.text)?.[1] ?? 'unnamed';
  return name.replace(/^leasehold_/, '').replace(/_[0-9a-f]{10}$/, '');
}

/** Runs `operation` against a recording connection; returns the statements it sent. */
async function capture(operation) {
  const recorder = new RecordingConnection();
  try {
    await operation(recorder);
  } catch {
    // An operation that reads an answer (an id, a count) fails on the recorder's empty one, after
    // its statement was recorded: the statement is what is checked.
  }
  if (recorder.statements.length === 0) throw new Error('the operation sent no statement');
  return recorder.statements;
}

/**
 * Rows in every queue, so that a statement that reaches into another queue's partitions finds
 * something there: pending jobs, live leases, expired leases, dead jobs, a flow.
 */
async function seed(lh, pool, schema) {
  const leases = {};
  const dead = {};
  for (const queue of QUEUES) {
    await lh.enqueueMany(
      queue,
      Array.from({ length: 40 }, (_, i) => ({ payload: { n: i } })),
    );
    const live = await lh.claim({ queue, owner: `owner-${queue}`, limit: 6, leaseMs: 600_000 });
    const doomed = await lh.claim({ queue, owner: `owner-${queue}`, limit: 3, leaseMs: 600_000 });
    for (const lease of doomed) await lh.fail(lease, new Error('seeded'), { retryable: false });
    const lapsed = await lh.claim({ queue, owner: `owner-${queue}`, limit: 3, leaseMs: 600_000 });
    // Lapsed leases for the sweep (seeding only: the library never writes an expiry it did not measure).
    await pool.query(
      `UPDATE "${schema}".jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ANY($1::bigint[])`,
      [lapsed.map((l) => l.jobId)],
    );
    await lh.enqueueFlow([
      { ref: 'parent', queue, payload: {} },
      { ref: 'child', queue, payload: {}, dependsOn: ['parent'] },
    ]);
    leases[queue] = live;
    dead[queue] = doomed.map((lease) => lease.jobId);
  }
  // A flow whose parent is in QUEUE and whose children are in QUEUE and in the next queue: its
  // release must reach those two queues' partitions and no others.
  const spanning = await lh.enqueueFlow([
    { ref: 'parent', queue: QUEUE, payload: {} },
    { ref: 'here', queue: QUEUE, payload: {}, dependsOn: ['parent'] },
    { ref: 'there', queue: SPANNED[1], payload: {}, dependsOn: ['parent'] },
  ]);
  // The flow parents of QUEUE, claimed: their completions release their children.
  const parents = await pool.query(
    `SELECT j.id FROM "${schema}".jobs AS j JOIN "${schema}".flow_nodes AS n ON n.job_id = j.id
     WHERE j.queue_name = $1 AND n.ref = 'parent' ORDER BY j.id`,
    [QUEUE],
  );
  const parentIds = parents.rows.map((row) => row.id);
  await pool.query(`UPDATE "${schema}".jobs SET priority = 100 WHERE id = ANY ($1::bigint[])`, [parentIds]);
  const claimed = await lh.claim({ queue: QUEUE, owner: `owner-${QUEUE}`, limit: 2, leaseMs: 600_000 });
  const parentLease = claimed.find((lease) => lease.jobId !== spanning.ids.parent);
  const spanningLease = claimed.find((lease) => lease.jobId === spanning.ids.parent);
  if (claimed.length !== 2 || !parentLease || !spanningLease || !parentIds.includes(parentLease.jobId)) {
    throw new Error('seeding: the flow parents were not claimed');
  }
  await pool.query(`ANALYZE ${QUEUE_TABLES.map(({ table }) => `"${schema}"."${table}"`).join(', ')}`);
  return { leases, dead, parentLease, spanningLease };
}

/**
 * The hot operations, each run as the library runs it for one queue (QUEUE). `scope` is 'queue'
 * (must touch the partitions of that queue only, or of `queues` when given: a flow release whose
 * children are in several queues reaches each of theirs) or 'shard' (the statement spans queues by
 * design and runs once per cluster: checked on a server holding one shard's queues). `known` marks
 * an operation known to fan out, with the reason: it is reported, and does not fail the check; any
 * other fan-out does. No operation is marked today (docs/scaling.md).
 */
function hotOperations(lh, schema, { leases, dead, parentLease, spanningLease }) {
  const live = leases[QUEUE];
  const worker = `owner-${QUEUE}`;
  return [
    { name: 'enqueue', scope: 'queue', run: (db) => lh.enqueue(QUEUE, { a: 1 }, { client: db }) },
    {
      name: 'enqueueMany',
      scope: 'queue',
      run: (db) => lh.enqueueMany(QUEUE, [{ payload: { a: 1 } }, { payload: { a: 2 } }], { client: db }),
    },
    {
      name: 'claim',
      scope: 'queue',
      run: (db) => claimJobs(db, schema, { queue: QUEUE, owner: worker, limit: 10, leaseMs: 30_000 }),
    },
    { name: 'heartbeat', scope: 'queue', run: (db) => lh.heartbeat(live[0], { client: db }) },
    { name: 'complete', scope: 'queue', run: (db) => lh.completeMany(live.slice(0, 3), { client: db }) },
    { name: 'fail', scope: 'queue', run: (db) => lh.fail(live[3], new Error('boom'), { client: db }) },
    {
      name: 'fail (dead)',
      scope: 'queue',
      run: (db) => lh.fail(live[4], new Error('boom'), { client: db, retryable: false }),
    },
    { name: 'flow release', scope: 'queue', run: (db) => lh.complete(parentLease, { client: db }) },
    {
      // A child is looked up in its own queue (its edge records it, migration 019): a release
      // reaches the queues of the children it releases, and no other.
      name: 'flow release (children in two queues)',
      scope: 'queue',
      queues: SPANNED,
      run: (db) => lh.complete(spanningLease, { client: db }),
    },
    {
      name: 'replay (queue filter)',
      scope: 'queue',
      run: (db) => lh.replay({ queue: QUEUE }, { reason: 'check', client: db }),
    },
    {
      // A bulk replay's batch, its filter naming the queue (src/operations/operator/bulk.ts).
      name: 'replay (listed, queue known)',
      scope: 'queue',
      run: (db) =>
        replayListed(
          db,
          schema,
          dead[QUEUE],
          { actor: null, reason: 'check', resetAttempts: true, retryUncertainEffects: false },
          QUEUE,
        ),
    },
    {
      name: 'recovery sweep',
      scope: 'shard',
      run: (db) => recoverExpiredLeases(db, schema, { limit: 100, baseMs: 1000, maxMs: 60_000 }),
    },
  ];
}

/**
 * The verdict on one explained statement for the queues it may touch (`allowed`):
 * `touched` the queues whose partitions it scanned or wrote; `pruning` how the others were left out.
 */
function judge(reading, partitionQueue, allowed) {
  const touchedPartitions = new Set([...reading.executed, ...reading.statistics]);
  const queuesOf = (parts) => new Set([...parts].map((p) => partitionQueue.get(p)));
  const touched = queuesOf(touchedPartitions);
  const foreign = [...touchedPartitions].filter((p) => !allowed.includes(partitionQueue.get(p)));
  const plannedForeign = [...reading.planned].filter((p) => !allowed.includes(partitionQueue.get(p)));
  let pruning;
  if (foreign.length > 0) pruning = 'FANS OUT';
  else if (plannedForeign.length > 0) pruning = 'run time (not executed)';
  else if (reading.subplansRemoved > 0) pruning = 'run time (executor start)';
  else pruning = 'plan time';
  return {
    ok: foreign.length === 0,
    pruning,
    queues: [...touched].sort(),
    partitions: [...touchedPartitions].sort(),
    foreign: foreign.sort(),
  };
}

/**
 * Checks every hot statement (and `extra` ones: { name, text, values, scope? }, each of which must
 * also keep to QUEUE) on `connectionString`, in a scratch schema it drops afterwards.
 * Returns one row per statement and plan mode, and `ok` when none fans out.
 */
export async function checkQueuePruning({ connectionString, extra = [], log = () => {}, debug = false }) {
  const schema = `lh_pruning_${randomBytes(4).toString('hex')}`;
  const lh = new Leasehold({ connectionString, schema });
  const admin = new pg.Client({ connectionString });
  await admin.connect();
  try {
    log(`migrating ${schema}`);
    await lh.migrate();
    log('partitioning the hot tables by queue');
    const partitionQueue = await buildQueueLayout(admin, schema, QUEUES);
    log('seeding every queue');
    const seeded = await seed(lh, lh.pool, schema);
    const rows = [];
    const statements = [];
    for (const op of hotOperations(lh, schema, seeded)) {
      for (const statement of await capture(op.run)) {
        statements.push({ op: op.name, scope: op.scope, queues: op.queues, known: op.known, ...statement });
      }
    }
    for (const e of extra) statements.push({ op: e.name, scope: e.scope ?? 'queue', label: 'extra', ...e });
    for (const statement of statements) {
      const shards = statement.scope === 'shard' ? SHARDS : [statement.queues ?? [QUEUE]];
      for (const allowed of shards) {
        // A shard's server holds its queues only: the other queues' partitions are detached.
        const detach = statement.scope === 'shard' ? detachedFor(allowed) : [];
        for (const mode of ['custom', 'generic']) {
          const reading = await explainStatement(admin, schema, statement, mode, partitionQueue, detach);
          const verdict = judge(reading, partitionQueue, allowed);
          if (!verdict.ok && statement.known) verdict.pruning = `FANS OUT (known: ${statement.known})`;
          rows.push({
            operation: statement.op,
            statement: statement.label,
            scope: statement.scope === 'shard' ? `shard ${allowed.join('+')}` : `queue ${allowed.join('+')}`,
            mode,
            known: !verdict.ok && statement.known !== undefined,
            ...verdict,
            ...(debug ? { plan: reading.plan } : {}),
          });
        }
      }
    }
    return { ok: rows.every((row) => row.ok || row.known), rows, schema };
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await admin.end();
    await lh.close();
  }
}

/** The queue partitions (direct children of each parent) of the queues outside `allowed`. */
function detachedFor(allowed) {
  const detach = [];
  for (const { table } of QUEUE_TABLES) {
    for (const queue of QUEUES) {
      if (!allowed.includes(queue)) detach.push({ parent: table, partition: `${table}__${queue}` });
    }
  }
  return detach;
}

/** The result as a Markdown table: statement -> queues and partitions touched, and how the rest was pruned. */
export function formatPruningTable(rows) {
  const lines = [
    '| Operation | Statement | Checked for | Plan | Queues touched | Others left out | Partitions touched |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const row of rows) {
    lines.push(
      `| ${row.operation} | \`${row.statement}\` | ${row.scope} | ${row.mode} | ${row.queues.join(', ') || '(none)'} | ${
        row.pruning
      } | ${compactPartitions(row.partitions)} |`,
    );
  }
  return lines.join('\n');
}

/** `jobs__alpha__lane_1, jobs__alpha__lane_2` -> `jobs__alpha__lane_{1,2}`. */
function compactPartitions(partitions) {
  const groups = new Map();
  for (const p of partitions) {
    const m = /^(.*__lane_)(\d)$/.exec(p);
    const key = m ? m[1] : p;
    if (!groups.has(key)) groups.set(key, []);
    if (m) groups.get(key).push(m[2]);
  }
  return [...groups]
    .map(([key, lanes]) =>
      lanes.length === 0 ? key : lanes.length === 1 ? `${key}${lanes[0]}` : `${key}{${lanes.join(',')}}`,
    )
    .join(', ');
}
