import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as api from '../../src/index.js';
import { KNOWN_CODES } from '../../src/shared/errors.js';

// docs/api.md's table of error codes lists every code isLeaseholdError knows, with its class.
const docs = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const errorsSection = docs.slice(docs.indexOf('### Errors'), docs.indexOf('### Embedded PostgreSQL'));

describe('docs/api.md: errors', () => {
  it('lists every error code, and every exported error class', () => {
    const rows = errorsSection.split('\n').filter((line) => line.startsWith('| `'));
    for (const code of Object.keys(KNOWN_CODES)) {
      expect(
        rows.some((row) => (row.split('|')[1] ?? '').includes(`\`${code}\``)),
        code,
      ).toBe(true);
    }
    const classes = Object.entries(api)
      .filter(([, value]) => typeof value === 'function' && value.prototype instanceof api.LeaseholdError)
      .map(([name]) => name);
    expect(classes.length).toBeGreaterThan(10);
    for (const name of classes) expect(errorsSection, name).toContain(`\`${name}\``);
  });
});
