import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import shippedChromium from '@sparticuz/chromium';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Dashboard, type Leasehold, startDashboard } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// The Chromium build shipped inside the @sparticuz/chromium npm package (a dev dependency, unpacked
// to the temporary folder on first use), so `npm test` needs no system browser. If it cannot be
// unpacked or launched, this file fails: a browser test that quietly skips proves nothing.
const root = fileURLToPath(new URL('../..', import.meta.url));
// Screenshots go to .tmp/ on every run, and to docs/ (for the README) with LEASEHOLD_SCREENSHOTS=docs.
const shotsDir = process.env.LEASEHOLD_SCREENSHOTS === 'docs' ? `${root}docs` : `${root}.tmp/screenshots`;

let browser: Browser | null = null;
let dashboard: Dashboard | null = null;
let lh: Leasehold;

beforeAll(async () => {
  mkdirSync(shotsDir, { recursive: true });
  browser = await chromium.launch({
    executablePath: await shippedChromium.executablePath(),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
  dashboard = await startDashboard(lh, { port: 0 });
}, 60_000);

afterAll(async () => {
  await dashboard?.close();
  await browser?.close();
});

/** Per-queue counts straight from the tables, to compare with what the page shows. */
async function countsOf(queue: string): Promise<{ pending: number; running: number; dead: number }> {
  const { rows } = await testPool(1).query<{ pending: number; running: number; dead: number }>(
    `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
            count(*) FILTER (WHERE status = 'running')::int AS running,
            count(*) FILTER (WHERE status = 'dead')::int AS dead
     FROM "${lh.schema}".jobs WHERE queue_name = $1`,
    [queue],
  );
  return rows[0] as { pending: number; running: number; dead: number };
}

describe('dashboard in a real browser (chromium)', () => {
  it('lists ordering keys blocked by a dead head, with how many jobs wait and a link to the head', async () => {
    await lh.enqueueMany('ledger', [
      { payload: { n: 1 }, orderingKey: 'acct-7' },
      { payload: { n: 2 }, orderingKey: 'acct-7' },
      { payload: { n: 3 }, orderingKey: 'acct-7' },
    ]);
    const [head] = await lh.claim({ queue: 'ledger', owner: 'w' });
    await lh.fail(head!, new Error('bad entry'), { code: 'BAD_ENTRY', retryable: false });
    const page = await browser!.newPage({ viewport: { width: 1200, height: 700 } });
    try {
      await page.goto(`${dashboard!.url}/`);
      const row = page.locator('#blocked tr[data-key="acct-7"]');
      await row.waitFor();
      const cells = await row.locator('td').allTextContents();
      expect([cells[0], cells[1], cells[2], cells[4], cells[5]]).toEqual([
        'ledger',
        'acct-7',
        head!.jobId,
        '2',
        'BAD_ENTRY',
      ]);
      expect(await row.locator('a').getAttribute('href')).toBe(`/jobs/${head!.jobId}`);
    } finally {
      await page.close();
    }
  });

  it('shows queue numbers that match the database, opens a dead job, replays it and sees it run', async () => {
    // reports: 3 pending, 1 running. mail: 1 dead job whose handler fails once, then succeeds.
    await lh.enqueueMany('reports', [
      { payload: { r: 1 } },
      { payload: { r: 2 } },
      { payload: { r: 3 } },
      { payload: { r: 4 } },
    ]);
    await lh.claim({ queue: 'reports', owner: 'elsewhere', leaseMs: 600_000 });
    const secret = '<script>alert("x")</script>'.repeat(200);
    const { id } = await lh.enqueue('mail', { to: 'a@example.com', note: secret });
    const [lease] = await lh.claim({ queue: 'mail', owner: 'w' });
    await lh.fail(lease!, new Error('mailbox full'), { code: 'MAILBOX_FULL', retryable: false });
    await lh.pauseQueue('paused-queue', { create: true }); // a queue with no job yet

    const page = await browser!.newPage({ viewport: { width: 1200, height: 700 } });
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await page.goto(`${dashboard!.url}/`);
    const reportsRow = page.locator('tr[data-queue="reports"]');
    await reportsRow.waitFor();
    const expected = await countsOf('reports');
    expect(expected).toEqual({ pending: 3, running: 1, dead: 0 });
    expect(await reportsRow.locator('[data-field=pending]').textContent()).toBe(String(expected.pending));
    expect(await reportsRow.locator('[data-field=running]').textContent()).toBe(String(expected.running));
    expect(await reportsRow.locator('[data-field=dead]').textContent()).toBe(String(expected.dead));
    const mailRow = page.locator('tr[data-queue="mail"]');
    expect(await mailRow.locator('[data-field=dead]').textContent()).toBe('1');
    await expect
      .poll(() => page.locator('tr[data-queue="paused-queue"]').getAttribute('class'))
      .toBe('paused');
    // The chart fills in as the page polls: wait for a second sample (the page's own 2 s poll).
    await expect
      .poll(async () => Number(await page.locator('body').getAttribute('data-ready')), { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    await page.screenshot({ path: `${shotsDir}/dashboard-overview.png`, fullPage: true });

    await page.goto(`${dashboard!.url}/dead?queue=mail`);
    const deadRow = page.locator(`tr[data-job="${id}"]`);
    await deadRow.waitFor();
    expect(await deadRow.textContent()).toContain('MAILBOX_FULL');
    // Nothing stray under the table (an optional part passed as null once printed "null").
    expect(await page.locator('main').textContent()).not.toContain('null');
    await page.screenshot({ path: `${shotsDir}/dashboard-dead.png`, fullPage: true });

    await deadRow.locator('a').click();
    await page.waitForURL(`**/jobs/${id}`);
    // The payload is hidden until asked for, as with the CLI.
    await page.locator('button#show-payload').click();
    await page.locator('#payload').waitFor();
    expect(await page.locator('[data-field=status]').textContent()).toBe('dead');
    // The payload is shown as text (escaped), truncated, and only here.
    const payloadText = (await page.locator('#payload').textContent()) ?? '';
    expect(payloadText.length).toBeLessThanOrEqual(2000);
    expect(payloadText).toContain('<script>alert');
    expect(await page.locator('h2', { hasText: 'Payload (truncated)' }).count()).toBe(1);
    expect(dialogs).toEqual([]);
    await page.screenshot({ path: `${shotsDir}/dashboard-job.png`, fullPage: true });

    // A worker runs in the test: the replayed job must be claimed and complete.
    const ran: string[] = [];
    const worker = lh.worker({
      queues: {
        mail: {
          handler: async (job) => {
            ran.push(job.id);
          },
        },
      },
    });
    await started(worker);
    // The job view re-renders every 2 s: the reason being typed keeps its text and the focus
    // across a re-render (a fresh input each time once took both from under the typing).
    await page.locator('#reason').click();
    await page.keyboard.type('mailbox emptied');
    const renders = Number(await page.locator('body').getAttribute('data-ready'));
    await expect
      .poll(async () => Number(await page.locator('body').getAttribute('data-ready')), { timeout: 10_000 })
      .toBeGreaterThan(renders);
    const focused = await page.evaluate(
      () =>
        (globalThis as unknown as { document: { activeElement: { id: string } | null } }).document
          .activeElement?.id,
    );
    expect(focused).toBe('reason');
    await page.keyboard.type(' by support');
    expect(await page.locator('#reason').inputValue()).toBe('mailbox emptied by support');
    await page.locator('button.replay').click();
    await waitFor(() => ran.includes(id), { what: 'the replayed job to run' });
    await expect
      .poll(() => page.locator('[data-field=status]').textContent(), { timeout: 10_000 })
      .toBe('succeeded');
    const job = await lh.getJob(id, { history: true });
    expect(job?.status).toBe('succeeded');
    expect(job?.history.find((e) => e.kind === 'replayed')).toMatchObject({
      actor: 'dashboard',
      reason: 'mailbox emptied by support',
    });
    // The replay shows its reason, and the error it had died with as that, not as its own error.
    const replayed = page.locator('#history tr[data-kind="replayed"]');
    expect(await replayed.textContent()).toContain(
      'had died with MAILBOX_FULL; reason: mailbox emptied by support',
    );
    // One timestamp format on the page: ISO 8601, UTC.
    for (const cell of await page.locator('#history tbody tr td:first-child').allTextContents()) {
      expect(cell).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    await page.screenshot({ path: `${shotsDir}/dashboard-job-replayed.png`, fullPage: true });
    await page.close();
  });

  it('cancels a pending job from its page, recorded with the actor; a dead job offers replay only', async () => {
    const { id } = await lh.enqueue('cancel-me', { n: 1 });
    const page = await browser!.newPage();
    await page.goto(`${dashboard!.url}/jobs/${id}`);
    await page.locator('button#show-payload').waitFor();
    expect(await page.locator('#payload').count()).toBe(0);
    expect(await page.locator('button.replay').count()).toBe(0);
    await page.locator('button.cancel').click();
    await expect.poll(() => page.locator('[data-field=status]').textContent()).toBe('cancelled');
    const job = await lh.getJob(id, { history: true });
    expect(job?.status).toBe('cancelled');
    expect(job?.history.at(-1)).toMatchObject({ kind: 'cancelled', actor: 'dashboard' });
    expect(await page.locator('button.cancel').count()).toBe(0);
    await page.close();
  });

  it('refuses a state-changing request without the page token or from another origin', async () => {
    const { id } = await lh.enqueue('csrf', {});
    const url = `${dashboard!.url}/api/jobs/${id}/cancel`;
    const body = JSON.stringify({ reason: 'x' });
    const bare = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    expect(bare.status).toBe(403);
    const html = await (await fetch(`${dashboard!.url}/`)).text();
    const token = /data-csrf="([^"]+)"/.exec(html)?.[1] as string;
    const foreign = await fetch(url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'X-Leasehold-Csrf': token,
        Origin: 'http://evil.example',
      },
      body,
    });
    expect(foreign.status).toBe(403);
    expect((await lh.getJob(id))?.status).toBe('pending');
    const own = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Leasehold-Csrf': token },
      body,
    });
    expect(own.status).toBe(200);
    expect((await lh.getJob(id))?.status).toBe('cancelled');
  });

  it('requires a token off loopback, and checks it on every request', async () => {
    await expect(startDashboard(lh, { port: 0, host: '0.0.0.0' })).rejects.toThrow(/token/);
    const guarded = await startDashboard(lh, { port: 0, token: 's3cret-token' });
    try {
      expect((await fetch(`${guarded.url}/api/overview`)).status).toBe(401);
      expect((await fetch(`${guarded.url}/?token=wrong`)).status).toBe(401);
      const page = await browser!.newPage();
      await page.goto(`${guarded.url}/?token=s3cret-token`);
      // The token is kept in a cookie: the page's own polling requests pass.
      await page.locator('#queues').waitFor();
      await page.close();
      const ok = await fetch(`${guarded.url}/api/overview`, {
        headers: { Authorization: 'Bearer s3cret-token' },
      });
      expect(ok.status).toBe(200);
    } finally {
      await guarded.close();
    }
  });
});
