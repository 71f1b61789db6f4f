import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/embedded.js';
import { type CliProcessResult, usePrivateCli } from '../support/cli-build.js';
import { databaseUrl, migratedClient, testPool, waitFor } from '../support/db.js';
import { claimableSince } from '../support/job-states.js';

// The CLI runs from a private build (see support/cli-build.ts).
const cli = usePrivateCli('obs-cli-test');

type Finished = CliProcessResult;

function startCli(args: string[]) {
  return cli.start(args);
}

function runCli(args: string[]): Promise<Finished> {
  return startCli(args).exited;
}

describe('leasehold check', () => {
  it('exits 0 with "ok" when every rule passes, and 1 with one line per failed rule', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const conn = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const passing = await runCli(['check', '--max-oldest-age', '5m', '--max-dead', '0', ...conn]);
    expect(passing).toMatchObject({ code: 0, stdout: 'ok\n' });

    await lh.enqueue('late', {});
    await claimableSince(pool, lh.schema, 600_000);
    await lh.enqueue('broken', {});
    const [lease] = await lh.claim({ queue: 'broken', owner: 'w' });
    await lh.fail(lease!, new Error('no'), { code: 'NO', retryable: false });

    const failing = await runCli(['check', '--max-oldest-age', '5m', '--max-dead', '0', ...conn]);
    expect(failing.code).toBe(1);
    const lines = failing.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    // Queue by queue, in name order.
    expect(lines[0]).toBe('FAIL maxDead: queue broken: 1 dead jobs (limit 0)');
    expect(lines[1]).toMatch(/^FAIL maxOldestAgeMs: queue late: oldest claimable job has waited 10m/);

    const json = await runCli(['check', '--max-dead', '0', '--json', ...conn]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: false,
      failures: [{ rule: 'maxDead', message: 'queue broken: 1 dead jobs (limit 0)' }],
    });
  }, 60_000);

  it('refuses to run without a rule, in one line', async () => {
    const lh = await migratedClient();
    const result = await runCli(['check', '--database-url', databaseUrl(), '--schema', lh.schema]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      'leasehold: give at least one rule, e.g. --max-oldest-age 5m or --max-dead 0',
    );
  });
});

describe('leasehold metrics', () => {
  it('serves the database gauges at /metrics until interrupted', async () => {
    const lh = await migratedClient();
    await lh.enqueueMany('scraped', [{ payload: 1 }, { payload: 2 }]);
    const port = await freePort();
    const run = startCli([
      'metrics',
      '--port',
      String(port),
      '--database-url',
      databaseUrl(),
      '--schema',
      lh.schema,
    ]);
    await waitFor(() => run.stderr().includes('serving metrics at'), { what: 'the metrics server' });
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('leasehold_queue_pending_jobs{queue="scraped"} 2');
    expect(text).toContain('leasehold_queue_dead_jobs{queue="scraped"} 0');
    expect(text).toMatch(/leasehold_queue_oldest_claimable_age_seconds\{queue="scraped"\} \d/);
    expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
  });
});

describe('leasehold dashboard', () => {
  it('serves the dashboard on loopback, and refuses another host without a token', async () => {
    const lh = await migratedClient();
    await lh.enqueue('shown', {});
    const conn = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const refused = await runCli([
      'dashboard',
      '--host',
      '0.0.0.0',
      '--port',
      String(await freePort()),
      ...conn,
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/must require a token \(--token\)/);

    const port = await freePort();
    const run = startCli(['dashboard', '--port', String(port), ...conn]);
    await waitFor(() => run.stderr().includes('dashboard at'), { what: 'the dashboard' });
    // A fresh token by default (another user of the machine reaches loopback too), shown once.
    const shown = new RegExp(
      `dashboard at http://127\\.0\\.0\\.1:${port}/\\?token=([A-Za-z0-9_-]{32})\n`,
    ).exec(run.stderr());
    expect(shown, run.stderr()).not.toBeNull();
    const token = (shown as RegExpExecArray)[1] as string;
    expect((await fetch(`http://127.0.0.1:${port}/api/overview`)).status).toBe(401);
    const overview = (await (
      await fetch(`http://127.0.0.1:${port}/api/overview`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { queues: unknown[] };
    expect(overview.queues).toEqual([expect.objectContaining({ queue: 'shown', pending: 1 })]);
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
  });

  it('serves loopback without a token only when told --no-token, and never another host so', async () => {
    const lh = await migratedClient();
    const conn = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const refused = await runCli(['dashboard', '--no-token', '--host', '0.0.0.0', ...conn]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/must require a token \(--token\)/);
    const port = await freePort();
    const run = startCli(['dashboard', '--no-token', '--port', String(port), ...conn]);
    await waitFor(() => run.stderr().includes('dashboard at'), { what: 'the dashboard' });
    expect(run.stderr()).toContain(`dashboard at http://127.0.0.1:${port}/\n`);
    expect((await fetch(`http://127.0.0.1:${port}/api/overview`)).status).toBe(200);
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
  });
});

describe('leasehold metrics on loopback', () => {
  it('refuses a Host it was not started for (a rebound name), and serves its own', async () => {
    const lh = await migratedClient();
    const port = await freePort();
    const run = startCli([
      'metrics',
      '--port',
      String(port),
      '--database-url',
      databaseUrl(),
      '--schema',
      lh.schema,
    ]);
    await waitFor(() => run.stderr().includes('serving metrics at'), { what: 'the metrics server' });
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port, path: '/metrics', headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await status(`evil.example:${port}`)).toBe(421);
    expect(await status(`localhost:${port}`)).toBe(200);
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
  });
});

describe('leasehold metrics off loopback', () => {
  it('refuses to start on another address without a token, and wants the bearer token there', async () => {
    const lh = await migratedClient();
    const conn = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const refused = await runCli([
      'metrics',
      '--host',
      '0.0.0.0',
      '--port',
      String(await freePort()),
      ...conn,
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/must require a token \(--token\)/);
    const port = await freePort();
    const run = startCli([
      'metrics',
      '--host',
      '0.0.0.0',
      '--port',
      String(port),
      '--token',
      'scrape-secret',
      ...conn,
    ]);
    await waitFor(() => run.stderr().includes('serving metrics at'), { what: 'the metrics server' });
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(401);
    const wrong = await fetch(`http://127.0.0.1:${port}/metrics`, {
      headers: { authorization: 'Bearer nope' },
    });
    expect(wrong.status).toBe(401);
    const scraped = await fetch(`http://127.0.0.1:${port}/metrics`, {
      headers: { authorization: 'Bearer scrape-secret' },
    });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('leasehold_queue_pending_jobs');
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
  });
});
