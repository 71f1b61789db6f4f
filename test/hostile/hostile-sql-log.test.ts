import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type EmbeddedPostgres,
  Leasehold,
  PermanentError,
  RetryableError,
  startDashboard,
  startEmbeddedPostgres,
} from '../../src/index.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { waitFor } from '../support/db.js';
import { holdsUnstorableUnit, INJECTIONS } from '../support/hostile.js';
import { started } from '../support/worker.js';

// With log_statement = all, the server logs the text of every statement it runs and, separately,
// the values bound to its parameters. Injection-shaped strings go in at every entry point; the log
// must show each accepted one only as a parameter value, each refused one nowhere, and the schema
// must be intact.

let server: EmbeddedPostgres;
let log = '';
// Starts every log entry; random, so no logged value can forge an entry.
const PREFIX = `lhlog${randomBytes(6).toString('hex')}|`;
const SCHEMA = 'hostile_log';

beforeAll(async () => {
  server = await startEmbeddedPostgres({
    settings: {
      log_statement: 'all',
      log_line_prefix: PREFIX,
      log_parameter_max_length: '-1',
      log_min_error_statement: 'error',
      lc_messages: 'C',
    },
    onLog: (text) => {
      log += text;
    },
  });
});

afterAll(async () => {
  await server?.stop();
});

/** One log entry: its severity (LOG, DETAIL, STATEMENT, ...) and the rest of its text, continuation lines included. */
interface Entry {
  severity: string;
  body: string;
}

function entries(text: string): Entry[] {
  return text
    .split(PREFIX)
    .slice(1)
    .map((chunk) => {
      const match = /^([A-Z]+):\s+([\s\S]*)$/.exec(chunk);
      return { severity: match?.[1] ?? '?', body: match?.[2] ?? chunk };
    });
}

/** Entries that carry SQL text as the server received it (never parameter values). */
function sqlText(all: Entry[]): string[] {
  return all
    .filter(
      (e) =>
        (e.severity === 'LOG' && /^(statement|execute [^:]*|parse [^:]*|bind [^:]*): /.test(e.body)) ||
        e.severity === 'STATEMENT' ||
        e.severity === 'QUERY',
    )
    .map((e) => e.body);
}

/** Entries listing the values bound to a statement's parameters. */
function parameterValues(all: Entry[]): string[] {
  return all.filter((e) => e.severity === 'DETAIL' && e.body.startsWith('Parameters: ')).map((e) => e.body);
}

// Every hostile string carries a unique marker of letters and digits, which PostgreSQL logs verbatim.
const accepted: string[] = [];
const refused: string[] = [];
let counter = 0;
function marked(list: string[], template: string): string {
  const marker = `mk${randomBytes(4).toString('hex')}n${counter++}`;
  list.push(marker);
  return `${marker}${template}`;
}
/** A hostile string the call accepts (every storable injection fragment in turn), of at most `max` characters. */
const storable = INJECTIONS.filter((s) => s.trim() !== '' && !holdsUnstorableUnit(s));
const ok = (max = 1000) =>
  marked(accepted, `${storable[counter % storable.length]}'); DROP TABLE sentinel.victims; --`).slice(0, max);
/** A hostile string the call refuses before sending anything. */
const bad = (spoiler: string) => marked(refused, `'; DROP TABLE sentinel.victims; --${spoiler}`);

async function refusedWith(call: () => unknown): Promise<void> {
  let err: unknown;
  try {
    await call();
  } catch (thrown) {
    err = thrown;
  }
  expect((err as { code?: string } | undefined)?.code).toBe('VALIDATION');
}

