import fc from 'fast-check';
import type pg from 'pg';
import { expect } from 'vitest';
import { isLeaseholdError, ValidationError } from '../../src/index.js';

/**
 * fast-check parameters for a property: `numRuns` sized for a 2-core machine. A failure prints its
 * seed and path; set FC_SEED (and FC_PATH) to replay exactly that run.
 */
export function runs(numRuns: number): fc.Parameters<unknown> {
  const seed = process.env.FC_SEED;
  return {
    numRuns,
    ...(seed !== undefined && { seed: Number(seed) }),
    ...(process.env.FC_PATH !== undefined && { path: process.env.FC_PATH }),
  };
}

/** Rows in every table of a schema, by table name: to prove a refused call wrote nothing anywhere. */
export async function tableCounts(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
  const { rows: tables } = await pool.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`,
    [schema],
  );
  // One statement for all tables; names come from the catalog and are quoted.
  const counts = tables.map(({ name }) => `(SELECT count(*)::int FROM "${schema}"."${name}") AS "${name}"`);
  const { rows } = await pool.query<Record<string, number>>(`SELECT ${counts.join(', ')}`);
  return { ...rows[0] };
}

/** What a promise rejected with (fails the test if it resolved). */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)?.slice(0, 200)}`);
    },
    (err: unknown) => err,
  );
}

/** Asserts `err` is Leasehold's ValidationError (by class and by code), naming `field` when given. */
export function expectValidationError(err: unknown, field?: string | RegExp): void {
  expect(err).toBeInstanceOf(ValidationError);
  expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
  if (typeof field === 'string') expect((err as ValidationError).field).toBe(field);
  else if (field) expect((err as ValidationError).field).toMatch(field);
}

/**
 * The documented rule for free text (keys, reasons, owners), written independently of
 * src/validation.ts: at most `max` UTF-16 code units, not blank, no NUL, no lone surrogate.
 */
export function isStorableText(value: string, max: number): boolean {
  if (value.length === 0 || value.length > max || value.trim().length === 0) return false;
  return !holdsUnstorableUnit(value);
}

/** Fragments of SQL, shell and format-string injection, quoting tricks and odd Unicode. */
export const INJECTIONS = [
  "x'; DROP TABLE jobs; --",
  "'); DELETE FROM jobs; --",
  '" OR 1=1 --',
  "' OR '1'='1",
  '$1',
  '$2::jsonb',
  '$$; SELECT pg_sleep(10); $$',
  '/* comment */',
  '-- comment',
  '\\',
  '\\\\',
  "\\'",
  "E'\\x00'",
  '%s%n%d',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template-injection probe, meant literally.
  '${process.exit(1)}',
  '`rm -rf /`',
  '; NOTIFY leasehold_wakeup;',
  'U&"\\0000"',
  '\u202e\u2066reversed',
  'e\u0301 vs \u00e9',
  '\u200b\u200d\ufeff',
  '\u2028\u2029',
  '\ufffe\uffff',
  '😀👩‍👩‍👧',
  '\r\n\t\u000b\u000c',
  '\u0000',
  '\ud800',
  'lone \udc00 low',
  ' ',
  '',
] as const;

/** One UTF-16 code unit or code point that tends to break string handling. */
export const oddUnit: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('a', 'Z', '0', '_', '-', '.', ':', ' ', "'", '"', '\\', '$', ';', '%', '`', '/', '*'),
  fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom('\u0301', '\u200b', '\u202e', '\u2028', '\ufeff', '\ufffe', '\uffff', 'é', 'ß', '中'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);

/** Strings made to break things: injection fragments, odd units, and mixtures of both. */
export function hostileString(maxLength = 64): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constantFrom(...INJECTIONS),
    fc.string({ unit: oddUnit, maxLength }),
    fc.string({ unit: 'binary', maxLength }),
    fc
      .array(fc.oneof(fc.constantFrom(...INJECTIONS), fc.string({ unit: oddUnit, maxLength: 4 })), {
        maxLength: 6,
      })
      .map((parts) => parts.join('').slice(0, maxLength)),
  );
}

/** True when a string holds what PostgreSQL cannot store: NUL or a lone surrogate (checked by code unit). */
export function holdsUnstorableUnit(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit === 0) return true;
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return true;
      i++;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      return true;
    }
  }
  return false;
}
