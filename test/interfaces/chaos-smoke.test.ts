import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { showOutputOnFailure } from '../support/child-output.js';
import { assertFreshDist } from '../support/fresh-dist.js';

// The smoke version of `npm run chaos` (chaos/main.mjs, on the built dist/): a small run with the
// faults that matter most, judged by the harness's own checker. It starts its own PostgreSQL (it
// must crash and restart it), whatever DATABASE_URL says.
const root = fileURLToPath(new URL('../..', import.meta.url));
const FAULTS = ['kill', 'pause', 'terminate', 'restart', 'sweeps'];

interface Invariant {
  name: string;
  value: unknown;
  ok: boolean;
}

interface ChaosResult {
  ok: boolean;
  invariants: Invariant[];
  facts: {
    jobs: { acked: number; succeeded: number };
    recovery: { expiries: number };
    refusals: { operation: string; n: number }[];
    faults: { kind: string; detail: Record<string, unknown> }[];
    pauses: { kind: string; in_flight: number; refused_after: number }[];
    effects: { counter_jobs: number; counter_total: number; counter_not_once: number };
  };
}

function runChaos(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['chaos/main.mjs', ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    let exitCode: number | null | undefined;
    showOutputOnFailure(`chaos/main.mjs ${args.join(' ')}`, () => ({ stdout: output, code: exitCode }));
    child.on('error', reject);
    child.on('close', (code) => {
      exitCode = code;
      resolve({ code, output });
    });
  });
}

describe('chaos smoke run', () => {
  // chaos/main.mjs runs the built package: refuse to test a build older than the sources.
  beforeAll(() => assertFreshDist());

  it('through kills, a pause past the lease, cut connections, a PostgreSQL crash and racing sweeps, every invariant holds and the faults really bit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-chaos-smoke-'));
    const jsonPath = join(dir, 'result.json');
    try {
      const { code, output } = await runChaos([
        ...['--jobs', '1500', '--duration-s', '25', '--workers', '3', '--concurrency', '8'],
        ...['--faults', FAULTS.join(','), '--gap-ms', '500', '--seed', '7', '--json', jsonPath],
      ]);
      const result = JSON.parse(readFileSync(jsonPath, 'utf8')) as ChaosResult;
      const broken = result.invariants.filter((rule) => !rule.ok);
      expect(broken, output).toEqual([]);
      expect(code, output).toBe(0);
      expect(result.ok).toBe(true);

      const { facts } = result;
      expect(facts.jobs.acked).toBe(1500);
      expect(facts.jobs.succeeded).toBe(1500);
      // The faults happened and did what they are for: leases lapsed and were recovered, and a
      // stale worker's late write reached the database and was refused there.
      for (const kind of FAULTS) expect(facts.faults.map((f) => f.kind)).toContain(kind);
      expect(facts.recovery.expiries).toBeGreaterThan(0);
      const refused = facts.refusals.reduce((sum, r) => sum + r.n, 0);
      expect(refused).toBeGreaterThan(0);
      // A claimer stopped inside a job and woken after its successor took over: its late
      // completion was refused (with a broken fence it would replace the successor's).
      const caught = facts.faults.filter(
        (f) => f.kind === 'pause' && f.detail.caught === 'a hand-completed job',
      );
      expect(caught.length).toBeGreaterThan(0);
      expect(facts.pauses.some((p) => p.kind === 'pause' && p.in_flight > 0 && p.refused_after > 0)).toBe(
        true,
      );
      // Handlers bumping a per-job counter in job.transaction: the total equals their number.
      expect(facts.effects.counter_jobs).toBeGreaterThan(0);
      expect(facts.effects.counter_total).toBe(facts.effects.counter_jobs);
      expect(facts.effects.counter_not_once).toBe(0);
      const restart = facts.faults.find((f) => f.kind === 'restart');
      expect(restart?.detail.listenersReconnectedMs).not.toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
