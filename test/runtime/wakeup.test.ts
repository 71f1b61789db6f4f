import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  countByStatus,
  databaseUrl,
  directDatabaseUrl,
  listenOptions,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { started } from '../support/worker.js';

describe('coalesced wake-ups', () => {
  it('a burst of concurrent enqueues sends far fewer notifications than jobs, the last one after every job committed', async () => {
    // One statement per call, as the coalescer was built for: with write combining the burst is
    // two statements, and when the second comes after the window it carries its own notification,
    // which the listener may hear before the callers' answers arrive (the test's clock below).
    // That path is covered by the idle-worker tests: no job is left unannounced.
    const lh = await migratedClient({ combineEnqueues: false });
    const listener = new pg.Client({ connectionString: directDatabaseUrl() }); // LISTEN needs a session
    await listener.connect();
    try {
      const received: number[] = [];
      listener.on('notification', (m) => {
        if (m.payload === 'burst') received.push(performance.now());
      });
      await listener.query(`LISTEN "${lh.schema}_wakeup"`);
      await Promise.all(Array.from({ length: 60 }, (_, i) => lh.enqueue('burst', { i })));
      const allCommittedAt = performance.now();
      await waitFor(() => received.some((at) => at >= allCommittedAt), { what: 'a trailing notification' });
      expect(received.length).toBeGreaterThan(0);
      expect(received.length).toBeLessThan(60);
    } finally {
      await listener.end();
    }
  });

  it('an idle worker that never polls still runs every job of concurrent bursts: no job is left unannounced', async () => {
    const lh = await migratedClient(listenOptions());
    const pool = testPool();
    const worker = lh.worker({
      queues: { bursty: { concurrency: 8, handler: async () => {} } },
      pollIntervalMs: 3_600_000,
      recoveryIntervalMs: 0,
    });
    await started(worker);
    await waitFor(() => worker.listenerPid !== null, { what: 'listener' });
    for (let burst = 0; burst < 5; burst++) {
      await Promise.all(Array.from({ length: 40 }, (_, i) => lh.enqueue('bursty', { burst, i })));
      await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === (burst + 1) * 40, {
        timeoutMs: 5000,
        what: `burst ${burst} drained by notifications alone`,
      });
    }
  });

  it('concurrent enqueueMany batches are announced the same way: fewer notifications, every job run by an idle worker', async () => {
    const lh = await migratedClient(listenOptions());
    const pool = testPool();
    const listener = new pg.Client({ connectionString: directDatabaseUrl() }); // LISTEN needs a session
    await listener.connect();
    const worker = lh.worker({
      queues: { batches: { concurrency: 8, handler: async () => {} } },
      pollIntervalMs: 3_600_000,
      recoveryIntervalMs: 0,
    });
    try {
      let notifications = 0;
      listener.on('notification', (m) => {
        if (m.payload === 'batches') notifications++;
      });
      await listener.query(`LISTEN "${lh.schema}_wakeup"`);
      await started(worker);
      await waitFor(() => worker.listenerPid !== null, { what: 'listener' });
      for (let burst = 0; burst < 3; burst++) {
        await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            lh.enqueueMany('batches', [{ payload: { burst, i } }, { payload: 2 }]),
          ),
        );
        await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === (burst + 1) * 24, {
          timeoutMs: 5000,
          what: `burst ${burst} drained by notifications alone`,
        });
      }
      expect(notifications).toBeGreaterThan(0);
      expect(notifications).toBeLessThan(36);
    } finally {
      await worker.stop();
      await listener.end();
    }
  });

  it('close() sends a pending trailing notification before ending the pool', async () => {
    const setup = await migratedClient();
    const { Leasehold } = await import('../../src/index.js');
    const lh = new Leasehold({ connectionString: databaseUrl(), schema: setup.schema });
    const listener = new pg.Client({ connectionString: directDatabaseUrl() }); // LISTEN needs a session
    await listener.connect();
    try {
      let count = 0;
      listener.on('notification', () => count++);
      await listener.query(`LISTEN "${setup.schema}_wakeup"`);
      await lh.enqueue('closing', {}); // notifies inline
      await lh.enqueue('closing', {}); // quiet, inside the window: announced by a trailing notification
      await lh.close();
      await waitFor(() => count === 2, { what: 'two notifications' });
    } finally {
      await listener.end();
    }
  });
});
