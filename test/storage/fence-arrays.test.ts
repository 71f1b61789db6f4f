import { describe, expect, it } from 'vitest';
import { bigintArrayLiteral, fenceArrays, textArrayLiteral } from '../../src/storage/fence.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// The fenced statements take their batch as array literals built by fence.ts (not by node-postgres):
// whatever an owner or queue name holds must reach the server as the same text, and an id that is
// not a decimal integer must never be read as more than one element.

const HOSTILE_TEXT = [
  'plain',
  'with,comma',
  'with "double" quotes',
  'back\\slash\\',
  '{braces}',
  'NULL',
  ' spaced ',
  '',
  "it's",
  'ünïcødé ✓',
  'new\nline',
];

describe('fence array literals', () => {
  it('send every text value as itself, whatever it holds, and null as NULL', async () => {
    const pool = testPool();
    const values = [...HOSTILE_TEXT, 'plain', 'plain'];
    const { rows } = await pool.query<{ v: string[] }>('SELECT $1::text[] AS v', [textArrayLiteral(values)]);
    expect(rows[0]?.v).toEqual(values);
    const withNull = await pool.query<{ v: (string | null)[] }>('SELECT $1::text[] AS v', [
      textArrayLiteral(['a', null as unknown as string, 'b']),
    ]);
    expect(withNull.rows[0]?.v).toEqual(['a', null, 'b']);
  });

  it('send decimal ids (negative claim ids too) as one literal, and anything else as an array the server refuses', async () => {
    const pool = testPool();
    const ids = ['1', '42', '-9223372036854775808', '9223372036854775807'];
    const literal = bigintArrayLiteral(ids);
    expect(literal).toBe('{1,42,-9223372036854775808,9223372036854775807}');
    const { rows } = await pool.query<{ v: string[] }>('SELECT $1::bigint[]::text[] AS v', [literal]);
    expect(rows[0]?.v).toEqual(ids);

    // "1,2" is one bad id, not two ids: it goes as an array element, quoted, and is refused.
    const smuggled = bigintArrayLiteral(['1,2']);
    expect(smuggled).toEqual(['1,2']);
    await expect(pool.query('SELECT $1::bigint[] AS v', [smuggled])).rejects.toThrow(/invalid input syntax/);
  });

  it('split lease references into the five arrays of a fenced statement, in order', () => {
    const refs = [
      { jobId: '7', token: '3', claimId: '-5', owner: 'w "1"', queue: 'q' },
      { jobId: '8', token: '1', claimId: '6', owner: 'w "1"', queue: 'q' },
    ];
    expect(fenceArrays(refs)).toEqual(['{7,8}', '{3,1}', '{-5,6}', '{"w \\"1\\"","w \\"1\\""}', '{"q","q"}']);
  });

  it('a worker whose owner name holds quotes, commas, braces and backslashes completes its jobs through the fence', async () => {
    const lh = await migratedClient();
    const owner = 'w"o,r{k}e\\r NULL';
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await lh.enqueue('fence-arrays', { i })).id);
    const worker = lh.worker({ owner, queues: { 'fence-arrays': async () => {} }, pollIntervalMs: 20 });
    await started(worker);
    await waitFor(async () => {
      const jobs = await Promise.all(ids.map((id) => lh.getJob(id)));
      return jobs.every((job) => job?.status === 'succeeded');
    });
    expect(worker.counters).toMatchObject({ completed: 5, lost: 0 });
    const finished = await lh.pool.query<{ lease_owner: string }>(
      `SELECT DISTINCT lease_owner FROM ${lh.schema}.finished_jobs WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    expect(finished.rows).toEqual([{ lease_owner: owner }]);
  });
});
