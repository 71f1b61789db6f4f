import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseUrl, testPool } from '../support/db.js';
import { assertFreshDist } from '../support/fresh-dist.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

// Every ```js block of the README and of docs/api.md (where the README's depth moved) that starts
// with "// example: <name>" is run as written, with plain Node against the built package (a file
// inside the package resolves 'leasehold' to itself). The README's TypeScript quick start is
// type-checked and run by test/readme-quick-start.test.ts.
const examples = ['README.md', 'docs/api.md']
  .flatMap((file) => [
    ...readFileSync(`${root}/${file}`, 'utf8').matchAll(/```js\n\/\/ example: ([\w-]+)\n([\s\S]*?)```/g),
  ])
  .map((m) => ({ name: m[1] as string, code: m[2] as string }));

describe('README examples', () => {
  const database = `readme_${randomBytes(4).toString('hex')}`;
  let url = '';

  beforeAll(async () => {
    // The examples import the built package: refuse to test a build older than the sources.
    assertFreshDist();
    await testPool(1).query(`CREATE DATABASE ${database}`);
    const parsed = new URL(databaseUrl());
    parsed.pathname = `/${database}`;
    url = parsed.toString();
  });

  afterAll(async () => {
    await testPool(1).query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  });

  it('has the examples this test expects', () => {
    expect(examples.map((e) => e.name)).toEqual([
      'exactly-once-counter',
      'embedded-quick-start',
      'typed-tasks',
      'results-and-waiting',
      'leases-and-fencing',
      'combined-enqueues',
      'transactional-enqueue',
      'transactional-complete',
      'schedules',
      'worker-options',
      'dashboard-handler',
      'rate-limits',
      'fair-turns',
      'dedupe-modes',
      'flows',
      'batch-handlers',
      'abort-reasons',
      'durable-steps',
      'durable-events',
      'durable-invoke',
    ]);
  });

  it.each(examples)('runs the $name example as written', async ({ name, code }) => {
    const dir = `${root}/.tmp/readme`;
    mkdirSync(dir, { recursive: true });
    const file = `${dir}/${name}.mjs`;
    writeFileSync(file, code);
    const { stdout } = await run(process.execPath, [file], {
      env: { ...process.env, DATABASE_URL: url },
      timeout: 30_000,
    });
    const expected: Record<string, RegExp> = {
      'exactly-once-counter': /views: 20 completed: 20/,
      'embedded-quick-start': /sending welcome, attempt 1, key \S+\ndone/,
      'leases-and-fencing':
        /extended: true\ncompleted: true\nrecovered: \{ retried: 1, dead: 0 \}[\s\S]*stale complete: false\nstale fail: lost\nfresh complete: true/,
      'transactional-enqueue': /job after rollback: null/,
      'transactional-complete': /invoices: 1 job: succeeded/,
      'typed-tasks':
        /^VALIDATION payload: does not match task resize-image's schema: url: .*\nserving \[ 'resize-image' \] \[ 'other', 'resize-image' \]\n[\s\S]*resizing https:\/\/example\.com\/cat\.png to 256\n[\s\S]*PAYLOAD_SCHEMA 1\n/,
      'worker-options': /completed[\s\S]*dead|dead[\s\S]*completed/,
      schedules:
        /job \d+ made by heartbeat for tick \S+Z\nheartbeat \* \* \* \* \* \* UTC next \S+ last \S+Z\nnightly-report 30 2 \* \* \* Europe\/Berlin next \S+ last never\n/,
      'rate-limits': /sent 6; limits 3\/500 ms, 2 at once\nthrottled: true, waited at least one window: true/,
      'dedupe-modes':
        /throttle: true false true\ndebounce: 1 job, rev 3\nreplace: true stale complete: false\nsurvivor: enqueued deduplicated\nbatch: true \[ false, false \] 5\n/,
      'results-and-waiting':
        /result: https:\/\/cdn\.example\.com\/cat-256\.png\nkept: 12345\nJOB_DEAD NOT_FOUND\nWAIT_TIMEOUT\nAbortError\n/,
      'dashboard-handler':
        /anonymous: 401 log in first\ncustomer: 403\nviewer: 200\noutside: 404 the app has no such page\n/,
      'batch-handlers':
        /^sending 4 emails in one call\nsucceeded {2}true\ndead BAD_ADDRESS false\npending ERROR false\nsucceeded {2}true\n/,
      'abort-reasons':
        /^cancelled: clean up, no retry\naborted event: cancelled\nshutdown: it runs again later\naborted event: shutdown\ncancelled pending\n/,
      'durable-steps':
        /^result: acct-ada@example\.com attempts: 2\nruns: \{ account: 1, verification: 1, welcome: 1 \}\nsteps: create-account#0 send-verification#0 grace-period#0 send-welcome#0\n/,
      'durable-events':
        /^woken: 1\nada@example\.com: welcomed true via link\nbob@example\.com: welcomed false\n/,
      'durable-invoke':
        /^2500 \{ paid: 'r-2500' \} attempts: 1 step: invoke-charges#0\n99000 \{ declined: 'DECLINED' \} attempts: 1 step: invoke-charges#0\n/,
      flows:
        /fetched (users|orders)\nfetched (users|orders)\nmerging users:succeeded orders:succeeded\nusers=succeeded orders=succeeded merge=succeeded/,
    };
    expect(stdout).toMatch(expected[name] as RegExp);
  });
});
