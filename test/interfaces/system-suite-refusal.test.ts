import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { showOutputOnFailure } from '../support/child-output.js';
import { root } from '../support/cli-build.js';

// `npm run test:system` on a machine without the system packages it needs says so in one line and
// exits 1, before Vitest starts (issue 38: it printed "No test files found" and a stack trace
// first). The run gets a PATH holding only node and sh, so a package it looks up on the PATH is
// missing on every machine (and PgBouncer, looked for first at fixed paths, is missing on most).

const run = promisify(execFile);
const bare = mkdtempSync(join(tmpdir(), 'lh-bare-path-'));
afterAll(() => rmSync(bare, { recursive: true, force: true }));

function which(binary: string): string {
  return execFileSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' }).trim();
}

describe('npm run test:system without its system packages', () => {
  it('prints only its one clear line, naming what to install, and exits 1 before Vitest starts', async () => {
    symlinkSync(process.execPath, join(bare, 'node'));
    symlinkSync(which('sh'), join(bare, 'sh'));
    const npm = which('npm');
    let result: { code?: number; stdout: string; stderr: string } = { stdout: '', stderr: '' };
    showOutputOnFailure('npm run test:system', () => result);
    result = await run(npm, ['run', 'test:system'], {
      cwd: root,
      env: { HOME: process.env.HOME ?? tmpdir(), PATH: bare },
      timeout: 60_000,
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({
        code: err.code,
        stdout: err.stdout ?? '',
        stderr: err.stderr ?? '',
      }),
    );
    expect(result.code).toBe(1);
    // The one line: what is missing and how to install it (PgBouncer, or psql on a machine with it).
    expect(result.stderr).toMatch(
      /^test:system: (PgBouncer is not installed .*apt-get install -y pgbouncer|the system suite needs psql: apt-get install -y postgresql-client).*\n$/,
    );
    // Nothing of Vitest: no report of missing test files, no run header, no stack trace.
    expect(result.stdout + result.stderr).not.toMatch(/No test files found|\bRUN\b/);
    expect(result.stdout + result.stderr).not.toMatch(/\n\s+at /);
  });
});
