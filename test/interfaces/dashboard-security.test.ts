import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CSRF_HEADER, TOKEN_COOKIE } from '../../src/dashboard/security.js';
import { type Dashboard, type DashboardOptions, type Leasehold, startDashboard } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

// Hostile requests against the dashboard's own layer (Host, Origin, token, cookie), over a real
// socket: Node's http client, because fetch will not let a test choose the Host header.

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const fixtures = new URL('../support/fixtures/', import.meta.url);
const tls = {
  key: readFileSync(new URL('localhost-key.pem', fixtures)),
  cert: readFileSync(new URL('localhost-cert.pem', fixtures)),
};

/** One raw request: `headers` are sent exactly (a `host` among them replaces the real one). */
function send(
  base: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const url = new URL(path, base);
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? 'GET', headers: options.headers ?? {}, rejectUnauthorized: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const started: Dashboard[] = [];
async function dashboard(options: DashboardOptions = {}): Promise<Dashboard> {
  const d = await startDashboard(lh, { port: 0, ...options });
  started.push(d);
  return d;
}

let lh: Leasehold;
beforeAll(async () => {
  lh = await migratedClient();
});
afterAll(async () => {
  for (const d of started) await d.close();
});

function csrfOf(html: string): string {
  const match = /data-csrf="([^"]+)"/.exec(html);
  expect(match, 'the page carries its CSRF token').not.toBeNull();
  return (match as RegExpExecArray)[1] as string;
}

async function status(id: string): Promise<string | undefined> {
  return (await lh.getJob(id))?.status;
}

