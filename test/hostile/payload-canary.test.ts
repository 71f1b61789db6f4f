import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type JobWithHistory,
  type Logger,
  PermanentError,
  RetryableError,
  startDashboard,
} from '../../src/index.js';
import { createStatsMetrics, createWorkerMetrics } from '../../src/prometheus.js';
import { MAX_ERROR_MESSAGE, MAX_ERROR_STACK } from '../../src/runtime/run/error-details.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import {
  databaseUrl,
  directDatabaseUrl,
  expireLease,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { rejection, runs } from '../support/hostile.js';
import { installRecordingTracer, type SpanRecord } from '../support/otel-recorder.js';
import { started } from '../support/worker.js';

// A canary secret placed in payloads must never surface anywhere but the payload itself: not in
// logs, error records, history, metrics, spans, notifications, or the outputs that leave payloads
// out. The one place meant to show a payload to an operator, `jobs show --payload` (and the
// dashboard's job page), is checked to show it, so the exclusion is explicit.

const CANARY = `canary${randomBytes(8).toString('hex')}`;

let tracing: { spans: SpanRecord[]; uninstall(): void };
beforeAll(() => {
  tracing = installRecordingTracer();
});
afterAll(() => tracing.uninstall());

/** JSON text of anything, for a substring check (bigints and cycles made printable). */
function text(value: unknown): string {
  const seen = new WeakSet();
  return JSON.stringify(value, (_key, v) => {
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Error) return { name: v.name, message: v.message, stack: v.stack, cause: text(v.cause) };
    if (typeof v === 'object' && v !== null) {
      if (seen.has(v)) return '[cycle]';
      seen.add(v);
    }
    return v;
  });
}

function expectNoCanary(what: string, value: unknown): void {
  const shown = typeof value === 'string' ? value : text(value);
  expect(shown.includes(CANARY), `${what} holds the canary: ${shown.slice(0, 300)}`).toBe(false);
}

function memoryLogger(): { logger: Logger; lines: unknown[] } {
  const lines: unknown[] = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg?: string) =>
    lines.push({ level, obj, msg });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

