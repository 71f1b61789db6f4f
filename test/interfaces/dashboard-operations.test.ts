import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import shippedChromium from '@sparticuz/chromium';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type Dashboard, defineTask, type Leasehold, startDashboard } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

// Issue 18's dashboard in a real browser (the Chromium of @sparticuz/chromium) against a real
// PostgreSQL: search by each filter, bulk replay of 5,000 dead jobs, pause/resume, enqueue with a
// task's schema, charts holding the rolled-up data, read-only mode, dark mode and a phone screen.

const root = fileURLToPath(new URL('../..', import.meta.url));
const shotsDir = process.env.LEASEHOLD_SCREENSHOTS === 'docs' ? `${root}docs` : `${root}.tmp/screenshots`;

const signup = defineTask('signup', {
  schema: z.object({ email: z.email() }),
  handler: async () => {},
});

/** The few browser globals the page-side callbacks use (the tests compile without the DOM library). */
interface Browserish {
  getComputedStyle(element: unknown): { backgroundColor: string };
  document: {
    documentElement: { scrollWidth: number };
    body: { dataset: Record<string, string | undefined> };
  };
}

let browser: Browser;
let dashboard: Dashboard;
let lh: Leasehold;
const sql = () => testPool(2);

beforeAll(async () => {
  mkdirSync(shotsDir, { recursive: true });
  browser = await chromium.launch({
    executablePath: await shippedChromium.executablePath(),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
    ],
  });
  lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
  dashboard = await startDashboard(lh, { port: 0, tasks: [signup] });
}, 60_000);

afterAll(async () => {
  await dashboard?.close();
  await browser?.close();
});

