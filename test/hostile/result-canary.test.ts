import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { type JobWithHistory, type Logger, startDashboard } from '../../src/index.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { databaseUrl, directDatabaseUrl, listenOptions, migratedClient, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// A result or a progress detail is the user's data, like a payload: a canary secret placed in
// them must show only where the payload is shown on request (`jobs show --payload`, the dashboard
// job page with `?payload=1`), never in logs, events, notifications, errors or default output.

const CANARY = `canary${randomBytes(8).toString('hex')}`;

function expectNoCanary(what: string, value: unknown): void {
  const shown =
    typeof value === 'string'
      ? value
      : JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
  expect(shown.includes(CANARY), `${what} holds the canary: ${shown.slice(0, 300)}`).toBe(false);
}

describe('a canary secret in results and progress details', () => {
  it('shows only where payloads are shown on request', async () => {
    const lh = await migratedClient(listenOptions());
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const listener = new pg.Client({ connectionString: directDatabaseUrl() });
    await listener.connect();
    const notifications: unknown[] = [];
    listener.on('notification', (n) => notifications.push({ channel: n.channel, payload: n.payload }));
    await listener.query(`LISTEN "${lh.schema}_wakeup"`);
    await listener.query(`LISTEN "${lh.schema}_finished"`);
    const lines: unknown[] = [];
    const at = (level: string) => (obj: Record<string, unknown>, msg?: string) =>
      lines.push({ level, obj, msg });
    const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    try {
      const { id: ok } = await lh.enqueue('canary', { kind: 'ok' });
      const { id: big } = await lh.enqueue('canary', { kind: 'big' });
      const { id: running } = await lh.enqueue('canary', { kind: 'hold' });
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const events: unknown[] = [];
      const worker = lh.worker({
        logger,
        maxResultBytes: 1000,
        queues: {
          canary: {
            renew: 'progress',
            leaseMs: 60_000,
            handler: async (job) => {
              const { kind } = job.payload as { kind: string };
              await job.progress({ note: CANARY });
              if (kind === 'hold') await held;
              return kind === 'big' ? { secret: CANARY, pad: 'x'.repeat(2000) } : { secret: CANARY };
            },
          },
        },
      });
      for (const name of ['outcome', 'aborted', 'error'] as const) {
        worker.on(name, (...args: unknown[]) => events.push(name === 'error' ? args : args.slice(1)));
      }
      await started(worker);
      const waited = await lh.waitFor(ok, { timeoutMs: 20_000 });
      expect(waited.result).toEqual({ secret: CANARY });
      const deadErr = await lh.waitFor(big, { timeoutMs: 20_000 }).catch((err: unknown) => err);
      expect((deadErr as { code?: string }).code).toBe('JOB_DEAD');
      expectNoCanary('JobDeadError', { ...(deadErr as object), message: (deadErr as Error).message });
      await waitFor(async () => (await lh.getJob(running))?.progress !== null, {
        what: 'progress to be stored',
      });

      // Where they belong: getJob returns them.
      expect((await lh.getJob(ok))?.result).toEqual({ secret: CANARY });
      expect((await lh.getJob(running))?.progress).toEqual({ note: CANARY });

      // Operator output leaves them out by default...
      for (const id of [ok, big, running]) {
        for (const args of [
          ['jobs', 'show', id],
          ['jobs', 'show', id, '--json'],
        ]) {
          const run = await runCliInProcess([...args, ...db]);
          expect(run.stdout.length).toBeGreaterThan(0);
          expectNoCanary(`leasehold ${args.join(' ')}`, run);
        }
      }
      // ...and shows them when asked for.
      expect((await runCliInProcess(['jobs', 'show', ok, '--payload', ...db])).stdout).toContain(
        `result: {"secret":"${CANARY}"}`,
      );
      expect((await runCliInProcess(['jobs', 'show', running, '--payload', ...db])).stdout).toContain(
        `progress: {"note":"${CANARY}"}`,
      );
      const dashboard = await startDashboard(lh, { port: 0 });
      try {
        for (const id of [ok, big, running]) {
          expectNoCanary(
            `dashboard job ${id}`,
            await (await fetch(`${dashboard.url}/api/jobs/${id}`)).text(),
          );
        }
        const page = async (id: string) =>
          (
            (await (await fetch(`${dashboard.url}/api/jobs/${id}?payload=1`)).json()) as {
              job: { resultPreview: { text: string } | null; progressPreview: { text: string } | null };
            }
          ).job;
        expect((await page(ok)).resultPreview?.text).toContain(CANARY);
        expect((await page(running)).progressPreview?.text).toContain(CANARY);
        expectNoCanary('dashboard overview', await (await fetch(`${dashboard.url}/api/overview`)).text());
        expectNoCanary('dashboard dead list', await (await fetch(`${dashboard.url}/api/dead`)).text());
      } finally {
        await dashboard.close();
      }
      release();
      await waitFor(async () => (await lh.getJob(running))?.status === 'succeeded');
      await worker.stop();

      // Never in history, error records, logs, events or notifications.
      for (const id of [ok, big, running]) {
        const job = (await lh.getJob(id, { history: true })) as JobWithHistory;
        expectNoCanary(`job ${id}`, { ...job, result: undefined, progress: undefined });
      }
      expectNoCanary('listDead', await lh.listDead());
      expect(lines.length).toBeGreaterThan(0);
      expectNoCanary('log lines', lines);
      expect(events.length).toBeGreaterThan(0);
      expectNoCanary('worker events', events);
      expect(notifications.length).toBeGreaterThan(0);
      expectNoCanary('notifications', notifications);
    } finally {
      await listener.end();
    }
  });
});
