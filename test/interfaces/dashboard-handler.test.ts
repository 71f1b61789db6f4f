import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type DashboardHandlerOptions,
  type DashboardRequestHandler,
  dashboardHandler,
  type Leasehold,
} from '../../src/index.js';
import { migratedClient } from '../support/db.js';

// dashboardHandler on Node's own http server: its options are checked at the call, it hands what
// is not under its base path to `next` (404 without one), `readOnly` and `authorize` decide the
// role on every request, and the Host and Origin checks hold (raw requests: fetch will not send a
// chosen Host).

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function send(
  url: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, url),
      { method: options.method ?? 'GET', headers: options.headers },
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

let lh: Leasehold;
const opened: { server: Server; handler: DashboardRequestHandler }[] = [];

beforeAll(async () => {
  lh = await migratedClient();
});

afterAll(async () => {
  for (const { server, handler } of opened) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await handler.close();
  }
});

/**
 * Serves `handler` (with a `next` that answers 418 "app" when `withNext`) on a fresh port; with
 * `appCookie` the app sets a cookie of its own on the response before the handler runs.
 */
async function serve(
  options: Partial<DashboardHandlerOptions>,
  withNext = true,
  appCookie = false,
): Promise<string> {
  const handler = dashboardHandler(lh, {
    basePath: '/ops/queue',
    authorize: () => 'admin',
    rollupIntervalMs: 0,
    ...options,
  });
  const server = createServer((req, res) => {
    if (appCookie) res.setHeader('Set-Cookie', 'app_session=s1; Path=/; HttpOnly');
    void handler(
      req,
      res,
      withNext
        ? () => {
            res.writeHead(418).end('app');
          }
        : undefined,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push({ server, handler });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function csrfOf(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ token: string; cookie: string }> {
  const page = await send(url, '/ops/queue/', { headers });
  const token = /data-csrf="([^"]+)"/.exec(page.body)?.[1] as string;
  return { token, cookie: `leasehold_csrf=${token}` };
}

describe('dashboardHandler', () => {
  it('refuses bad options at the call, naming the option', () => {
    const authorize = () => 'admin' as const;
    const bad: [unknown, RegExp][] = [
      [{ basePath: '/admin/', authorize }, /basePath/],
      [{ basePath: 'admin', authorize }, /basePath/],
      [{ basePath: '/a"b', authorize }, /basePath/],
      [{ basePath: '/admin' }, /authorize/],
      [{ basePath: '/admin', authorize, readonly: true }, /readOnly/],
      [{ basePath: '/admin', authorize, rollupIntervalMs: -1 }, /rollupIntervalMs/],
      [{ basePath: '/admin', authorize, allowedHosts: [''] }, /allowedHosts/],
      [{ basePath: '/admin', authorize, tasks: [{}] }, /tasks/],
    ];
    for (const [options, message] of bad) {
      expect(() => dashboardHandler(lh, options as DashboardHandlerOptions)).toThrow(message);
    }
  });

  it('passes what is outside its base path to next, or answers 404 without one', async () => {
    const withNext = await serve({});
    for (const path of ['/', '/api/overview', '/ops/queuex', '/ops/queuex/api/overview', '/assets/app.js']) {
      expect([path, (await send(withNext, path)).body]).toEqual([path, 'app']);
    }
    expect((await send(withNext, '/ops/queue/api/overview')).status).toBe(200);
    const alone = await serve({}, false);
    const outside = await send(alone, '/api/overview');
    expect(outside.status).toBe(404);
    expect(outside.body).not.toContain('"queues"');
    // Inside the base path, an unknown route is the dashboard's own 404.
    expect((await send(alone, '/ops/queue/api/nothing')).status).toBe(404);
  });

  it('asks authorize on every request: false and unknown roles are 403, readOnly makes an admin a viewer', async () => {
    let answer: unknown = false;
    const url = await serve({ authorize: async () => answer as 'admin' });
    expect((await send(url, '/ops/queue/')).status).toBe(403);
    answer = 'root';
    expect((await send(url, '/ops/queue/api/overview')).status).toBe(403);
    answer = 'viewer';
    expect((await send(url, '/ops/queue/')).body).toContain('data-role="viewer"');
    answer = 'admin';
    expect((await send(url, '/ops/queue/')).body).toContain('data-role="admin"');

    const { id } = await lh.enqueue('handler-read-only', {});
    const readOnly = await serve({ readOnly: true });
    const { token, cookie } = await csrfOf(readOnly);
    const cancel = await send(readOnly, `/ops/queue/api/jobs/${id}/cancel`, {
      method: 'POST',
      headers: { Cookie: cookie, 'X-Leasehold-Csrf': token, 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(cancel.status).toBe(403);
    expect((await lh.getJob(id))?.status).toBe('pending');
  });

  it("sets its CSRF cookie beside the app's own cookies, scoped to its base path", async () => {
    const url = await serve({}, true, true);
    const page = await send(url, '/ops/queue/search');
    expect(page.status).toBe(200);
    const token = /data-csrf="([^"]+)"/.exec(page.body)?.[1];
    expect(page.headers['set-cookie']).toEqual([
      'app_session=s1; Path=/; HttpOnly',
      `leasehold_csrf=${token}; HttpOnly; SameSite=Strict; Path=/ops/queue`,
    ]);
    // A page opened with the cookie keeps its token (another process of the app serves the same one).
    const again = await send(url, '/ops/queue/', { headers: { Cookie: `leasehold_csrf=${token}` } });
    expect(/data-csrf="([^"]+)"/.exec(again.body)?.[1]).toBe(token);
  });

  it('keeps the Host and Origin checks: allowedHosts refuses another name (421), a foreign Origin is 403', async () => {
    const pinned = await serve({ allowedHosts: ['jobs.example.com'] });
    expect((await send(pinned, '/ops/queue/', { headers: { Host: 'rebound.example' } })).status).toBe(421);
    expect((await send(pinned, '/ops/queue/', { headers: { Host: 'jobs.example.com' } })).status).toBe(200);

    const open = await serve({});
    const { id } = await lh.enqueue('handler-origin', {});
    const { token, cookie } = await csrfOf(open);
    const post = (headers: Record<string, string>) =>
      send(open, `/ops/queue/api/jobs/${id}/cancel`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...headers },
        body: '{}',
      });
    // Another site, a token without its cookie, a cookie without the header: nothing changes.
    const host = new URL(open).host;
    expect(
      (await post({ Cookie: cookie, 'X-Leasehold-Csrf': token, Origin: 'http://evil.example' })).status,
    ).toBe(403);
    expect((await post({ 'X-Leasehold-Csrf': token })).status).toBe(403);
    expect((await post({ Cookie: cookie })).status).toBe(403);
    expect((await lh.getJob(id))?.status).toBe('pending');
    expect((await post({ Cookie: cookie, 'X-Leasehold-Csrf': token, Origin: `http://${host}` })).status).toBe(
      200,
    );
    expect((await lh.getJob(id))?.status).toBe('cancelled');
  });
});