describe('with log_statement = all', () => {
  it('no injected text ever reaches the server as SQL, only as bound parameters', async () => {
    const admin = new pg.Client({ connectionString: server.connectionString });
    await admin.connect();
    await admin.query(
      'CREATE SCHEMA sentinel; CREATE TABLE sentinel.victims (id int); INSERT INTO sentinel.victims VALUES (1)',
    );
    const lh = new Leasehold({
      connectionString: server.connectionString,
      schema: SCHEMA,
      backoff: { baseMs: 0, maxMs: 0 },
    });
    await lh.migrate();
    const tables = async () =>
      (await admin.query(`SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, [SCHEMA])).rows;
    const tablesBefore = await tables();
    const queue = 'orders.eu:v1--x';
    try {
      // Enqueue: payloads, keys, ordering and concurrency keys.
      await lh.enqueue(
        queue,
        { note: ok(), nested: [{ deeper: ok() }], [ok()]: 1 },
        { idempotencyKey: ok() },
      );
      await lh.enqueue(queue, ok(), { orderingKey: ok(), concurrencyKey: ok() });
      await lh.enqueueMany(queue, [
        { payload: { a: ok() }, orderingKey: ok(), concurrencyKey: ok() },
        { payload: [ok(), '$1', '\\'] },
      ]);
      await lh.configureQueue(queue, { owner: ok() });
      await refusedWith(() => lh.enqueue(bad(''), {}));
      await refusedWith(() => lh.enqueue(queue, { s: bad('\u0000') }));
      await refusedWith(() => lh.enqueue(queue, {}, { idempotencyKey: bad('\ud800') }));
      await refusedWith(() => lh.enqueue(queue, {}, { orderingKey: bad('x'.repeat(200)) }));
      await refusedWith(() => lh.configureQueue(queue, { owner: bad('\u0000') }));
      await refusedWith(() => new Leasehold({ connectionString: server.connectionString, schema: bad('') }));
      await refusedWith(() => lh.claim({ queue: bad(''), owner: 'w' }));

      // Claims, leases and outcomes by hand, with a hostile owner and error text.
      const owner = ok();
      const leases = await lh.claim({ queue, owner, limit: 10 });
      expect(leases.length).toBe(4);
      const [a, b, c, e] = leases;
      await lh.heartbeat(a!);
      await lh.complete(a!);
      await lh.fail(b!, Object.assign(new Error(ok()), { code: ok() }), { retryable: false });
      await lh.fail(c!, new Error(ok()), { code: ok() });
      expect(await lh.complete(a!)).toBe(false); // a stale write, refused and counted
      await lh.recoverExpired();
      await refusedWith(() => lh.claim({ queue, owner: bad('\u0000') }));

      // Operator calls: dead jobs, replay, cancel, skip, reads.
      const errorCode = (await lh.getJob(b!.jobId))?.lastErrorCode as string;
      await lh.listDead({ queue, errorCode: ok(64) });
      await lh.listDead({ errorCode });
      await refusedWith(() => lh.listDead({ cursor: bad('') }));
      await lh.replay([b!.jobId], { reason: ok(), actor: ok() });
      await lh.replay({ errorCode: ok(64) }, { reason: ok() });
      await refusedWith(() => lh.replay([bad('')], { reason: 'r' }));
      await refusedWith(() => lh.replay({ queue }, { reason: bad('\u0000') }));
      await lh.cancel(e!.jobId, { reason: ok(), actor: ok() });
      await refusedWith(() => lh.cancel(bad(''), { reason: 'r' }));
      const [d] = await lh.claim({ queue, owner: 'w', limit: 1 });
      if (d) {
        await lh.fail(d, new Error('final'), { retryable: false });
        await lh.skip(d.jobId, { reason: ok(), actor: ok() });
      }
      await lh.getJob(b!.jobId, { history: true });
      await lh.leaseRefusals();
      await lh.listQueues();
      await lh.blockedKeys({ queue });
      await lh.stats();
      await lh.checkHealth({ maxOldestAgeMs: 60_000 });
      await lh.prune();

      // A worker: LISTEN, claims, an effect, a failure whose message is hostile, a retry.
      let runs = 0;
      const worker = await started(
        lh.worker({
          owner: ok(),
          pollIntervalMs: 50,
          queues: {
            [queue]: {
              handler: async (job) => {
                runs++;
                await job.effect(`notify_${runs}`, { perform: () => ({ receipt: 'r' }) });
                if (job.attempt === 1) throw new RetryableError('retry please', { delayMs: 0 });
                if ((job.payload as { fatal?: boolean } | null)?.fatal) throw new PermanentError('fatal');
              },
            },
          },
        }),
      );
      await lh.enqueue(queue, { from: 'worker', fatal: false });
      await waitFor(async () => (await lh.stats()).queues.find((q) => q.queue === queue)?.pending === 0, {
        what: 'the worker to drain the queue',
      });
      await worker.stop();

      // The dashboard and the command line, over the same server.
      const dashboard = await startDashboard(lh, { port: 0 });
      try {
        const dead = await fetch(
          `${dashboard.url}/api/dead?queue=${queue}&errorCode=${encodeURIComponent(ok(64))}`,
        );
        expect(dead.status).toBe(200);
        const badCursor = await fetch(`${dashboard.url}/api/dead?cursor=${encodeURIComponent(bad(''))}`);
        expect(badCursor.status).toBe(400);
      } finally {
        await dashboard.close();
      }
      const db = ['--database-url', server.connectionString, '--schema', SCHEMA];
      const { id: forCli } = await lh.enqueue(queue, {});
      expect((await runCliInProcess(['cancel', forCli, '--reason', ok(), '--actor', ok(), ...db])).code).toBe(
        0,
      );
      expect((await runCliInProcess(['dead', 'list', '--error-code', ok(64), ...db])).code).toBe(0);
      expect((await runCliInProcess(['jobs', 'show', bad(''), ...db])).code).toBe(1);
      expect((await runCliInProcess(['pause', bad(''), ...db])).code).toBe(1);

      // Flush: wait until the server logged a last statement of ours.
      const flush = `flush${randomBytes(4).toString('hex')}`;
      await admin.query(`SELECT '${flush}'`);
      await waitFor(() => log.includes(flush), { what: 'the server log to catch up' });

      const all = entries(log);
      const sql = sqlText(all);
      const parameters = parameterValues(all).join('\n');
      expect(sql.length).toBeGreaterThan(50);
      for (const marker of [...accepted, ...refused]) {
        expect(sql.filter((text) => text.includes(marker))).toEqual([]);
      }
      // Each accepted string did reach the server: as a bound value.
      for (const marker of accepted) expect(parameters, marker).toContain(marker);
      // Each refused one never left the process.
      for (const marker of refused) expect(log, marker).not.toContain(marker);

      // And nothing was dropped.
      expect((await admin.query('SELECT id FROM sentinel.victims')).rows).toEqual([{ id: 1 }]);
      expect(await tables()).toEqual(tablesBefore);
    } finally {
      await lh.close();
      await admin.end();
    }
  });
});