/** A page that records CSP violations, page errors and any request to another origin. */
async function open(path: string, options: Parameters<Browser['newPage']>[0] = {}, base = dashboard.url) {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 }, locale: 'en-GB', ...options });
  const problems: string[] = [];
  page.on('console', (m) => {
    if (/Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('request', (r) => {
    if (!r.url().startsWith(base)) problems.push(`external request ${r.url()}`);
  });
  await page.goto(`${base}${path}`);
  await page.locator('body[data-ready]').waitFor();
  return { page, problems };
}

async function resultIds(page: Page): Promise<string[]> {
  await page.locator('#results, #no-results').first().waitFor();
  return page
    .locator('#results tbody tr')
    .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job') ?? ''));
}

async function killOne(queue: string, code: string, orderingKey?: string): Promise<string> {
  const { id } = await lh.enqueue(queue, { q: queue }, orderingKey ? { orderingKey } : {});
  const [lease] = await lh.claim({ queue, owner: 'w' });
  await lh.fail(lease!, new Error('boom'), { code, retryable: false });
  return id;
}

describe('dashboard operations in a real browser', () => {
  it('finds jobs by each filter, from the form and from the address', async () => {
    const q = 'find-me';
    const done = (await lh.enqueue(q, { n: 1 })).id;
    const [lease] = await lh.claim({ queue: q, owner: 'w' });
    await lh.complete(lease!);
    const dead = await killOne(q, 'CARD_DECLINED', 'cust-9');
    const keyed = (await lh.enqueue(q, { n: 2 }, { idempotencyKey: 'order-1' })).id;
    const waiting = (await lh.enqueue(q, { n: 3 }, { orderingKey: 'cust-9' })).id;
    const other = (await lh.enqueue('elsewhere', { n: 4 })).id;
    const { page, problems } = await open('/search');
    // The form: one labelled control per filter; submitted with the keyboard.
    await page.getByLabel('Queue', { exact: true }).fill(q);
    await page.getByLabel('Status').selectOption('dead');
    await page.getByLabel('Queue', { exact: true }).press('Enter');
    await page.waitForURL(/status=dead/);
    expect(await resultIds(page)).toEqual([dead]);
    await page.screenshot({ path: `${shotsDir}/dashboard-search.png` });
    const by = async (query: string) => {
      await page.goto(`${dashboard.url}/search?${query}`);
      return resultIds(page);
    };
    expect(await by(`queue=${q}`)).toEqual([waiting, keyed, dead, done]);
    expect(await by(`id=${other}`)).toEqual([other]);
    expect(await by(`queue=${q}&status=succeeded`)).toEqual([done]);
    expect(await by(`queue=${q}&status=blocked`)).toEqual([waiting]);
    expect(await by(`queue=${q}&status=pending`)).toEqual([keyed]);
    expect(await by('task=signup')).toEqual([]);
    expect(await by('idempotencyKey=order-1')).toEqual([keyed]);
    expect(await by('orderingKey=cust-9')).toEqual([waiting, dead]);
    expect(await by('errorCode=CARD_DECLINED')).toEqual([dead]);
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    expect(await by(`queue=${q}&createdFrom=${hourAgo}`)).toEqual([waiting, keyed, dead, done]);
    expect(await by(`queue=${q}&createdTo=${hourAgo}`)).toEqual([]);
    expect(await by(`queue=${q}&finishedFrom=${hourAgo}`)).toEqual([dead, done]);
    expect(await by(`queue=${q}&finishedTo=${hourAgo}`)).toEqual([]);
    await page.goto(`${dashboard.url}/search?queue=${q}&payload=secret`);
    expect(await page.locator('#search-error').textContent()).toContain('has not opted in');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('replays 5,000 dead jobs by filter: preview count, confirmation naming it, progress, history', async () => {
    const q = 'bulk-5k';
    // Seeded in SQL (5,000 deaths through the API would take longer than the test is worth):
    // 5,000 dead with TIMEOUT, 25 dead with another code that the filter must leave alone.
    await sql().query(
      `INSERT INTO "${lh.schema}".jobs (queue_name, payload, status, attempt_count, max_attempts,
                                        last_error_code, finished_at)
       SELECT $1, jsonb_build_object('n', n), 'dead', 1, 1, CASE WHEN n <= 5000 THEN 'TIMEOUT' ELSE 'OTHER' END, now()
       FROM generate_series(1, 5025) AS n`,
      [q],
    );
    const { page, problems } = await open(`/search?queue=${q}&status=dead&errorCode=TIMEOUT`);
    await page.getByLabel('Action').selectOption('replay');
    await page.getByLabel('Reason', { exact: true }).fill('gateway fixed');
    await page.locator('#bulk-preview').click();
    const count = page.locator('#bulk-count');
    await count.waitFor();
    expect(await count.getAttribute('data-count')).toBe('5000');
    expect(await page.locator('#bulk-confirm').textContent()).toBe('Replay 5000 jobs');
    await page.screenshot({ path: `${shotsDir}/dashboard-bulk-confirm.png` });
    await page.locator('#bulk-confirm').click();
    const done = page.locator('#bulk-done');
    await done.waitFor({ timeout: 30_000 });
    expect(await done.getAttribute('data-done')).toBe('5000');
    expect(await done.getAttribute('data-state')).toBe('finished');
    expect(
      await page
        .locator('#bulk-progress')
        .evaluate((p) => [(p as unknown as { value: number }).value, (p as unknown as { max: number }).max]),
    ).toEqual([5000, 5000]);
    const { rows } = await sql().query<{ status: string; code: string; n: number; replays: number }>(
      `SELECT j.status::text, j.last_error_code AS code, count(*)::int AS n,
              count(e.id)::int AS replays
       FROM "${lh.schema}".jobs AS j
       LEFT JOIN "${lh.schema}".job_events AS e
         ON e.job_id = j.id AND e.kind = 'replayed' AND e.actor = 'dashboard' AND e.reason = 'gateway fixed'
       WHERE j.queue_name = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
      [q],
    );
    expect(rows).toEqual(
      [
        { status: 'pending', code: 'TIMEOUT', n: 5000, replays: 5000 },
        { status: 'dead', code: 'OTHER', n: 25, replays: 0 },
      ].sort((a, b) => a.status.localeCompare(b.status)),
    );
    const log = await sql().query(
      `SELECT action, matched, done, state, actor FROM "${lh.schema}".bulk_actions WHERE filter->>'queue' = $1`,
      [q],
    );
    expect(log.rows).toEqual([
      { action: 'replay', matched: 5000, done: 5000, state: 'finished', actor: 'dashboard' },
    ]);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);

  it('pauses and resumes a queue from the overview', async () => {
    await lh.enqueue('pausable', {});
    const { page } = await open('/');
    const row = page.locator('tr[data-queue="pausable"]');
    await page.getByRole('button', { name: 'Pause pausable' }).click();
    await expect.poll(() => row.getAttribute('class')).toBe('paused');
    const paused = async () =>
      (await sql().query(`SELECT paused FROM "${lh.schema}".queues WHERE name = 'pausable'`)).rows[0]?.paused;
    expect(await paused()).toBe(true);
    await page.getByRole('button', { name: 'Resume pausable' }).click();
    await expect.poll(() => row.getAttribute('class')).toBe('');
    expect(await paused()).toBe(false);
    await page.close();
  });

  it('schedules (pause/resume, their jobs), throttled time, a flow graph, the schedule and result of a job', async () => {
    // A schedule that fired once, a rate-limited queue that refused claims, a flow whose first job
    // ran (returning a result): b is released, c waits for b.
    await lh.schedule('nightly-report', { cron: '* * * * * *', queue: 'sched-q', payload: { secret: 's3' } });
    await sql().query(
      `UPDATE "${lh.schema}".schedules SET fire_after = now() - interval '1 second' WHERE name = 'nightly-report'`,
    );
    // One tick, or two when the clock passed a second between the update and the pass (a
    // per-second schedule due a second ago): the newest is the schedule's last job.
    const ticks = (await lh.runSchedules()).fired
      .filter((f) => f.schedule === 'nightly-report')
      .sort((a, b) => b.tickAt.getTime() - a.tickAt.getTime());
    expect(ticks.length === 1 || ticks.length === 2).toBe(true);
    const tick = ticks[0]!;
    await lh.configureQueue('limited', { rateLimit: { max: 1, perMs: 60_000 } });
    await lh.enqueueMany('limited', [{ payload: 1 }, { payload: 2 }]);
    for (let i = 0; i < 3; i++) await lh.claim({ queue: 'limited', owner: 'w', limit: 2 });
    const throttledClaims = (await lh.stats()).queues.find((q) => q.queue === 'limited')?.throttle
      ?.throttledClaims;
    expect(throttledClaims).toBeGreaterThan(0);
    const flow = await lh.enqueueFlow([
      { ref: 'extract', queue: 'flow-q', payload: {} },
      { ref: 'transform', queue: 'flow-q', payload: {}, dependsOn: ['extract'] },
      { ref: 'load', queue: 'flow-q', payload: {}, dependsOn: ['extract', 'transform'] },
    ]);
    const { extract, transform, load } = flow.ids as Record<string, string>;
    await lh.runUntilIdle({ queues: { 'flow-q': async () => ({ rows: 3 }) }, maxJobs: 1 });

    const { page, problems } = await open('/');
    const row = page.locator('#schedules tr[data-schedule="nightly-report"]');
    await row.waitFor();
    expect(await row.locator('[data-field=last-job] a').textContent()).toBe(tick.jobId);
    expect(await page.locator('main').textContent()).not.toContain('s3');
    expect(await page.locator('tr[data-queue="limited"] [data-field=throttled]').textContent()).toMatch(
      new RegExp(`^(now, )?\\d+\\.\\d s in ${throttledClaims} claims$`),
    );
    const paused = async () =>
      (await sql().query(`SELECT paused FROM "${lh.schema}".schedules WHERE name = 'nightly-report'`)).rows[0]
        ?.paused;
    await page.getByRole('button', { name: 'Pause schedule nightly-report' }).click();
    await expect.poll(() => row.getAttribute('class')).toBe('paused');
    expect(await paused()).toBe(true);
    expect(await row.locator('[data-field=state]').textContent()).toBe('paused');
    await page.getByRole('button', { name: 'Resume schedule nightly-report' }).click();
    await expect.poll(() => row.getAttribute('class')).toBe('');
    expect(await paused()).toBe(false);
    await expect.poll(() => page.locator('#operator-actions tbody tr').count()).toBeGreaterThanOrEqual(2);
    expect(
      await page.locator('#operator-actions tr[data-target="schedule:nightly-report"]').first().textContent(),
    ).toContain('resume');
    // The schedule's name opens its jobs (the schedule filter); its job names the schedule and tick.
    await row.locator('th a').click();
    await page.waitForURL(/schedule=nightly-report/);
    expect(await resultIds(page)).toEqual(ticks.map((t) => t.jobId));
    await page.goto(`${dashboard.url}/jobs/${tick.jobId}`);
    expect(await page.locator('[data-field="scheduled by"]').textContent()).toBe(
      `nightly-report (tick ${tick.tickAt.toISOString()})`,
    );

    // The flow filter, and blocked: a flow child waiting for its parents.
    await page.goto(`${dashboard.url}/search?flow=${flow.flowId}`);
    expect(await resultIds(page)).toEqual([load, transform, extract]);
    await page.goto(`${dashboard.url}/search?queue=flow-q&status=blocked`);
    expect(await resultIds(page)).toEqual([load]);

    // The job page draws the flow: one column per depth, each node with its status.
    await page.goto(`${dashboard.url}/jobs/${transform}`);
    const graph = page.locator('#flow-graph');
    await graph.waitFor();
    const columns = await graph
      .locator('.flow-column')
      .evaluateAll((cols) =>
        cols.map((c) =>
          [...c.querySelectorAll('.flow-node')].map(
            (n) => `${n.getAttribute('data-ref')}:${n.getAttribute('data-status')}`,
          ),
        ),
      );
    expect(columns).toEqual([['extract:succeeded'], ['transform:pending'], ['load:waiting']]);
    expect(await graph.locator('[aria-current=page]').getAttribute('data-ref')).toBe('transform');
    expect(await page.locator('#flow tbody tr[data-ref="load"] td').nth(2).textContent()).toBe(
      'extract, transform',
    );
    await page.screenshot({ path: `${shotsDir}/dashboard-job-flow.png`, fullPage: true });
    // A result is shown only with the payload, on request.
    await page.goto(`${dashboard.url}/jobs/${extract}`);
    await page.locator('button#show-payload').waitFor();
    expect(await page.locator('#result').count()).toBe(0);
    await page.locator('button#show-payload').click();
    await page.locator('#result').waitFor();
    expect(JSON.parse((await page.locator('#result').textContent()) ?? '')).toEqual({ rows: 3 });
    expect(problems).toEqual([]);
    await page.close();
  });

  it("enqueues from the form; a task's schema refuses a bad payload and writes nothing", async () => {
    const { page, problems } = await open('/enqueue');
    const count = async () =>
      (await sql().query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE queue_name = 'signup'`))
        .rows[0].n as number;
    await page.getByLabel('Queue or task').fill('signup');
    await page.getByLabel('Payload (JSON)').fill('{"email": "not an address"}');
    await page.getByRole('button', { name: 'Enqueue' }).click();
    const error = page.locator('#enqueue-error');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/signup.*email/i);
    expect(await page.getByLabel('Payload (JSON)').getAttribute('aria-invalid')).toBe('true');
    expect(await count()).toBe(0);
    await page.getByLabel('Payload (JSON)').fill('{"email": "ada@example.com"}');
    await page.getByRole('button', { name: 'Enqueue' }).click();
    await page.locator('#enqueue-done').waitFor();
    const id = await page.locator('#enqueue-done a').textContent();
    expect(await count()).toBe(1);
    expect((await lh.getJob(id!))?.payload).toEqual({ email: 'ada@example.com' });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('draws each queue’s health from the rollup: the charts hold the completions and failures', async () => {
    const q = 'charted';
    await lh.enqueueMany(
      q,
      Array.from({ length: 7 }, (_, n) => ({ payload: { n } })),
    );
    for (const lease of await lh.claim({ queue: q, owner: 'w', limit: 7 })) await lh.complete(lease);
    await lh.enqueueMany(q, [
      { payload: {}, maxAttempts: 3 },
      { payload: {}, maxAttempts: 3 },
    ]);
    for (const lease of await lh.claim({ queue: q, owner: 'w', limit: 2 })) {
      await lh.fail(lease, new Error('slow'), { code: 'UPSTREAM_SLOW', retryable: true });
    }
    await killOne(q, 'BROKEN');
    // A dashboard started now rolls the last hour up at once.
    const fresh = await startDashboard(lh, { port: 0 });
    try {
      // The overview: the queue's row holds its last hour as sparklines, and selecting it draws
      // its completions and oldest claimable age in the one chart.
      const overview = await open('/', {}, fresh.url);
      const row = overview.page.locator(`tr[data-queue="${q}"]`);
      await expect
        .poll(() => row.locator('svg[data-spark="throughput"]').getAttribute('data-total'), {
          timeout: 15_000,
        })
        .toBe('7');
      expect(await row.locator('svg[data-spark="oldest"]').count()).toBe(1);
      await overview.page.getByRole('button', { name: `Chart ${q}` }).click();
      await expect.poll(() => row.getAttribute('data-selected')).toBe('true');
      const selected = () =>
        overview.page.evaluate(() => {
          const s = (
            globalThis as unknown as {
              leaseholdSelectedChart?: { queue: string; chart: { data: number[][] } };
            }
          ).leaseholdSelectedChart;
          return s ? { queue: s.queue, completed: s.chart.data[1]!.reduce((a, v) => a + (v ?? 0), 0) } : null;
        });
      await expect.poll(selected).toEqual({ queue: q, completed: 7 });
      expect(overview.problems).toEqual([]);
      await overview.page.close();
      // The queue's own page: its four charts.
      const { page, problems } = await open(`/queues/${q}`, {}, fresh.url);
      const sums = () =>
        page.evaluate((queue) => {
          const charts = (
            globalThis as unknown as { leaseholdCharts: Record<string, Record<string, { data: number[][] }>> }
          ).leaseholdCharts[queue];
          if (!charts) return null;
          const sum = (values: (number | null)[]) => values.reduce<number>((a, v) => a + (v ?? 0), 0);
          return {
            completed: sum(charts.throughput!.data[1]!),
            retried: sum(charts.failures!.data[1]!),
            dead: sum(charts.failures!.data[2]!),
            points: charts.throughput!.data[0]!.length,
            running: charts.leases!.data[1]!.filter((v) => v !== null).length,
          };
        }, q);
      await expect
        .poll(sums, { timeout: 15_000 })
        .toMatchObject({ completed: 7, retried: 2, dead: 1, points: 60 });
      expect((await sums())!.running).toBeGreaterThanOrEqual(1); // the gauge sampled this minute
      expect(await page.locator(`[data-chart-queue="${q}"] .codes`).textContent()).toContain(
        'UPSTREAM_SLOW 2',
      );
      expect(await page.locator(`[data-chart-queue="${q}"] canvas`).count()).toBe(4);
      await page.screenshot({ path: `${shotsDir}/dashboard-queue.png`, fullPage: true });
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await fresh.close();
    }
  });

  it('shows the timeline of one job, in dark mode and on a phone-sized screen', async () => {
    const id = await killOne('timeline', 'E1');
    await lh.replay([id], { reason: 'try again', actor: 'ops' });
    const [lease] = await lh.claim({ queue: 'timeline', owner: 'w2' });
    await lh.fail(lease!, new Error('again'), { code: 'E2', retryable: false });
    const { page } = await open(`/jobs/${id}`, { colorScheme: 'dark' });
    const kinds = await page
      .locator('#history tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-kind')));
    expect(kinds).toEqual(['enqueued', 'claimed', 'dead', 'replayed', 'claimed', 'dead']);
    expect(
      await page
        .locator('body')
        .evaluate((b) => (globalThis as unknown as Browserish).getComputedStyle(b).backgroundColor),
    ).toBe('rgb(20, 24, 28)');
    await page.screenshot({ path: `${shotsDir}/dashboard-job-dark.png`, fullPage: true });
    await page.close();
    const phone = await open('/', { viewport: { width: 390, height: 844 }, isMobile: true });
    await phone.page.locator('#queues').waitFor();
    // Nothing wider than the screen: tables scroll inside their own box.
    expect(
      await phone.page.evaluate(
        () => (globalThis as unknown as Browserish).document.documentElement.scrollWidth,
      ),
    ).toBeLessThanOrEqual(390);
    await phone.page.screenshot({ path: `${shotsDir}/dashboard-phone.png` });
    await phone.page.close();
  });

  it('read-only mode: a viewer sees every page, and every action is refused (403)', async () => {
    const guarded = await startDashboard(lh, {
      port: 0,
      token: 'operator-secret',
      viewerToken: 'viewer-secret',
      rollupIntervalMs: 0,
    });
    try {
      const { id } = await lh.enqueue('watched', {});
      const { page } = await open(`/jobs/${id}?token=viewer-secret`, {}, guarded.url);
      expect(await page.locator('#role').textContent()).toBe('read-only');
      expect(await page.locator('button.cancel').isDisabled()).toBe(true);
      const answers = await page.evaluate(async (jobId) => {
        const csrf = (globalThis as unknown as Browserish).document.body.dataset.csrf as string;
        const post = (path: string, body: unknown) =>
          fetch(path, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', 'X-Leasehold-Csrf': csrf },
            body: JSON.stringify(body),
          }).then((r) => r.status);
        return [
          await post(`/api/jobs/${jobId}/cancel`, { reason: 'x' }),
          await post('/api/queues/watched/pause', {}),
          await post('/api/enqueue', { queue: 'watched', payload: '{}' }),
          await post('/api/bulk', { action: 'cancel', filter: { queue: 'watched' }, expectedCount: 1 }),
          await fetch('/api/search?queue=watched').then((r) => r.status),
        ];
      }, id);
      expect(answers).toEqual([403, 403, 403, 403, 200]);
      expect((await lh.getJob(id))?.status).toBe('pending');
      const settings = await sql().query(`SELECT paused FROM "${lh.schema}".queues WHERE name = 'watched'`);
      expect(settings.rows).toEqual([]);
      await page.close();
      await expect(startDashboard(lh, { port: 0, viewerToken: 'v' })).rejects.toThrow(/viewerToken/);
    } finally {
      await guarded.close();
    }
  });
});
