import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The room table of docs/architecture.md is code: `npm run lint` runs
// scripts/check-import-cycles.mjs, which reads the table and refuses an import from one room to
// another that the table does not allow. Each case below plants one wrong thing in a scratch copy
// of src/ and of the doc, and sees the script refuse it, naming the file and the rooms.

const root = fileURLToPath(new URL('../..', import.meta.url));
const script = join(root, 'scripts/check-import-cycles.mjs');
const scratches: string[] = [];
afterAll(() => {
  for (const dir of scratches) rmSync(dir, { recursive: true, force: true });
});

function check(srcDir = 'src', table = 'docs/architecture.md'): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [script, srcDir, table], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}${run.error ? String(run.error) : ''}` };
}

// A copy of src/ and of the doc the table lives in, to plant a change in.
function scratchCopy(): { src: string; doc: string } {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-rooms-'));
  scratches.push(dir);
  cpSync(join(root, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(root, 'docs/architecture.md'), join(dir, 'architecture.md'));
  return { src: join(dir, 'src'), doc: join(dir, 'architecture.md') };
}

function prepend(file: string, line: string): void {
  writeFileSync(file, `${line}\n${readFileSync(file, 'utf8')}`);
}

describe('the room table (npm run lint)', () => {
  it('passes on the code as it is, every file in a room', () => {
    const { status, output } = check();
    expect(status, output).toBe(0);
    expect(output).toMatch(/in \d+ rooms, no import circles, no import the room table refuses/);
  });

  it('refuses an import the table does not allow: the dashboard reading storage directly', () => {
    const { src, doc } = scratchCopy();
    prepend(join(src, 'dashboard/api.ts'), "import { run } from '../storage/db.js';");
    const { status, output } = check(src, doc);
    expect(status, output).toBe(1);
    expect(output).toContain(
      'dashboard/api.ts imports storage/db.ts: room dashboard may not import room storage',
    );
  });

  it('counts a type-only import as an import', () => {
    const { src, doc } = scratchCopy();
    prepend(
      join(src, 'connection/settings.ts'),
      "import type { loadOtel } from '../observability/tracing.js';",
    );
    const { status, output } = check(src, doc);
    expect(status, output).toBe(1);
    expect(output).toContain(
      'connection/settings.ts imports observability/tracing.ts: room connection may not import room tracing',
    );
  });

  it('reads the table from the doc: a room struck from a row refuses the imports it allowed', () => {
    const { src, doc } = scratchCopy();
    const text = readFileSync(doc, 'utf8');
    const row = '| `maintenance` | `maintenance/` | `storage` |';
    expect(text).toContain(row);
    writeFileSync(doc, text.replace(row, '| `maintenance` | `maintenance/` | — |'));
    const { status, output } = check(src, doc);
    expect(status, output).toBe(1);
    expect(output).toMatch(
      /maintenance\/\S+ imports storage\/\S+: room maintenance may not import room storage/,
    );
  });

  it('refuses a file that is in no room', () => {
    const { src, doc } = scratchCopy();
    writeFileSync(
      join(src, 'stray.ts'),
      '/** A file the table does not place. */\nexport const stray = 1;\n',
    );
    const { status, output } = check(src, doc);
    expect(status, output).toBe(1);
    expect(output).toContain('stray.ts: in no room of the room table');
  });

  it('excuses the client from the length bound only while it holds forwards only', () => {
    const client = readFileSync(join(root, 'src/client.ts'), 'utf8');
    expect(client.split('\n').length).toBeGreaterThan(400);
    const { src, doc } = scratchCopy();
    appendFileSync(join(src, 'client.ts'), 'if (Date.now() < 0) console.log("logic, not a forward");\n');
    const { status, output } = check(src, doc);
    expect(status, output).toBe(1);
    expect(output).toMatch(/src\/client\.ts: \d+ lines \(limit 400\)/);
  });

  it('refuses a folder of src/ holding more than 15 files directly (15 pass)', () => {
    const { src, doc } = scratchCopy();
    for (let i = 0; i < 5; i++)
      writeFileSync(join(src, `shared/extra-${i}.ts`), `export const extra${i} = ${i};\n`);
    expect(check(src, doc).status).toBe(0);
    writeFileSync(join(src, 'shared/extra-5.ts'), 'export const extra5 = 5;\n');
    const { status, output } = check(src, doc);
    expect(status, output).toBe(1);
    expect(output).toContain('shared/ holds 16 files directly, more than 15');
  });
});
