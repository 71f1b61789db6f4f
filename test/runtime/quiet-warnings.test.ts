import { afterEach, describe, expect, it, vi } from 'vitest';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// The test run's output carries no stray `LEASEHOLD_…` warning (issue 38: `npm test` printed 43
// `[LEASEHOLD_LEASE_LOST]` lines from tests that lose leases on purpose). The setup file
// (support/leasehold-warnings.ts, in vitest.config.ts) keeps them for the tests to assert; this
// file does not import it, so it fails if the setup file is not run for every test file.

afterEach(() => {
  vi.restoreAllMocks();
});

describe('warnings a test provokes', () => {
  it('a lease lost with nobody listening is a process warning, kept from the run output', async () => {
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, 'write').mockImplementation(((chunk: unknown, ...rest: never[]) => {
      written.push(String(chunk));
      return write(chunk as string, ...rest);
    }) as typeof process.stderr.write);
    const heard: { name: string; code?: string }[] = [];
    const onWarning = (warning: Error & { code?: string }) => heard.push(warning);
    process.on('warning', onWarning);
    try {
      const lh = await migratedClient();
      const { id } = await lh.enqueue('quiet', {});
      let running = false;
      const worker = lh.worker({
        queues: {
          quiet: {
            leaseMs: 600,
            renew: 'alive',
            handler: (job) =>
              new Promise<void>((resolve) => {
                running = true;
                job.signal.addEventListener('abort', () => resolve());
              }),
          },
        },
        recoveryIntervalMs: 0,
      });
      await started(worker);
      await waitFor(() => running, { what: 'the handler to run' });
      // Another claim takes the job over: this worker's renewal is refused and its lease lost.
      await testPool(1).query(
        `UPDATE "${lh.schema}".jobs SET lease_token = lease_token + 1, lease_owner = 'someone-else' WHERE id = $1`,
        [id],
      );
      await waitFor(() => heard.some((w) => w.code === 'LEASEHOLD_LEASE_LOST'), {
        what: 'the lease-loss warning',
      });
      await new Promise((resolve) => setImmediate(resolve));
      // Emitted (the library says it), and not printed into the run's output.
      expect(heard.filter((w) => w.code === 'LEASEHOLD_LEASE_LOST').map((w) => w.name)).toEqual([
        'LeaseholdWarning',
      ]);
      expect(written.filter((text) => text.includes('LEASEHOLD_'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
