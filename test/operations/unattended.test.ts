import { describe, expect, it } from 'vitest';
import { startDashboard } from '../../src/index.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { databaseUrl, migratedClient, testPool } from '../support/db.js';
import { claimableSince, expireLeases } from '../support/job-states.js';

describe('queues with waiting work and no worker are flagged unattended', () => {
  it('listQueues and stats flag claimable work past the threshold with no live lease; a live lease or a pause clears it', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany('orphan', [{ payload: 1 }, { payload: 2 }]);
    await lh.enqueueMany('served', [{ payload: 1 }, { payload: 2 }]);
    await lh.enqueue('fresh', {});
    await lh.enqueue('paused', {});
    await lh.pauseQueue('paused');
    await claimableSince(pool, lh.schema, 120_000);
    await claimableSince(pool, lh.schema, 0, { queue: 'fresh' });
    // A worker holds one of `served`'s jobs: it is busy, not absent.
    await lh.claim({ queue: 'served', owner: 'busy-worker' });

    const flags = async () => {
      const byName = Object.fromEntries((await lh.listQueues()).map((q) => [q.name, q.unattended]));
      const stats = Object.fromEntries((await lh.stats()).queues.map((q) => [q.queue, q.unattended]));
      expect(stats).toEqual(byName);
      return byName;
    };
    expect(await flags()).toEqual({ orphan: true, served: false, fresh: false, paused: false });

    // The busy worker vanished: its lease expired and the remaining work still waits.
    await expireLeases(pool, lh.schema, { queue: 'served' });
    expect((await flags()).served).toBe(true);

    // The threshold is an option (default 60 s): fresh work is flagged under a 0 ms threshold.
    await claimableSince(pool, lh.schema, 1000, { queue: 'fresh' });
    expect((await lh.listQueues({ unattendedAfterMs: 0 })).find((q) => q.name === 'fresh')?.unattended).toBe(
      true,
    );
    expect((await lh.listQueues()).find((q) => q.name === 'fresh')?.unattended).toBe(false);
    expect(
      (await lh.stats({ unattendedAfterMs: 0 })).queues.find((q) => q.queue === 'fresh')?.unattended,
    ).toBe(true);
  });

  it("`leasehold queues` says 'no worker' and the dashboard's overview carries the flag", async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('orphan', {});
    await lh.enqueue('recent', {});
    await claimableSince(pool, lh.schema, 120_000, { queue: 'orphan' });
    const table = await runCliInProcess(['queues', '--database-url', databaseUrl(), '--schema', lh.schema]);
    expect(table.code).toBe(0);
    const rows = table.stdout.trim().split('\n');
    expect(rows.find((row) => row.startsWith('orphan'))).toMatch(/no worker$/);
    expect(rows.find((row) => row.startsWith('recent'))).not.toMatch(/no worker/);

    const dashboard = await startDashboard(lh, { port: 0 });
    try {
      const overview = (await (await fetch(`${dashboard.url}/api/overview`)).json()) as {
        queues: { queue: string; unattended: boolean }[];
      };
      expect(Object.fromEntries(overview.queues.map((q) => [q.queue, q.unattended]))).toEqual({
        orphan: true,
        recent: false,
      });
    } finally {
      await dashboard.close();
    }
  });
});