describe('the dashboard answers only to the names it was started for', () => {
  it('refuses a rebound Host (421) before reading a page, a job or acting on one', async () => {
    const d = await dashboard();
    const port = new URL(d.url).port;
    const { id } = await lh.enqueue('rebind', { secret: 'payload' });
    // What a page on evil.example, rebound to 127.0.0.1, sends: its own name as Host and Origin.
    const evil = { host: `evil.example:${port}`, origin: `http://evil.example:${port}` };
    const page = await send(d.url, '/', { headers: { host: evil.host } });
    expect(page.status).toBe(421);
    expect(page.body).not.toContain('data-csrf');
    const job = await send(d.url, `/api/jobs/${id}`, { headers: { host: evil.host } });
    expect(job.status).toBe(421);
    expect(job.body).not.toContain('payload');
    // Even holding the real page's CSRF token, the rebound name acts on nothing.
    const csrf = csrfOf((await send(d.url, '/')).body);
    const cancel = await send(d.url, `/api/jobs/${id}/cancel`, {
      method: 'POST',
      headers: { ...evil, 'content-type': 'application/json', [CSRF_HEADER]: csrf },
      body: '{}',
    });
    expect(cancel.status).toBe(421);
    expect(await status(id)).toBe('pending');
  });

  it('serves 127.0.0.1, localhost and [::1] on its port, and names given with allowedHosts', async () => {
    const d = await dashboard({ allowedHosts: ['queue.example.com', 'proxy.example.com:443'] });
    const port = new URL(d.url).port;
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `[::1]:${port}`,
      `queue.example.com:${port}`,
    ]) {
      expect((await send(d.url, '/api/overview', { headers: { host } })).status, host).toBe(200);
    }
    expect((await send(d.url, '/api/overview', { headers: { host: 'proxy.example.com:443' } })).status).toBe(
      200,
    );
    // The right name on another port, a name absent from the list, and no port at all are refused.
    for (const host of ['127.0.0.1:1', 'other.example.com', 'localhost', `queue.example.com.evil:${port}`]) {
      expect((await send(d.url, '/api/overview', { headers: { host } })).status, host).toBe(421);
    }
  });

  it('refuses a foreign Origin (403) on a read and on an action, even with the CSRF token', async () => {
    const d = await dashboard();
    const { id } = await lh.enqueue('origin', {});
    const csrf = csrfOf((await send(d.url, '/')).body);
    const read = await send(d.url, '/api/overview', { headers: { origin: 'http://evil.example' } });
    expect(read.status).toBe(403);
    for (const origin of ['http://evil.example', 'null', `${d.url}.evil.example`]) {
      const cancel = await send(d.url, `/api/jobs/${id}/cancel`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/json', [CSRF_HEADER]: csrf },
        body: '{}',
      });
      expect(cancel.status, origin).toBe(403);
    }
    expect(await status(id)).toBe('pending');
    // Its own origin acts.
    const own = await send(d.url, `/api/jobs/${id}/cancel`, {
      method: 'POST',
      headers: { origin: d.url, 'content-type': 'application/json', [CSRF_HEADER]: csrf },
      body: '{}',
    });
    expect(own.status).toBe(200);
    expect(await status(id)).toBe('cancelled');
  });

  it('keeps a reason of 999 characters and an emoji well-formed (cut on a code point)', async () => {
    const d = await dashboard();
    const { id } = await lh.enqueue('reasons', {});
    const csrf = csrfOf((await send(d.url, '/')).body);
    const reason = `${'a'.repeat(999)}😀`;
    const cancel = await send(d.url, `/api/jobs/${id}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [CSRF_HEADER]: csrf },
      body: JSON.stringify({ reason }),
    });
    expect(cancel.status, cancel.body).toBe(200);
    const job = await lh.getJob(id, { history: true });
    expect(job?.history.find((e) => e.kind === 'cancelled')?.reason).toBe('a'.repeat(999));
  });
});

describe('pausing and resuming schedules and queues from the dashboard', () => {
  it('keeps every rule on the schedule routes (Host, Origin, CSRF, viewer), and records who and why', async () => {
    await lh.schedule('sec-nightly', { cron: '@daily', queue: 'sec-sched' });
    const d = await dashboard({ token: 'op-token', viewerToken: 'view-token', actor: 'ops-alice' });
    const op = { authorization: 'Bearer op-token' };
    const csrf = csrfOf((await send(d.url, '/', { headers: op })).body);
    const post = (path: string, headers: Record<string, string>, body = '{}') =>
      send(d.url, path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    const pause = '/api/schedules/sec-nightly/pause';
    const paused = async () => (await lh.schedules()).find((s) => s.name === 'sec-nightly')?.paused;
    expect((await post(pause, { ...op, [CSRF_HEADER]: csrf, host: 'evil.example' })).status).toBe(421);
    expect((await post(pause, { ...op, [CSRF_HEADER]: csrf, origin: 'http://evil.example' })).status).toBe(
      403,
    );
    expect((await post(pause, { ...op })).status).toBe(403); // no CSRF token
    expect((await post(pause, { authorization: 'Bearer view-token', [CSRF_HEADER]: csrf })).status).toBe(403);
    expect((await post(pause, { [CSRF_HEADER]: csrf })).status).toBe(401); // no token
    expect(await paused()).toBe(false);
    const actions = async () =>
      (
        await testPool(1).query(
          `SELECT actor, action, target_kind, target, reason FROM "${lh.schema}".operator_actions ORDER BY id`,
        )
      ).rows;
    expect(await actions()).toEqual([]);

    const ok = await post(
      pause,
      { ...op, [CSRF_HEADER]: csrf },
      JSON.stringify({ reason: 'holiday freeze' }),
    );
    expect(ok.status, ok.body).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ schedule: 'sec-nightly', paused: true });
    expect(await paused()).toBe(true);
    const resumed = await post('/api/schedules/sec-nightly/resume', { ...op, [CSRF_HEADER]: csrf });
    expect(resumed.status).toBe(200);
    expect(await paused()).toBe(false);
    const queue = await post('/api/queues/sec-sched/pause', { ...op, [CSRF_HEADER]: csrf });
    expect(queue.status).toBe(200);
    expect(await actions()).toEqual([
      {
        actor: 'ops-alice',
        action: 'pause',
        target_kind: 'schedule',
        target: 'sec-nightly',
        reason: 'holiday freeze',
      },
      {
        actor: 'ops-alice',
        action: 'resume',
        target_kind: 'schedule',
        target: 'sec-nightly',
        reason: 'resumed from the dashboard',
      },
      {
        actor: 'ops-alice',
        action: 'pause',
        target_kind: 'queue',
        target: 'sec-sched',
        reason: 'paused from the dashboard',
      },
    ]);
    // A name no schedule has: a clear error, nothing recorded.
    const missing = await post('/api/schedules/no-such/pause', { ...op, [CSRF_HEADER]: csrf });
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.body).error).toMatch(/names no schedule/);
    expect(await actions()).toHaveLength(3);
    // A queue no job, configuration or schedule named: refused as lh.pauseQueue refuses it (issue
    // 38), naming the nearest, with no phantom paused queue and nothing recorded.
    const typo = await post('/api/queues/sec-shced/pause', { ...op, [CSRF_HEADER]: csrf });
    expect(typo.status, typo.body).toBe(404);
    expect(JSON.parse(typo.body)).toEqual({
      error: 'no queue "sec-shced" (did you mean "sec-sched"?)',
      code: 'QUEUE_NOT_FOUND',
    });
    expect((await lh.listQueues()).map((q) => q.name)).not.toContain('sec-shced');
    expect(await actions()).toHaveLength(3);
    // The overview lists them for everyone, the viewer too.
    const overview = await send(d.url, '/api/overview', { headers: { authorization: 'Bearer view-token' } });
    expect(JSON.parse(overview.body).operatorActions.map((a: { target: string }) => a.target)).toEqual([
      'sec-sched',
      'sec-nightly',
      'sec-nightly',
    ]);
  });
});

describe('the dashboard token', () => {
  it('treats a malformed token cookie as no token (401, not 500)', async () => {
    const d = await dashboard({ token: 'right-token' });
    const answer = await send(d.url, '/api/overview', { headers: { cookie: `${TOKEN_COOKIE}=%E0%A4%A` } });
    expect(answer.status).toBe(401);
    const good = await send(d.url, '/api/overview', { headers: { cookie: `${TOKEN_COOKIE}=right-token` } });
    expect(good.status).toBe(200);
  });

  it('exchanges ?token= for a cookie and redirects to the same page without it', async () => {
    const d = await dashboard({ token: 'tok-123' });
    const answer = await send(d.url, '/dead?queue=mail&token=tok-123');
    expect(answer.status).toBe(303);
    expect(answer.headers.location).toBe('/dead?queue=mail');
    const cookie = String(answer.headers['set-cookie']);
    expect(cookie).toContain(`${TOKEN_COOKIE}=tok-123`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).not.toContain('Secure');
    const page = await send(d.url, '/dead?queue=mail', { headers: { cookie: `${TOKEN_COOKIE}=tok-123` } });
    expect(page.status).toBe(200);
    expect((await send(d.url, '/dead?token=wrong')).status).toBe(401);
  });

  it('refuses ?token= on /api/ with 401 naming the header to use, right token or wrong (issue 32)', async () => {
    const d = await dashboard({ token: 'tok-123' });
    for (const path of [
      '/api/overview?token=tok-123',
      '/api/overview?token=wrong',
      '/api/dead?queue=mail&token=tok-123',
    ]) {
      const answer = await send(d.url, path);
      expect(answer.status, path).toBe(401);
      expect(answer.body, path).toContain('Authorization: Bearer');
      expect(answer.headers['set-cookie'], path).toBeUndefined();
    }
    // Even beside a valid header or cookie: the token in the URL is the leak.
    const both = await send(d.url, '/api/overview?token=tok-123', {
      headers: { authorization: 'Bearer tok-123' },
    });
    expect(both.status).toBe(401);
    // The header and the cookie are what the API takes.
    expect(
      (await send(d.url, '/api/overview', { headers: { authorization: 'Bearer tok-123' } })).status,
    ).toBe(200);
    expect(
      (await send(d.url, '/api/overview', { headers: { cookie: `${TOKEN_COOKIE}=tok-123` } })).status,
    ).toBe(200);
  });

  it('marks the cookie Secure over TLS, and behind a proxy only when told to trust it', async () => {
    const auth = { authorization: 'Bearer t' };
    const forwarded = { ...auth, 'x-forwarded-proto': 'https' };
    const plain = await dashboard({ token: 't' });
    expect(
      String((await send(plain.url, '/api/overview', { headers: forwarded })).headers['set-cookie']),
    ).not.toContain('Secure');
    const proxied = await dashboard({ token: 't', trustProxy: true });
    expect(
      String((await send(proxied.url, '/api/overview', { headers: forwarded })).headers['set-cookie']),
    ).toContain('Secure');
    expect(
      String((await send(proxied.url, '/api/overview', { headers: auth })).headers['set-cookie']),
    ).not.toContain('Secure');
    const encrypted = await dashboard({ token: 't', tls });
    expect(encrypted.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const answer = await send(encrypted.url, '/api/overview', { headers: auth });
    expect(answer.status).toBe(200);
    expect(String(answer.headers['set-cookie'])).toContain('Secure');
  });
});
