import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { runCliInProcess as cli } from '../support/cli-inprocess.js';
import { databaseUrl, migratedClient } from '../support/db.js';

describe('leasehold flows show', () => {
  it('prints every job of the flow with its status and parents, as a table or JSON, from any job id', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const { ids } = await lh.enqueueFlow([
      { ref: 'extract', queue: 'etl', payload: {} },
      { ref: 'load', queue: 'etl', payload: {}, dependsOn: ['extract'] },
    ]);
    const [extract] = await lh.claim({ queue: 'etl', owner: 'w' });
    await lh.fail(extract as Lease, new Error('no'), { retryable: false, code: 'SOURCE_DOWN' });

    const table = await cli(['flows', 'show', ids.load as string, ...db]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^flow \d+, created .*: 2 jobs \(1 dead, 1 blocked\)$/);
    expect(lines[2]).toMatch(/^ref\s+job\s+queue\s+status\s+depends on\s+if parent dead\s+error$/);
    expect(lines[3]).toMatch(
      new RegExp(`^extract\\s+${ids.extract}\\s+etl\\s+dead\\s+block\\s+SOURCE_DOWN$`),
    );
    expect(lines[4]).toMatch(new RegExp(`^load\\s+${ids.load}\\s+etl\\s+blocked\\s+extract\\s+block$`));

    const json = JSON.parse((await cli(['flows', 'show', ids.extract as string, '--json', ...db])).stdout);
    expect(json.nodes).toEqual([
      expect.objectContaining({ ref: 'extract', id: ids.extract, status: 'dead', dependsOn: [] }),
      expect.objectContaining({ ref: 'load', id: ids.load, status: 'blocked', dependsOn: ['extract'] }),
    ]);

    const plain = await lh.enqueue('etl', {});
    const missing = await cli(['flows', 'show', plain.id, ...db]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/is in no flow/);
  });
});
