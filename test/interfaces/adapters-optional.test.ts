import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const dist = (file: string) => fileURLToPath(new URL(`../../dist/${file}`, import.meta.url));

// A child process whose loader hook records every adapter library it is asked to resolve, then
// imports `entry` and prints what was resolved, plus any of them found in the CommonJS cache.
const CHILD = `
import { register, createRequire } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
const seen = [];
const { port1, port2 } = new MessageChannel();
port1.on('message', (s) => seen.push(s));
port1.unref();
register('data:text/javascript,' + encodeURIComponent(\`
  let port;
  export function initialize(data) { port = data.port; }
  export async function resolve(specifier, context, next) {
    if (/^(kysely|knex|postgres|drizzle-orm|@prisma\\\\/client)(\\\\/|$)/.test(specifier)) port.postMessage(specifier);
    return next(specifier, context);
  }\`), { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] });
await import(process.argv[1]);
await new Promise((resolve) => setTimeout(resolve, 50));
const cached = Object.keys(createRequire(import.meta.url).cache).filter((f) => /node_modules\\/(kysely|knex|postgres|drizzle-orm|@prisma)\\//.test(f));
console.log(JSON.stringify({ seen, cached }));
`;

async function loadedBy(entry: string): Promise<{ seen: string[]; cached: string[] }> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', CHILD, entry], {
    timeout: 30_000,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) as string);
}

describe('adapter libraries are optional', () => {
  it("importing 'leasehold' loads none of them", async () => {
    expect(await loadedBy(dist('index.js'))).toEqual({ seen: [], cached: [] });
  });

  it('importing an adapter loads its library (the check sees a load when there is one)', async () => {
    const { seen } = await loadedBy(dist('adapters/kysely.js'));
    expect(seen).toContain('kysely');
    expect((await loadedBy(dist('adapters/drizzle.js'))).seen).toContain('drizzle-orm');
  });

  it('each adapter is a subpath export of the package (package.json exports, built under dist/adapters)', async () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const script = `
      const names = {};
      for (const sub of ['kysely', 'knex', 'drizzle', 'postgres-js', 'prisma']) {
        names[sub] = Object.keys(await import('leasehold/' + sub)).sort();
      }
      console.log(JSON.stringify(names));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toEqual({
      kysely: ['fromKysely', 'kyselyAdapter'],
      knex: ['fromKnex', 'knexAdapter', 'knexBindings'],
      drizzle: ['drizzleAdapter', 'drizzleStatement', 'fromDrizzle'],
      'postgres-js': ['fromPostgresJs', 'postgresJsAdapter', 'postgresJsText'],
      prisma: ['fromPrisma', 'prismaAdapter'],
    });
  });
});
