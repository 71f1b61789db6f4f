import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import shippedChromium from '@sparticuz/chromium';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Dashboard, type Leasehold, startDashboard } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

// Issue 33: the overview at fifty queues is one table (a sparkline each of the last hour's
// completions and oldest claimable age) and one chart, of the queue selected in the table, not a
// wall of charts. The history is written straight into metrics_rollup (the table the rollup pass
// fills, migration 017) so the shapes are known; the dashboard's own rollup is off so it keeps them.

const root = fileURLToPath(new URL('../..', import.meta.url));
const shotsDir = process.env.LEASEHOLD_SCREENSHOTS === 'docs' ? `${root}docs` : `${root}.tmp/screenshots`;

const AREAS = [
  'billing',
  'email',
  'search',
  'media',
  'reports',
  'sync',
  'webhooks',
  'exports',
  'auth',
  'ledger',
];
const KINDS = ['high', 'default', 'bulk', 'retry', 'nightly'];
const QUEUES = AREAS.flatMap((area) => KINDS.map((kind) => `${area}-${kind}`));

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
  lh = await migratedClient();
  // Each queue: some waiting jobs (so the gauges differ), and an hour of per-minute history whose
  // shape depends on its index: a wave of completions, and for every seventh queue a backlog whose
  // oldest claimable age climbs.
  for (const [i, queue] of QUEUES.entries()) {
    await lh.enqueueMany(
      queue,
      Array.from({ length: 1 + ((i * 7) % 23) }, (_, n) => ({ payload: { n } })),
    );
  }
  await sql().query(
    `INSERT INTO "${lh.schema}".metrics_rollup (queue_name, minute, completed, pending, running, near_expiry,
                                                oldest_claimable_ms)
     SELECT q.name, date_trunc('minute', now()) - m * interval '1 minute',
            round(q.i % 9 * 4 + (q.i % 9 * 3 + 2) * (1 + sin((m + q.i * 3) / 6.0)))::int,
            q.i % 23, q.i % 4, 0,
            CASE WHEN q.i % 7 = 3 THEN (60 - m) * 4000.0 ELSE (q.i % 5) * 300.0 + 200 * (1 + cos(m / 4.0)) END
     FROM unnest($1::text[]) WITH ORDINALITY AS q(name, i), generate_series(0, 59) AS m`,
    [QUEUES],
  );
  dashboard = await startDashboard(lh, { port: 0, rollupIntervalMs: 0 });
}, 120_000);

afterAll(async () => {
  await dashboard?.close();
  await browser?.close();
});

/** The seeded completions of `queue` over the last hour. */
async function completedInHour(queue: string): Promise<number> {
  const { rows } = await sql().query(
    `SELECT sum(completed)::int AS n FROM "${lh.schema}".metrics_rollup WHERE queue_name = $1`,
    [queue],
  );
  return rows[0].n;
}

describe('the overview at fifty queues', () => {
  it('is one table with a sparkline pair per queue and one chart, for the queue selected', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 }, locale: 'en-GB' });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => {
      if (/Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text());
    });
    await page.goto(`${dashboard.url}/`);
    await page.locator('body[data-ready]').waitFor();
    const rows = page.locator('#queues tbody tr');
    expect(await rows.count()).toBe(QUEUES.length);
    // Every row has its two sparklines, drawn from the last hour.
    expect(await page.locator('#queues svg[data-spark="throughput"]').count()).toBe(QUEUES.length);
    expect(await page.locator('#queues svg[data-spark="oldest"]').count()).toBe(QUEUES.length);
    for (const queue of ['billing-high', 'media-bulk', 'ledger-nightly']) {
      const spark = page.locator(`tr[data-queue="${queue}"] svg[data-spark="throughput"]`);
      expect([queue, Number(await spark.getAttribute('data-total'))]).toEqual([
        queue,
        await completedInHour(queue),
      ]);
      expect(await spark.getAttribute('data-points')).toBe('60');
    }
    // One chart on the page (uPlot draws one canvas per chart), of the first queue until another is chosen.
    expect(await page.locator('main canvas').count()).toBe(1);
    const first = await rows.first().getAttribute('data-queue');
    expect(await page.locator('#selected-chart').getAttribute('data-queue')).toBe(first);
    const backlog = QUEUES[2] as string; // index 3 in SQL's ordinality: the climbing backlog
    await page.getByRole('button', { name: `Chart ${backlog}` }).click();
    await expect.poll(() => page.locator('#selected-chart').getAttribute('data-queue')).toBe(backlog);
    const drawn = () =>
      page.evaluate(() => {
        const s = (
          globalThis as unknown as {
            leaseholdSelectedChart?: { queue: string; chart: { data: (number | null)[][] } };
          }
        ).leaseholdSelectedChart;
        if (!s) return null;
        const completed = s.chart.data[1]!.reduce<number>((a, v) => a + (v ?? 0), 0);
        const oldest = s.chart.data[2]!.filter((v): v is number => v !== null);
        return { queue: s.queue, completed, oldestMax: Math.max(...oldest) };
      });
    await expect
      .poll(drawn)
      .toEqual({ queue: backlog, completed: await completedInHour(backlog), oldestMax: 240 });
    expect(await page.locator('main canvas').count()).toBe(1);
    expect(await page.locator(`tr[data-queue="${backlog}"]`).getAttribute('data-selected')).toBe('true');
    expect(await page.getByRole('button', { name: `Chart ${backlog}` }).getAttribute('aria-pressed')).toBe(
      'true',
    );
    expect(await page.locator('#queues button.trend[aria-pressed="true"]').count()).toBe(1);
    await page.screenshot({ path: `${shotsDir}/dashboard-fifty-queues.png`, fullPage: true });
    // The 2 s refresh keeps the list's scroll position and a keyboard user's focus.
    const list = page.locator('.queue-list');
    await page.getByRole('button', { name: 'Chart webhooks-retry' }).focus();
    const scrolled = await list.evaluate((box) => (box as unknown as { scrollTop: number }).scrollTop);
    expect(scrolled).toBeGreaterThan(0);
    const shown = Number(await page.locator('body').getAttribute('data-ready'));
    await expect
      .poll(async () => Number(await page.locator('body').getAttribute('data-ready')), { timeout: 10_000 })
      .toBeGreaterThan(shown);
    expect(await list.evaluate((box) => (box as unknown as { scrollTop: number }).scrollTop)).toBe(scrolled);
    expect(
      await page.evaluate(() =>
        (
          globalThis as unknown as {
            document: { activeElement: { getAttribute(n: string): string | null } | null };
          }
        ).document.activeElement?.getAttribute('aria-label'),
      ),
    ).toBe('Chart webhooks-retry');
    // The name filter narrows the table and survives the page's 2 s refresh.
    await page.getByLabel('Filter queues').fill('ledger-');
    await expect.poll(() => rows.count()).toBe(KINDS.length);
    const renders = Number(await page.locator('body').getAttribute('data-ready'));
    await expect
      .poll(async () => Number(await page.locator('body').getAttribute('data-ready')), { timeout: 10_000 })
      .toBeGreaterThan(renders);
    expect(await rows.count()).toBe(KINDS.length);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