describe('a canary secret in payloads', () => {
  it('never appears in logs, error records, history, metrics, spans, notifications or operator output', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(2);
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const secret = (step: string) => ({
      step,
      secret: CANARY,
      [CANARY]: [CANARY, { note: `for ${CANARY}` }],
    });

    const listener = new pg.Client({ connectionString: directDatabaseUrl() }); // LISTEN needs a session
    await listener.connect();
    const notifications: unknown[] = [];
    listener.on('notification', (n) => notifications.push({ channel: n.channel, payload: n.payload }));
    await listener.query(`LISTEN "${lh.schema}_wakeup"`);

    try {
      // Enqueued every way, with keys that are not secret.
      const { id: flaky } = await lh.enqueue('canary', secret('retry-then-dead'), {
        idempotencyKey: 'idem-1',
        concurrencyKey: 'cc-1',
      });
      const { ids } = await lh.enqueueMany('canary', [
        { payload: secret('snooze') },
        { payload: secret('effect'), orderingKey: 'order-1' },
        { payload: secret('unknown-error'), orderingKey: 'order-2' },
        { payload: secret('ok'), orderingKey: 'order-2' },
      ]);
      const [snoozing, effecting, unknown, behindUnknown] = ids as [string, string, string, string];
      const { id: slow } = await lh.enqueue('canary-slow', secret('slow'));
      const { id: cancelled } = await lh.enqueue('canary-idle', secret('cancel me'));
      await lh.cancel(cancelled, { reason: 'not needed' });

      // By hand: a lease that expires (recovered, then a stale completion refused), and one that dies by expiry.
      const { id: expiring } = await lh.enqueue('canary-manual', secret('expire'), { maxAttempts: 2 });
      const { id: expiresDead } = await lh.enqueue('canary-manual', secret('expire-dead'), {
        maxAttempts: 1,
      });
      const manual = await lh.claim({ queue: 'canary-manual', owner: 'hand', limit: 2, leaseMs: 60_000 });
      for (const lease of manual) await expireLease(pool, lh.schema, lease.jobId);
      expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 1 });
      expect(await lh.complete(manual.find((l) => l.jobId === expiring)!)).toBe(false);

      const { logger, lines } = memoryLogger();
      const events: unknown[] = [];
      let replayed = false;
      const snoozed = new Set<string>();
      const worker = lh.worker({
        logger,
        pollIntervalMs: 50,
        shutdownTimeoutMs: 200,
        queues: {
          canary: {
            unknownErrorAttempts: 2,
            handler: async (job) => {
              const { step } = job.payload as { step: string };
              if (step === 'retry-then-dead' && !replayed) {
                if (job.attempt === 1)
                  throw new RetryableError('temporary outage', { code: 'TEMP', delayMs: 0 });
                throw new PermanentError('gave up', { code: 'FATAL' });
              }
              if (step === 'snooze' && !snoozed.has(job.id)) {
                snoozed.add(job.id);
                job.snooze(10);
              }
              if (step === 'effect') await job.effect('charge', { perform: () => ({ receipt: 'r-1' }) });
              if (step === 'unknown-error') throw new TypeError('bad input shape');
              await job.progress({ done: true });
            },
          },
          'canary-manual': async () => {},
          'canary-slow': {
            maxRuntimeMs: 300,
            handler: async (job) => {
              if (job.attempt > 1) return;
              await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
              throw job.signal.reason;
            },
          },
        },
      });
      for (const name of ['outcome', 'aborted', 'stuck', 'recovered', 'error'] as const) {
        // The first argument of job events is the handler's own job context, which carries the payload.
        worker.on(name, (...args: unknown[]) =>
          events.push(name === 'outcome' || name === 'aborted' || name === 'stuck' ? args.slice(1) : args),
        );
      }
      const metrics = createWorkerMetrics(worker, { pool: lh.pool });
      await started(worker);

      const status = async (id: string) => (await lh.getJob(id))?.status;
      await waitFor(async () => (await status(flaky)) === 'dead', { what: 'the flaky job to die' });
      await waitFor(async () => (await status(unknown)) === 'dead', {
        what: 'the unclassified error to die',
      });
      const blocked = await lh.blockedKeys();
      expect(blocked.map((k) => k.orderingKey)).toEqual(['order-2']);
      replayed = true;
      await lh.replay([flaky], { reason: 'fixed', actor: 'ops' });
      await lh.skip(unknown, { reason: 'bad data', actor: 'ops' });
      for (const id of [flaky, snoozing, effecting, behindUnknown, slow, expiring]) {
        await waitFor(async () => (await status(id)) === 'succeeded', { what: `job ${id} to succeed` });
      }
      await worker.stop();
      metrics.close();

      // The canary is really in the database, where it belongs: in payloads still kept.
      const kept = await pool.query(
        `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE payload::text LIKE $1`,
        [`%${CANARY}%`],
      );
      expect(kept.rows[0].n).toBeGreaterThan(0);

      // Every row of every table, the payload column aside.
      const { rows: tables } = await pool.query(`SELECT tablename FROM pg_tables WHERE schemaname = $1`, [
        lh.schema,
      ]);
      for (const { tablename } of tables) {
        const { rows } = await pool.query(
          `SELECT to_jsonb(t) - 'payload' AS row FROM "${lh.schema}"."${tablename}" AS t`,
        );
        expectNoCanary(`table ${tablename}`, rows);
      }
      // Histories, error records and every read an operator makes.
      for (const id of [
        flaky,
        snoozing,
        effecting,
        unknown,
        behindUnknown,
        slow,
        cancelled,
        expiring,
        expiresDead,
      ]) {
        const job = (await lh.getJob(id, { history: true })) as JobWithHistory;
        expect(job.history.length).toBeGreaterThan(0);
        expectNoCanary(`job ${id}`, { ...job, payload: undefined });
      }
      expectNoCanary('listDead', await lh.listDead());
      expectNoCanary('listQueues', await lh.listQueues());
      expectNoCanary('leaseRefusals', await lh.leaseRefusals());
      expect((await lh.leaseRefusals()).length).toBeGreaterThan(0);
      expectNoCanary('stats', await lh.stats());
      expectNoCanary('checkHealth', await lh.checkHealth({ maxDead: 0, maxOldestAgeMs: 0 }));
      // Metrics, logs, worker events, spans and notifications.
      expectNoCanary('stats metrics', await createStatsMetrics(lh).metrics());
      expectNoCanary('worker metrics', await metrics.registry.metrics());
      expect(lines.length).toBeGreaterThan(5);
      expectNoCanary('log lines', lines);
      expectNoCanary('worker events', events);
      expect(tracing.spans.map((s) => s.name)).toEqual(
        expect.arrayContaining(['leasehold.enqueue', 'leasehold.claim', 'leasehold.process']),
      );
      expectNoCanary('spans', tracing.spans);
      expect(notifications.length).toBeGreaterThan(0);
      expectNoCanary('notifications', notifications);

      // The command line: nothing by default; the payload only when asked for it.
      for (const args of [
        ['queues'],
        ['queues', '--json'],
        ['dead', 'list'],
        ['dead', 'list', '--json'],
        ['jobs', 'show', expiresDead],
        ['jobs', 'show', expiresDead, '--json'],
        ['check', '--max-dead', '0'],
      ]) {
        const run = await runCliInProcess([...args, ...db]);
        expect(run.stdout.length + run.stderr.length, args.join(' ')).toBeGreaterThan(0);
        expectNoCanary(`leasehold ${args.join(' ')}`, run);
      }
      expect((await runCliInProcess(['jobs', 'show', expiresDead, '--payload', ...db])).stdout).toContain(
        CANARY,
      );

      // The dashboard: its overview and dead list leave payloads out; a job's page shows an excerpt on request.
      const dashboard = await startDashboard(lh, { port: 0 });
      try {
        for (const path of ['/api/overview', '/api/dead', '/']) {
          expectNoCanary(`dashboard ${path}`, await (await fetch(`${dashboard.url}${path}`)).text());
        }
        // A job's page leaves it out too unless asked for (`?payload=1`), as `jobs show` does.
        expectNoCanary(
          'dashboard job page',
          await (await fetch(`${dashboard.url}/api/jobs/${expiresDead}`)).text(),
        );
        const page = (await (await fetch(`${dashboard.url}/api/jobs/${expiresDead}?payload=1`)).json()) as {
          job: { payloadPreview: { text: string } };
        };
        expect(page.job.payloadPreview.text).toContain(CANARY);
        expectNoCanary('dashboard job page', { ...page.job, payloadPreview: undefined });
      } finally {
        await dashboard.close();
      }
    } finally {
      await listener.end();
    }
  });

  it('a refused payload is never quoted back: not its values, not its keys', async () => {
    const lh = await migratedClient({ maxPayloadBytes: 4096 });
    const defects = fc.constantFrom(
      'circular',
      'bigint',
      'too large',
      'nul',
      'lone surrogate',
      'too deep',
      'toJSON',
    );
    await fc.assert(
      fc.asyncProperty(defects, fc.boolean(), async (defect, many) => {
        const payload: Record<string, unknown> = { secret: CANARY, [CANARY]: { nested: CANARY } };
        if (defect === 'circular') (payload[CANARY] as Record<string, unknown>).self = payload;
        if (defect === 'bigint') payload.amount = 10n;
        if (defect === 'too large') payload.blob = CANARY.repeat(1000);
        if (defect === 'nul') payload.text = `${CANARY}\u0000`;
        if (defect === 'lone surrogate') payload[`${CANARY}\ud800`] = 1;
        if (defect === 'too deep') {
          let deep: unknown = CANARY;
          for (let i = 0; i < 100_000; i++) deep = { [CANARY]: deep };
          payload.deep = deep;
        }
        if (defect === 'toJSON')
          payload.toJSON = () => {
            throw new Error(`cannot serialise ${CANARY}`);
          };
        const err = await rejection(many ? lh.enqueueMany('q', [{ payload }]) : lh.enqueue('q', payload));
        expect((err as { code?: string }).code).toBe('VALIDATION');
        expectNoCanary('the error', { message: (err as Error).message, stack: (err as Error).stack, err });
      }),
      runs(30),
    );
  });

  it('a handler error that quotes the payload is stored bounded, and goes no further than the job record', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(1);
    const { logger, lines } = memoryLogger();
    const { id } = await lh.enqueue('quoting', { secret: CANARY }, { maxAttempts: 1 });
    const worker = await started(
      lh.worker({
        logger,
        pollIntervalMs: 50,
        queues: {
          quoting: async (job) => {
            const { secret } = job.payload as { secret: string };
            // A handler that puts payload data in its error: Leasehold cannot tell it is secret.
            throw new Error(`failed for ${secret}: ${'x'.repeat(100_000)}`);
          },
        },
      }),
    );
    await waitFor(async () => (await lh.getJob(id))?.status === 'dead', { what: 'the job to die' });
    await worker.stop();
    const job = (await lh.getJob(id, { history: true })) as JobWithHistory;
    // The limitation, documented: the message is stored as the handler wrote it...
    expect(job.lastErrorMessage).toContain(CANARY);
    // ...but bounded, in the job and in its history.
    expect(job.lastErrorMessage!.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE);
    expect(job.lastErrorStack!.length).toBeLessThanOrEqual(MAX_ERROR_STACK);
    const { rows } = await pool.query(
      `SELECT max(length(message))::int AS longest FROM "${lh.schema}".job_events WHERE job_id = $1`,
      [id],
    );
    expect(rows[0].longest).toBeLessThanOrEqual(MAX_ERROR_MESSAGE);
    // Logs, spans and metrics carry the error code, never the message.
    expectNoCanary('log lines', lines);
    expectNoCanary('spans', tracing.spans);
    expectNoCanary('stats metrics', await createStatsMetrics(lh).metrics());
  });
});
