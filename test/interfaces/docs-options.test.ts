import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { Interrupt } from '../../src/cli/interrupt.js';
import { createProgram } from '../../src/cli/program.js';
import { KNOWN_OPTIONS } from '../../src/context/context.js';
import { CONFIGURE_QUEUE_KEYS, LIST_QUEUES_KEYS } from '../../src/operations/queues/queues.js';
import { KNOWN_QUEUE_KEYS, KNOWN_WORKER_KEYS } from '../../src/runtime/options.js';
import { DEFAULT_STATS_OPTIONS } from '../../src/shared/defaults.js';
import { DEDUPE_FIELDS, ENQUEUE_ITEM_KEYS, ENQUEUE_OPTION_KEYS } from '../../src/shared/enqueue-fields.js';
import { KNOWN_CODES } from '../../src/shared/errors.js';

// The docs name every option the validators accept, and every command the CLI has: the lists come
// from the code's own (the arrays rejectUnknownOptions checks against, the program the binary
// builds), so an option or command added without its documentation fails here. Each is looked for
// where a reader looks for it, not anywhere in the file. (The error codes' table, with each class,
// is checked by docs-errors.test.ts; the codes are checked here too, as words of docs/api.md.)
const api = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const cli = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');

/** The text between the first line starting with `start` and the next line starting with `end`. */
function section(text: string, start: string, end: string): string {
  const from = text.indexOf(`\n${start}`);
  expect(from, `docs: a line starting ${JSON.stringify(start)}`).toBeGreaterThanOrEqual(0);
  const to = text.indexOf(`\n${end}`, from + 1);
  return text.slice(from, to === -1 ? undefined : to);
}

/** The row of a markdown table whose first cell starts with `start`. */
function row(text: string, start: string): string {
  const found = text.split('\n').find((line) => line.startsWith(`| ${start}`));
  expect(found, `docs: a table row starting ${JSON.stringify(start)}`).toBeDefined();
  return found ?? '';
}

/** The keys of `keys` that `text` does not name as a word. */
function unnamed(text: string, keys: readonly string[]): string[] {
  return keys.filter((key) => !new RegExp(`(?<![A-Za-z0-9_])${key}(?![A-Za-z0-9_])`).test(text));
}

describe('docs/api.md names every option the validators accept', () => {
  it('new Leasehold(options): each option has a row of its table', () => {
    const table = section(api, '### `new Leasehold(options)`', '### ');
    const firstCells = table
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => line.split('|')[1] ?? '')
      .join(' ');
    expect(unnamed(firstCells, KNOWN_OPTIONS)).toEqual([]);
  });

  it('new Leasehold(options): its table names no option the client refuses', () => {
    // Issue 38: unattendedAfterMs read as a client setting; the client and the worker refuse it.
    const table = section(api, '### `new Leasehold(options)`', '### ');
    const named = table
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .flatMap((line) =>
        [...(line.split('|')[1] ?? '').matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1] as string),
      );
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((name) => !(KNOWN_OPTIONS as readonly string[]).includes(name))).toEqual([]);
  });

  it('lh.listQueues and lh.stats: each option in their row of the methods table (unattendedAfterMs among them)', () => {
    const listQueues = row(api, '`lh.cancel(').split('|')[1] ?? '';
    expect(listQueues).toMatch(/`lh\.listQueues\(\{[^`]*\}\)`/);
    expect(unnamed(/`lh\.listQueues\([^`]*`/.exec(listQueues)?.[0] ?? '', LIST_QUEUES_KEYS)).toEqual([]);
    const stats = row(api, '`lh.stats(').split('|')[1] ?? '';
    expect(unnamed(/`lh\.stats\([^`]*`/.exec(stats)?.[0] ?? '', Object.keys(DEFAULT_STATS_OPTIONS))).toEqual(
      [],
    );
  });

  it('lh.enqueue and lh.enqueueMany: each option in their row of the methods table', () => {
    const enqueue = row(api, '`lh.enqueue(').split('|')[1] ?? '';
    expect(unnamed(enqueue, ENQUEUE_OPTION_KEYS)).toEqual([]);
    expect(unnamed(enqueue, DEDUPE_FIELDS)).toEqual([]);
    const many = row(api, '`lh.enqueueMany(').split('|')[1] ?? '';
    expect(unnamed(many, ENQUEUE_ITEM_KEYS)).toEqual([]);
  });

  it("lh.worker: each worker option and each queue's option in the paragraph of worker options", () => {
    const options = section(api, 'Worker options:', 'What a worker does:');
    expect(unnamed(options, KNOWN_WORKER_KEYS)).toEqual([]);
    expect(unnamed(options, KNOWN_QUEUE_KEYS)).toEqual([]);
  });

  it('lh.configureQueue: each key in its table', () => {
    const table = section(api, '#### `lh.configureQueue(queue, config)`', '#');
    const firstCells = table
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => line.split('|')[1] ?? '')
      .join(' ');
    expect(unnamed(firstCells, CONFIGURE_QUEUE_KEYS)).toEqual([]);
  });

  it('every error code', () => {
    expect(unnamed(api, Object.keys(KNOWN_CODES))).toEqual([]);
  });

  it('no row of the limits table twice', () => {
    const limits = section(api, '| limit | value | refused with |', '\n');
    const rows = limits.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| ---'));
    expect(rows.length).toBeGreaterThan(3);
    expect(rows.filter((line, i) => rows.indexOf(line) !== i)).toEqual([]);
    const names = rows.map((line) => line.split('|')[1]?.trim());
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
    // Nor one limit under two names: the same value refused the same way is one row.
    const rules = rows.map((line) => line.split('|').slice(2).join('|').trim());
    expect(rows.filter((_, i) => rules.indexOf(rules[i] as string) !== i)).toEqual([]);
  });
});

describe('docs/cli.md names every command', () => {
  const interrupt = new Interrupt();
  afterAll(() => interrupt.dispose());

  /** Every command's full name under `leasehold` (`dead list`, `schedules pause`), leaves only. */
  function commandNames(command: Command, prefix: string[] = []): string[] {
    return command.commands.flatMap((sub) => {
      const path = [...prefix, sub.name()];
      return sub.commands.length > 0 ? commandNames(sub, path) : [path.join(' ')];
    });
  }

  it('each as `leasehold <command>` in a line of its command list', () => {
    const names = commandNames(createProgram(interrupt));
    expect(names.length).toBeGreaterThan(15);
    const list = section(cli, '## Commands', '```\n');
    const missing = names.filter(
      (name) =>
        !list
          .split('\n')
          .some((line) => line.startsWith(`npx leasehold ${name} `) || line === `npx leasehold ${name}`),
    );
    expect(missing).toEqual([]);
  });
});
