import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type JobContext, Leasehold, LeaseLostError } from '../../src/index.js';
import { databaseUrl, migratedClient, uniqueSchema, waitFor } from '../support/db.js';
import { startRestartablePostgres } from '../support/restartable-postgres.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { started } from '../support/worker.js';

const clients: Leasehold[] = [];
afterAll(async () => {
  for (const lh of clients.splice(0)) await lh.close();
});

function causes(err: unknown): string {
  const parts: string[] = [];
  for (let e = err as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    parts.push(String(e.message));
  }
  return parts.join(' <- ');
}

describe('never hang silently', () => {
  it('a black-holed connection: the stuck completion raises stalled, times out, and holds no later outcome', async () => {
    const setup = await migratedClient();
    const proxy = await startTcpProxy(databaseUrl());
    const lh = new Leasehold({
      connectionString: proxy.connectionString,
      schema: setup.schema,
      statementTimeoutMs: 1000,
      connectTimeoutMs: 1000,
    });
    clients.push(lh);
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const startedJobs: string[] = [];
    const stalled: { statement: string; outstandingMs: number }[] = [];
    const errors: unknown[] = [];
    const worker = lh.worker({
      queues: {
        hole: {
          leaseMs: 1000,
          handler: async (job) => {
            startedJobs.push(job.id);
            await gate;
          },
        },
      },
      pollIntervalMs: 100,
      recoveryIntervalMs: 200,
    });
    worker.on('stalled', (statement) => stalled.push(statement));
    worker.on('error', (err) => errors.push(err));
    await started(worker);
    const first = await setup.enqueue('hole', {});
    await waitFor(() => startedJobs.includes(first.id), { what: 'the first job to start' });

    // The network drops everything from now on; every connection stays open.
    proxy.blackHole();
    const cutAt = performance.now();
    release(); // the completion is sent into the hole
    await waitFor(() => stalled.length > 0, { what: 'the stalled signal' });
    expect(stalled[0]?.statement).toMatch(/^leasehold_/);
    expect(stalled[0]?.outstandingMs).toBeGreaterThan(1000);
    // The health signal answers while the database cannot.
    const health = await lh.checkHealth({ maxStatementOutstandingMs: 1000 });
    expect(health.ok).toBe(false);
    expect(health.failures.map((f) => f.rule)).toEqual(['maxStatementOutstandingMs']);
    // Not silence: the client gives up on the statements (and connections) that got no answer and
    // says so, once for the outage (issue 38), not once per statement per retry.
    await waitFor(() => errors.some((err) => /timeout/i.test(causes(err))), {
      what: 'a timed-out statement or connection reported',
      timeoutMs: 20_000,
    });
    expect(performance.now() - cutAt).toBeGreaterThan(1000);
    expect(errors.map(causes)).toHaveLength(1);
    expect(causes(errors[0])).not.toMatch(/leasehold_/);

    proxy.heal();
    // A later job's outcome is not held behind the stuck one, and the stuck job is settled by the
    // fence: its lease lapsed, so it is recovered and run again, and finishes.
    const second = await setup.enqueue('hole', {});
    await waitFor(async () => (await setup.getJob(second.id))?.status === 'succeeded', {
      what: 'the later job completed',
      timeoutMs: 30_000,
    });
    await waitFor(async () => (await setup.getJob(first.id))?.status === 'succeeded', {
      what: 'the stuck job finished',
      timeoutMs: 30_000,
    });
    // The completion sent into the hole was never taken for a success: the job ran again.
    expect(startedJobs.filter((job) => job === first.id).length).toBeGreaterThanOrEqual(2);
    await worker.stop();
  }, 90_000);

  it('a job.transaction waiting on a black-holed connection is abandoned when its lease runs out, not at the statement timeout', async () => {
    const setup = await migratedClient();
    const proxy = await startTcpProxy(databaseUrl());
    // A statement timeout far beyond the test's own waits: only the lease can end the transaction.
    const lh = new Leasehold({
      connectionString: proxy.connectionString,
      schema: setup.schema,
      statementTimeoutMs: 300_000,
      connectTimeoutMs: 1000,
    });
    clients.push(lh);
    let holed: () => void = () => {};
    const hole = new Promise<void>((resolve) => {
      holed = resolve;
    });
    const opened: string[] = [];
    const thrown: unknown[] = [];
    const committed: string[] = [];
    const worker = lh.worker({
      queues: {
        txhole: {
          leaseMs: 1000,
          handler: async (job) => {
            const first = opened.length === 0;
            try {
              await job.transaction(async (tx: pg.PoolClient) => {
                opened.push(job.id);
                // The first run's statement goes into the hole; later runs' go through.
                if (first) await hole;
                await tx.query('SELECT 1');
              });
              committed.push(job.id);
            } catch (err) {
              thrown.push(err);
              throw err;
            }
          },
        },
      },
      pollIntervalMs: 100,
      recoveryIntervalMs: 200,
    });
    worker.on('error', () => {});
    await started(worker);
    const { id } = await setup.enqueue('txhole', {});
    await waitFor(() => opened.length > 0, { what: 'the transaction to open' });

    proxy.blackHole();
    holed();
    // The statement is never answered; the lease's deadline ends the transaction, not the timeout.
    await waitFor(() => thrown.length > 0, { what: 'job.transaction to give up', timeoutMs: 30_000 });
    expect(thrown[0]).toBeInstanceOf(LeaseLostError);
    expect(String((thrown[0] as Error).message)).toMatch(/ran out while its transaction was open/);
    expect(committed).toEqual([]);

    proxy.heal();
    // The abandoned transaction committed nothing: the lapsed lease is recovered, the job runs again.
    await waitFor(async () => (await setup.getJob(id))?.status === 'succeeded', {
      what: 'the job to succeed on its next run',
      timeoutMs: 30_000,
    });
    expect(opened.filter((job) => job === id).length).toBeGreaterThanOrEqual(2);
    expect(committed).toEqual([id]);
    await worker.stop();
  }, 90_000);

  // A handler whose first run waits for the cut, then calls one durable tool (`use`) through the
  // black hole: the call must give up at the lease, not at the 300 s timeouts; after the heal the
  // job's next run succeeds. Returns what each run threw.
  async function durableCallThroughTheHole(
    queue: string,
    use: (job: JobContext) => Promise<unknown>,
    checkWhileCut: (thrown: unknown) => void,
  ): Promise<{ id: string; runs: string[] }> {
    const setup = await migratedClient();
    const proxy = await startTcpProxy(databaseUrl());
    const lh = new Leasehold({
      connectionString: proxy.connectionString,
      schema: setup.schema,
      statementTimeoutMs: 300_000,
      // Neither a statement nor a new connection is bounded by anything but the lease here.
      connectTimeoutMs: 300_000,
    });
    clients.push(lh);
    const runs: string[] = [];
    const thrown: unknown[] = [];
    let cut = false;
    const worker = lh.worker({
      queues: {
        [queue]: {
          leaseMs: 1000,
          handler: async (job) => {
            runs.push(job.id);
            if (runs.length === 1) await waitFor(() => cut, { what: 'the cut' });
            try {
              await use(job);
            } catch (err) {
              thrown.push(err);
              throw err;
            }
          },
        },
      },
      pollIntervalMs: 100,
      recoveryIntervalMs: 200,
    });
    worker.on('error', () => {});
    await started(worker);
    const { id } = await setup.enqueue(queue, {});
    await waitFor(() => runs.length > 0, { what: 'the first run' });

    proxy.blackHole();
    cut = true;
    await waitFor(() => thrown.length > 0, { what: 'the durable call to give up', timeoutMs: 30_000 });
    expect(thrown[0]).toBeInstanceOf(LeaseLostError);
    checkWhileCut(thrown[0]);

    proxy.heal();
    await waitFor(async () => (await setup.getJob(id))?.status === 'succeeded', {
      what: 'the job to succeed on its next run',
      timeoutMs: 30_000,
    });
    expect(runs.length).toBeGreaterThanOrEqual(2);
    await worker.stop();
    return { id, runs };
  }

  it('job.effect waiting on a black-holed connection gives up when its lease runs out, and performs nothing', async () => {
    const performed: string[] = [];
    await durableCallThroughTheHole(
      'effecthole',
      (job) =>
        job.effect('call', {
          perform: async (key) => {
            performed.push(key);
          },
        }),
      (thrown) => {
        expect(String((thrown as Error).message)).toMatch(/before the lease ran out/);
        expect(performed).toEqual([]);
      },
    );
    expect(performed).toHaveLength(1);
  }, 90_000);

  it('job.step waiting on a black-holed connection gives up when its lease runs out, and runs nothing', async () => {
    const ran: string[] = [];
    const { id } = await durableCallThroughTheHole(
      'stephole',
      (job) =>
        job.step('charge', async () => {
          ran.push(job.id);
          return 'charged';
        }),
      (thrown) => {
        expect(String((thrown as Error).message)).toMatch(/step "charge#0" .*before the lease ran out/);
        expect(ran).toEqual([]);
      },
    );
    expect(ran).toEqual([id]);
  }, 90_000);

  it('a commit waiting for a synchronous standby that does not exist raises stalled and fails the health rule', async () => {
    const server = await startRestartablePostgres();
    const schema = uniqueSchema('lh_syncrep');
    // statementTimeoutMs 0: no timeout at all, so the stalled signal is the only one.
    const lh = new Leasehold({ connectionString: server.connectionString, schema, statementTimeoutMs: 0 });
    clients.push(lh);
    await lh.migrate();
    const { id } = await lh.enqueue('sync', {});
    const admin = new pg.Client({ connectionString: server.connectionString });
    await admin.connect();
    const setStandby = async (names: string | null) => {
      await admin.query(
        names === null
          ? 'ALTER SYSTEM RESET synchronous_standby_names'
          : `ALTER SYSTEM SET synchronous_standby_names = '${names}'`,
      );
      await admin.query('SELECT pg_reload_conf()');
      await waitFor(
        async () => {
          const probe = new pg.Client({ connectionString: server.connectionString });
          await probe.connect();
          try {
            const { rows } = await probe.query<{ v: string }>(
              "SELECT current_setting('synchronous_standby_names') AS v",
            );
            return rows[0]?.v === (names ?? '');
          } finally {
            await probe.end();
          }
        },
        { what: 'the reload' },
      );
    };
    try {
      // The trap a promoted server inherits: every commit waits for a standby it does not have.
      await admin.query(`ALTER DATABASE postgres SET synchronous_commit = on`);
      await setStandby('ghost_standby');
      const stalled: { statement: string; outstandingMs: number }[] = [];
      const worker = lh.worker({ queues: { sync: { leaseMs: 1000, handler: async () => {} } } });
      worker.on('stalled', (statement) => stalled.push(statement));
      worker.on('error', () => {});
      await started(worker);
      await waitFor(() => stalled.length > 0, { what: 'the stalled signal' });
      expect(stalled[0]?.outstandingMs).toBeGreaterThan(1000);
      expect((await lh.checkHealth({ maxStatementOutstandingMs: 1000 })).ok).toBe(false);
      // The standby setting is fixed: the waiting commits return, and the work goes on.
      await setStandby(null);
      await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
        what: 'the job completed',
        timeoutMs: 20_000,
      });
      expect((await lh.checkHealth({ maxStatementOutstandingMs: 1000 })).ok).toBe(true);
      await worker.stop();
    } finally {
      await setStandby(null).catch(() => {});
      await admin.end();
      await lh.close();
      clients.splice(clients.indexOf(lh), 1);
      await server.crash().catch(() => {});
    }
  }, 90_000);
});
