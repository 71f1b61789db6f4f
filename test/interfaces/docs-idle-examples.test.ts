import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { databaseUrl, testPool } from '../support/db.js';
import { assertFreshDist } from '../support/fresh-dist.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const require = createRequire(import.meta.url);
const dir = `${root}.tmp/docs-idle`;

// docs/api.md's TypeScript examples of "Run until idle" and "Testing your handlers", exactly as a
// reader copies them. They sit inside the package, so 'leasehold' and 'leasehold/testing' resolve
// to the built package itself, through its exports map, as from node_modules.
function example(name: string): string {
  const code = new RegExp(`\`\`\`ts\\n(// example: ${name}\\n[\\s\\S]*?)\`\`\``).exec(
    readFileSync(`${root}/docs/api.md`, 'utf8'),
  )?.[1];
  if (!code) throw new Error(`docs/api.md has no \`\`\`ts block starting with // example: ${name}`);
  return code;
}

describe('docs/api.md: run until idle and testing your handlers', () => {
  it('both examples type-check under tsc --strict against the built package', async () => {
    assertFreshDist();
    mkdirSync(`${dir}/vitest`, { recursive: true });
    writeFileSync(`${dir}/run-until-idle.ts`, example('run-until-idle'));
    writeFileSync(`${dir}/vitest/signup.test.ts`, example('testing-vitest'));
    const args = [
      require.resolve('typescript/bin/tsc'),
      ...['--noEmit', '--strict', '--skipLibCheck', '--target', 'es2022', '--module', 'nodenext'],
      ...['--moduleResolution', 'nodenext', '--types', 'node'],
      `${dir}/run-until-idle.ts`,
      `${dir}/vitest/signup.test.ts`,
    ];
    const result = await run(process.execPath, args, { cwd: root }).then(
      () => ({ code: 0, stdout: '' }),
      (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
    );
    expect(result.stdout).toBe('');
    expect(result.code).toBe(0);
  }, 60_000);

  it('the run-until-idle example runs: the due job runs, the retry in backoff does not keep it going', async () => {
    assertFreshDist();
    mkdirSync(dir, { recursive: true });
    const js = ts.transpileModule(example('run-until-idle'), {
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
    }).outputText;
    writeFileSync(`${dir}/run-until-idle.mjs`, js);
    // A database of its own: the example uses the default schema.
    const database = `docs_idle_${randomBytes(4).toString('hex')}`;
    const admin = testPool(1);
    await admin.query(`CREATE DATABASE ${database}`);
    try {
      const url = new URL(databaseUrl());
      url.pathname = `/${database}`;
      const { stdout } = await run(process.execPath, [`${dir}/run-until-idle.mjs`], {
        env: { ...process.env, DATABASE_URL: url.toString() },
        timeout: 30_000,
      });
      expect(stdout).toMatch(
        /^report for monday\n\{\s+succeeded: 1,\s+failed: 1,\s+dead: 0,\s+snoozed: 0,\s+lost: 0,\s+recovered: 0,\s+endedBy: 'idle'\s+\}\n$/,
      );
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    }
  }, 60_000);

  it('the Vitest example passes under Vitest, as a user runs it', async () => {
    assertFreshDist();
    mkdirSync(`${dir}/vitest`, { recursive: true });
    writeFileSync(`${dir}/vitest/signup.test.ts`, example('testing-vitest'));
    // A bare configuration of the user's own (none of this suite's global setup).
    writeFileSync(
      `${dir}/vitest/vitest.config.mjs`,
      "export default { test: { include: ['*.test.ts'] } };\n",
    );
    const { stdout } = await run(
      process.execPath,
      [`${root}node_modules/vitest/vitest.mjs`, 'run', '--root', `${dir}/vitest`],
      { cwd: root, env: { ...process.env, DATABASE_URL: databaseUrl(), NO_COLOR: '1' }, timeout: 90_000 },
    );
    expect(stdout).toMatch(/Tests\s+1 passed \(1\)/);
  }, 120_000);
});
