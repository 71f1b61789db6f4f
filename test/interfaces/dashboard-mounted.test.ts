import shippedChromium from '@sparticuz/chromium';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DashboardRequestHandler, dashboardHandler, type Leasehold } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';
import {
  APP_REFUSAL,
  authorizeStaff,
  BASE,
  expressApp,
  fastifyApp,
  honoApp,
  type MountedApp,
  userOf,
} from '../support/mounted-apps.js';

// Issue 33: the dashboard mounted inside the apps users already run (Express, Fastify, Hono), under
// /admin/jobs behind the app's own login, in a real browser: a viewer sees and cannot act, an
// admin acts, an anonymous request gets the app's own refusal, nothing is reachable outside the
// base path, and the pages, assets and API all work from under it.

/** The few browser globals the page-side callbacks use (the tests compile without the DOM library). */
interface Browserish {
  document: { body: { dataset: Record<string, string | undefined> } };
}

let browser: Browser;
let lh: Leasehold;
const sql = () => testPool(2);

beforeAll(async () => {
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
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** A page of a fresh browser context logged in as `user`, recording CSP violations, errors and foreign requests. */
async function loggedIn(app: MountedApp, user: string) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 }, locale: 'en-GB' });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (/Content.Security.Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('request', (r) => {
    if (!r.url().startsWith(`${app.url}${BASE}/`) && !r.url().startsWith(`${app.url}/login`)) {
      problems.push(`request outside the base path: ${r.url()}`);
    }
  });
  await page.goto(`${app.url}/login?as=${user}`);
  return { page, problems, close: () => context.close() };
}

async function openView(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.locator('body[data-ready]').waitFor();
}

/** POSTs from inside the page, as its own script would (with the page's CSRF token): the statuses. */
function postFromPage(page: Page, paths: [string, unknown][]): Promise<number[]> {
  return page.evaluate(async (list) => {
    const body = (globalThis as unknown as Browserish).document.body;
    const statuses: number[] = [];
    for (const [path, value] of list) {
      const res = await fetch(path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Leasehold-Csrf': body.dataset.csrf as string },
        body: JSON.stringify(value),
      });
      statuses.push(res.status);
    }
    return statuses;
  }, paths);
}

async function queuePaused(queue: string): Promise<boolean | undefined> {
  const { rows } = await sql().query(`SELECT paused FROM "${lh.schema}".queues WHERE name = $1`, [queue]);
  return rows[0]?.paused;
}

