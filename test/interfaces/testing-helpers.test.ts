import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertFreshDist } from '../support/fresh-dist.js';

// `leasehold/testing` as a user's test file imports it: the built package, by its name, through
// package.json's exports map (the checkout is the package, so the name resolves to itself). Types
// come from the sources, so type-checking this file does not need a build.
assertFreshDist();
const load = (specifier: string): Promise<unknown> => import(specifier);
const testing = (await load('leasehold/testing')) as typeof import('../../src/testing/index.js');
const leasehold = (await load('leasehold')) as typeof import('../../src/index.js');
const { createTestLeasehold, drain, expectEnqueued, TestExpectationError } = testing;
const { defineTask, ValidationError } = leasehold;

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

let db: Awaited<ReturnType<typeof createTestLeasehold>>;
beforeAll(async () => {
  // The server a user's test gets: DATABASE_URL when set, else an embedded one for this file.
  db = await createTestLeasehold();
});
afterAll(() => db?.close());

async function schemaExists(url: string, schema: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    return rows.length === 1;
  } finally {
    await client.end();
  }
}

describe('leasehold/testing', () => {
  it('gives a migrated client on a fresh schema of the server (DATABASE_URL, else embedded); close drops the schema', async () => {
    expect(db.embedded).toBe(!process.env.DATABASE_URL);
    expect(db.schema).toMatch(/^lh_test_[0-9a-f]{10}$/);
    expect(db.lh.schema).toBe(db.schema);
    const other = await createTestLeasehold({ schemaPrefix: 'lh_other' });
    expect(other.connectionString).toBe(db.connectionString); // one server per process
    expect(other.schema).not.toBe(db.schema);
    const { id } = await other.lh.enqueue('q', { n: 1 });
    expect(await other.lh.getJob(id)).toMatchObject({ status: 'pending' });
    expect(await schemaExists(other.connectionString, other.schema)).toBe(true);
    await other.close();
    await other.close(); // safe twice
    // Dropped, while the server still serves the first client.
    expect(await schemaExists(db.connectionString, other.schema)).toBe(false);
    expect(await db.lh.enqueue('q', {})).toMatchObject({ created: true });

    await expect(createTestLeasehold({ schemaPrefix: 'Bad-Prefix' })).rejects.toBeInstanceOf(ValidationError);
  });

  it('drain runs a worker’s tasks to idle, including the jobs its handlers enqueue, and can drain the same worker again', async () => {
    const { lh } = db;
    const sent: string[] = [];
    const sendEmail = defineTask<{ to: string }>('drain-email', {
      handler: async (job) => void sent.push(job.payload.to),
    });
    const signup = defineTask<{ email: string }>('drain-signup', {
      handler: async (job) => {
        await lh.enqueue(sendEmail, { to: job.payload.email });
      },
    });
    const worker = lh.worker({ tasks: [signup, sendEmail] });
    await lh.enqueue(signup, { email: 'ada@example.com' });
    expect(await drain(worker)).toMatchObject({ succeeded: 2, failed: 0, lost: 0, endedBy: 'idle' });
    expect(sent).toEqual(['ada@example.com']);
    await lh.enqueue(signup, { email: 'grace@example.com' });
    expect(await drain(worker)).toMatchObject({ succeeded: 2, endedBy: 'idle' });
    expect(sent).toEqual(['ada@example.com', 'grace@example.com']);
    // With a client: the tasks named, as lh.runUntilIdle takes them.
    await lh.enqueue(sendEmail, { to: 'alan@example.com' });
    expect(await drain(lh, { tasks: [sendEmail] })).toMatchObject({ succeeded: 1, endedBy: 'idle' });
    expect(sent).toHaveLength(3);
  });

  it('drain fails the test with a TestExpectationError when a handler keeps it from going idle within maxMs', async () => {
    const { lh } = db;
    const hangs = defineTask('drain-hangs', {
      handler: (job) =>
        new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason))),
    });
    await lh.enqueue(hangs, {});
    const failure = await drain(lh, { tasks: [hangs], maxMs: 100, shutdownTimeoutMs: 0 }).catch((err) => err);
    expect(failure).toBeInstanceOf(TestExpectationError);
    expect(failure.code).toBe('TEST_EXPECTATION');
    expect(failure.message).toMatch(/^drain: still not idle after 100 ms/);
    await expect(drain({} as never)).rejects.toBeInstanceOf(ValidationError);
  });

  it('expectEnqueued passes on a partial payload, a predicate or an exact count, and resolves with the matching jobs', async () => {
    const { lh } = db;
    const invoice = defineTask<{ customer: { id: string; tier: string }; lines: number[] }>(
      'expect-invoice',
      {
        handler: async () => {},
      },
    );
    await lh.enqueue(invoice, { customer: { id: 'c1', tier: 'gold' }, lines: [1, 2] });
    await lh.enqueue(invoice, { customer: { id: 'c2', tier: 'gold' }, lines: [3] }, { delayMs: 60_000 });
    const [first] = await expectEnqueued(lh, invoice, { customer: { id: 'c1' } });
    expect(first?.payload).toEqual({ customer: { id: 'c1', tier: 'gold' }, lines: [1, 2] });
    // Pending later (delayMs) counts as enqueued.
    expect(await expectEnqueued(lh, invoice, { customer: { tier: 'gold' } }, { count: 2 })).toHaveLength(2);
    await expectEnqueued(lh, invoice, (payload) => payload.lines.length === 1);
    await expectEnqueued(lh, 'expect-invoice', { lines: [3] });
    await expectEnqueued(lh, invoice);
    await expectEnqueued(lh, 'expect-nothing-here', undefined, { count: 0 });
  });

  it('expectEnqueued fails with a TestExpectationError naming the match and that queue’s pending payloads, never another queue’s', async () => {
    const { lh } = db;
    await lh.enqueue('expect-mail', { to: 'bob@example.com', template: 'welcome' });
    await lh.enqueue('expect-secrets', { token: 'other-queue-secret' });
    const failure = await expectEnqueued(lh, 'expect-mail', { to: 'ada@example.com' }).catch((err) => err);
    expect(failure).toBeInstanceOf(TestExpectationError);
    expect(failure).toBeInstanceOf(Error);
    expect(failure.name).toBe('TestExpectationError');
    expect(failure.message).toContain(
      'expectEnqueued: expected a pending job of queue "expect-mail" matching {"to":"ada@example.com"}, found 0.',
    );
    expect(failure.message).toMatch(
      /Pending jobs of queue "expect-mail":\n {2}#\d+ \{"to":"bob@example.com","template":"welcome"\}/,
    );
    expect(failure.message).not.toContain('other-queue-secret');

    const counted = await expectEnqueued(lh, 'expect-mail', {}, { count: 2 }).catch((err) => err);
    expect(counted.message).toContain('expected 2 pending jobs of queue "expect-mail" matching {}, found 1.');
    const empty = await expectEnqueued(lh, 'expect-empty', function isUrgent() {
      return true;
    }).catch((err) => err);
    expect(empty.message).toBe(
      'expectEnqueued: expected a pending job of queue "expect-empty" matching the predicate isUrgent, found 0. ' +
        'Queue "expect-empty" has no pending job.',
    );
    await expect(expectEnqueued(lh, 'expect-mail', {}, { cout: 1 } as never)).rejects.toThrow(
      /did you mean count/,
    );
  });

  it("is a subpath export that importing 'leasehold' does not load", async () => {
    const script = `
      import { register } from 'node:module';
      import { MessageChannel } from 'node:worker_threads';
      const seen = [];
      const { port1, port2 } = new MessageChannel();
      port1.on('message', (url) => seen.push(url));
      port1.unref();
      register('data:text/javascript,' + encodeURIComponent(\`
        let port;
        export function initialize(data) { port = data.port; }
        export async function resolve(specifier, context, next) {
          const resolved = await next(specifier, context);
          if (resolved.url.includes('/dist/testing/')) port.postMessage(resolved.url);
          return resolved;
        }\`), { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] });
      await import('leasehold');
      await new Promise((resolve) => setTimeout(resolve, 50));
      const plain = seen.length;
      const names = Object.keys(await import('leasehold/testing')).sort();
      await new Promise((resolve) => setTimeout(resolve, 50));
      console.log(JSON.stringify({ plain, loaded: seen.length > 0, names }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      timeout: 30_000,
    });
    expect(JSON.parse(stdout.trim().split('\n').at(-1) as string)).toEqual({
      plain: 0,
      loaded: true,
      names: ['DEFAULT_DRAIN_MS', 'TestExpectationError', 'createTestLeasehold', 'drain', 'expectEnqueued'],
    });
  });
  // Last: it closes the file's client.
  it('the last client to close stops the embedded server it shared', async () => {
    const last = await createTestLeasehold();
    const url = last.connectionString;
    await db.close();
    expect(await schemaExists(url, last.schema)).toBe(true); // still running for `last`
    await last.close();
    if (db.embedded) await expect(schemaExists(url, last.schema)).rejects.toThrow(/ECONNREFUSED|connect/);
    else expect(await schemaExists(url, last.schema)).toBe(false); // DATABASE_URL: only the schema goes
  });
});
