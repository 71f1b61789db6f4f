// The high-availability rig (issue 31) at its smoke size: Leasehold under Patroni with etcd and
// under pg_auto_failover, three PostgreSQL nodes and two worker hosts in network namespaces, five
// automatic failovers in synchronous mode (the primary's node killed, its link cut, in turn; one
// worker host cut off from a new primary), judged by the chaos checker. Needs root and the Debian
// packages the rig installs itself (chaos/ha-packages.mjs); the system suite's setup refuses to
// start, saying what is missing, when they cannot be installed. Full runs: docs/reliability.md.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { watchOutput } from '../support/child-output.js';

const RIG = new URL('../../chaos/ha.mjs', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'leasehold-ha-smoke-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface HaRecord {
  kind: 'kill' | 'cut';
  old: string;
  promoted: string;
  killToFirstCompletionMs: number | null;
  rejoinMs: number | null;
  partition: { host: string } | null;
}

async function smoke(manager: string) {
  const json = join(dir, `${manager}.json`);
  const child = spawn(
    process.execPath,
    [RIG, '--manager', manager, '--mode', 'sync', '--smoke', '--json', json],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const { exited } = watchOutput(child, `chaos:ha ${manager} smoke`);
  const end = await exited;
  expect(end.code).toBe(0);
  return JSON.parse(readFileSync(json, 'utf8')) as {
    ok: boolean;
    invariants: { name: string; ok: boolean }[];
    records: HaRecord[];
    timeline: { enqueues: { lost: number }; acks: { completions_lost: number }; claims: { lost: number } };
  };
}

describe.each(['patroni', 'pg_auto_failover'])('chaos:ha --manager %s --mode sync --smoke', (manager) => {
  it(
    'fails over five times by itself; nothing acknowledged is lost, every invariant holds',
    async () => {
      const result = await smoke(manager);
      expect(result.invariants.filter((r) => !r.ok)).toEqual([]);
      expect(result.ok).toBe(true);
      expect(result.records).toHaveLength(5);
      expect(new Set(result.records.map((r) => r.kind))).toEqual(new Set(['kill', 'cut']));
      expect(result.records.filter((r) => r.partition?.host === 'w2')).toHaveLength(1);
      for (const r of result.records) {
        expect(r.promoted).not.toBe(r.old);
        expect(r.killToFirstCompletionMs).toBeGreaterThan(0);
        expect(r.rejoinMs).not.toBeNull();
      }
      expect(result.timeline.enqueues.lost).toBe(0);
      expect(result.timeline.acks.completions_lost).toBe(0);
      expect(result.timeline.claims.lost).toBe(0);
    },
    25 * 60_000,
  ); // a smoke run takes about 7 minutes on two busy cores
});