describe.each([
  ['Express', expressApp],
  ['Fastify', fastifyApp],
  ['Hono', honoApp],
] as const)('the dashboard mounted in %s under /admin/jobs', (framework, start) => {
  const queue = `mounted-${framework.toLowerCase()}`;
  let handler: DashboardRequestHandler;
  let app: MountedApp;

  beforeAll(async () => {
    handler = dashboardHandler(lh, {
      basePath: BASE,
      authorize: async (req) => authorizeStaff(req),
      actor: (req) => `staff:${userOf(req)}`,
      rollupIntervalMs: 0,
    });
    app = await start(handler);
  });

  afterAll(async () => {
    await app?.close();
    await handler?.close();
  });

  it("an anonymous request gets the app's own refusal; a logged-in non-staff user gets 403", async () => {
    for (const path of [`${BASE}/`, `${BASE}`, `${BASE}/api/overview`, `${BASE}/assets/app.js`]) {
      const res = await fetch(`${app.url}${path}`);
      expect([path, res.status, await res.text()]).toEqual([path, 401, APP_REFUSAL]);
    }
    const { id } = await lh.enqueue(queue, { n: 'anonymous' });
    const res = await fetch(`${app.url}${BASE}/api/jobs/${id}/cancel`, { method: 'POST' });
    expect(res.status).toBe(401);
    const customer = await fetch(`${app.url}${BASE}/api/overview`, { headers: { Cookie: 'session=carl' } });
    expect(customer.status).toBe(403);
    expect((await lh.getJob(id))?.status).toBe('pending');
  });

  it('nothing is reachable outside the base path, even for an admin', async () => {
    const { id } = await lh.enqueue(queue, { n: 'outside' });
    const admin = { Cookie: 'session=ada' };
    // The same paths under the base path are the dashboard's.
    expect((await fetch(`${app.url}${BASE}/api/overview`, { headers: admin })).status).toBe(200);
    expect((await fetch(`${app.url}${BASE}/assets/app.js`, { headers: admin })).status).toBe(200);
    const bare = await fetch(`${app.url}${BASE}`, { headers: admin });
    expect([bare.status, (await bare.text()).includes(`data-base="${BASE}"`)]).toEqual([200, true]);
    for (const path of [
      '/',
      '/api/overview',
      '/assets/app.js',
      `/jobs/${id}`,
      '/search',
      `${BASE}x/api/overview`,
    ]) {
      const res = await fetch(`${app.url}${path}`, { headers: admin });
      const text = await res.text();
      expect([path, res.status]).toEqual([path, 404]);
      expect(text).not.toContain('"queues"');
      expect(text).not.toContain('data-csrf');
    }
  });

  it('a viewer sees every page under the base path and cannot act (403, nothing changed)', async () => {
    const { id } = await lh.enqueue(queue, { n: 'viewer' });
    const { page, problems, close } = await loggedIn(app, 'vic');
    try {
      await openView(page, `${app.url}${BASE}/`);
      expect(await page.locator('#role').textContent()).toBe('read-only');
      const row = page.locator(`tr[data-queue="${queue}"]`);
      await row.waitFor();
      expect(await row.getByRole('button', { name: `Pause ${queue}` }).isDisabled()).toBe(true);
      // Links stay under the base path: the queue's page, then the search from the menu.
      await row.locator('th a').click();
      await page.waitForURL(`${app.url}${BASE}/queues/${queue}`);
      await page.locator('#queue-gauges tr[data-queue]').waitFor();
      await page.getByRole('link', { name: 'Search' }).click();
      await page.waitForURL(`${app.url}${BASE}/search`);
      await openView(page, `${app.url}${BASE}/jobs/${id}`);
      expect(await page.locator('[data-field=status]').textContent()).toBe('pending');
      expect(await page.locator('button.cancel').isDisabled()).toBe(true);
      const before = await jobCount(queue);
      const statuses = await postFromPage(page, [
        [`${BASE}/api/jobs/${id}/cancel`, { reason: 'x' }],
        [`${BASE}/api/queues/${queue}/pause`, {}],
        [`${BASE}/api/enqueue`, { queue, payload: '{}' }],
        [`${BASE}/api/bulk`, { action: 'cancel', filter: { queue }, expectedCount: 1 }],
      ]);
      expect(statuses).toEqual([403, 403, 403, 403]);
      expect((await lh.getJob(id))?.status).toBe('pending');
      expect(await queuePaused(queue)).not.toBe(true);
      expect(await jobCount(queue)).toBe(before);
      // Reading is allowed: the API answers a viewer's GET.
      const search = await page.evaluate(
        (path) => fetch(path).then((r) => r.status),
        `${BASE}/api/search?queue=${queue}`,
      );
      expect(search).toBe(200);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('an admin acts: pauses and resumes the queue, cancels a job, recorded as the app user', async () => {
    const { id } = await lh.enqueue(queue, { n: 'admin' });
    const { page, problems, close } = await loggedIn(app, 'ada');
    try {
      await openView(page, `${app.url}${BASE}/`);
      expect(await page.locator('#role').textContent()).toBe('');
      const row = page.locator(`tr[data-queue="${queue}"]`);
      await page.getByRole('button', { name: `Pause ${queue}` }).click();
      await expect.poll(() => row.getAttribute('class')).toBe('paused');
      expect(await queuePaused(queue)).toBe(true);
      await page.getByRole('button', { name: `Resume ${queue}` }).click();
      await expect.poll(() => row.getAttribute('class')).toBe('');
      expect(await queuePaused(queue)).toBe(false);
      const { rows } = await sql().query(
        `SELECT action, actor FROM "${lh.schema}".operator_actions WHERE target = $1 ORDER BY id`,
        [queue],
      );
      expect(rows).toEqual([
        { action: 'pause', actor: 'staff:ada' },
        { action: 'resume', actor: 'staff:ada' },
      ]);
      // The reason typed reaches the history: the request's body is read whatever parsed it first.
      await openView(page, `${app.url}${BASE}/jobs/${id}`);
      await page.locator('#reason').fill('duplicate order');
      await page.locator('button.cancel').click();
      await expect.poll(() => page.locator('[data-field=status]').textContent()).toBe('cancelled');
      expect((await lh.getJob(id, { history: true }))?.history.at(-1)).toMatchObject({
        kind: 'cancelled',
        actor: 'staff:ada',
        reason: 'duplicate order',
      });
      // The CSRF and Origin checks stay on for an admin: without the page's token, or from another
      // site with it, nothing changes; the same request from the page's own origin acts.
      const other = (await lh.enqueue(queue, { n: 'forged' })).id;
      const bare = await page.evaluate(
        (path) =>
          fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' }).then(
            (r) => r.status,
          ),
        `${BASE}/api/jobs/${other}/cancel`,
      );
      expect(bare).toBe(403);
      const shell = await fetch(`${app.url}${BASE}/`, { headers: { Cookie: 'session=ada' } });
      const token = /data-csrf="([^"]+)"/.exec(await shell.text())?.[1] as string;
      expect(shell.headers.get('set-cookie')).toContain(`leasehold_csrf=${token}`);
      const cancel = (origin?: string) =>
        fetch(`${app.url}${BASE}/api/jobs/${other}/cancel`, {
          method: 'POST',
          headers: {
            Cookie: `session=ada; leasehold_csrf=${token}`,
            'X-Leasehold-Csrf': token,
            'Content-Type': 'application/json',
            ...(origin ? { Origin: origin } : {}),
          },
          body: '{}',
        });
      expect((await cancel('http://evil.example')).status).toBe(403);
      expect((await lh.getJob(other))?.status).toBe('pending');
      expect((await cancel(app.url)).status).toBe(200);
      expect((await lh.getJob(other))?.status).toBe('cancelled');
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});

async function jobCount(queue: string): Promise<number> {
  const { rows } = await sql().query(
    `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE queue_name = $1`,
    [queue],
  );
  return rows[0].n;
}
