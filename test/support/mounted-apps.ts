import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import middie from '@fastify/middie';
import { type HttpBindings, serve } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import type { DashboardRequestHandler } from '../../src/index.js';

// Three small apps of the kind users already run (Express, Fastify, Hono), each with its own login
// and the dashboard mounted under BASE the way that framework's users would mount it. The login:
// GET /login?as=<user> sets a session cookie; anything under /admin without one gets the app's own
// refusal (401 "log in first"). Which users are staff is the app's business (authorizeStaff).

/** Where every app mounts the dashboard. */
export const BASE = '/admin/jobs';
/** What each app answers an anonymous request under /admin with (its own refusal, not the dashboard's). */
export const APP_REFUSAL = 'log in first';

/** The user a request's session cookie names, or null (anonymous). */
export function userOf(req: IncomingMessage): string | null {
  const match = /(?:^|;\s*)session=([a-z]+)/.exec(req.headers.cookie ?? '');
  return match?.[1] ?? null;
}

/** The app's roles: ada is an admin, vic a viewer, anyone else logged in (a customer) is refused. */
export function authorizeStaff(req: IncomingMessage): 'admin' | 'viewer' | false {
  const user = userOf(req);
  return user === 'ada' ? 'admin' : user === 'vic' ? 'viewer' : false;
}

const loginCookie = (user: string) => `session=${user}; Path=/; HttpOnly; SameSite=Lax`;

/** A running test app. */
export interface MountedApp {
  url: string;
  close(): Promise<void>;
}

function closing(server: Server): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
}

/**
 * Express: the dashboard mounted with app.use under BASE, behind the app's login middleware, with
 * the app's JSON body parser running first (as in many apps): the dashboard reads req.body then.
 */
export async function expressApp(dashboard: DashboardRequestHandler): Promise<MountedApp> {
  const app = express();
  app.use(express.json());
  app.get('/login', (req, res) => {
    res.setHeader('Set-Cookie', loginCookie(String(req.query.as)));
    res.send('logged in');
  });
  app.use('/admin', (req, res, next) => (userOf(req) ? next() : res.status(401).send(APP_REFUSAL)));
  app.use(BASE, dashboard);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: closing(server) };
}

/** Fastify: the login as an onRequest hook, then the dashboard as a middleware (@fastify/middie). */
export async function fastifyApp(dashboard: DashboardRequestHandler): Promise<MountedApp> {
  const app = Fastify();
  // Added before middie's own onRequest hook, so the login runs before the dashboard.
  app.addHook('onRequest', async (req, reply) => {
    if (req.url.startsWith('/admin') && !userOf(req.raw)) return reply.code(401).send(APP_REFUSAL);
  });
  await app.register(middie);
  app.use(BASE, dashboard);
  app.get('/login', async (req, reply) => {
    reply.header('Set-Cookie', loginCookie(String((req.query as { as?: string }).as)));
    return 'logged in';
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

/** Hono (@hono/node-server): the login as middleware, the dashboard answering on Node's own req/res. */
export async function honoApp(dashboard: DashboardRequestHandler): Promise<MountedApp> {
  const app = new Hono<{ Bindings: HttpBindings }>();
  app.get('/login', (c) => {
    c.header('Set-Cookie', loginCookie(c.req.query('as') ?? ''));
    return c.text('logged in');
  });
  app.use('/admin/*', async (c, next) => (userOf(c.env.incoming) ? next() : c.text(APP_REFUSAL, 401)));
  app.all(`${BASE}/*`, async (c) => {
    await dashboard(c.env.incoming, c.env.outgoing);
    return RESPONSE_ALREADY_SENT;
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: closing(server) };
}
