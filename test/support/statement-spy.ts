import type pg from 'pg';
import { STATEMENT_NAME } from '../../src/shared/operation-names.js';
import { runUnnamedOn } from '../../src/storage/db.js';
import { pooled } from './db.js';

/**
 * A pool that records the label of every library statement sent through it, for tests of what a
 * pass sends: a feature's work that a plain schema must not pay for. A statement is named
 * `leasehold_<label>_<digest>`, or sent unnamed behind a transaction pooler with that name in a
 * leading comment (storage/db.ts); either way the label is recorded.
 */
export function statementsSentOn(target: pg.Pool) {
  const sent: string[] = [];
  const pool = new Proxy(target, {
    get(obj, key) {
      if (key === 'query') {
        return (config: unknown, ...rest: unknown[]) => {
          const label = labelOf(config);
          if (label !== null) sent.push(label);
          return (obj.query as (...args: unknown[]) => unknown)(config, ...rest);
        };
      }
      const value = Reflect.get(obj, key, obj);
      return typeof value === 'function' ? value.bind(obj) : value;
    },
  });
  // Behind the pooler the client's pool sends statements unnamed; the spy in front of it must too.
  if (pooled()) runUnnamedOn(pool);
  return { pool, labels: () => [...sent], clear: () => void sent.splice(0) };
}

// An unnamed statement leads with its name in a comment (storage/db.ts, `unnamedText`).
const LEADING_COMMENT = /^\/\* (\S+) \*\//;

function labelOf(config: unknown): string | null {
  if (typeof config !== 'object' || config === null) return null;
  const { name, text } = config as { name?: unknown; text?: unknown };
  const full =
    typeof name === 'string' ? name : typeof text === 'string' ? LEADING_COMMENT.exec(text)?.[1] : undefined;
  return full === undefined ? null : (STATEMENT_NAME.exec(full)?.[1] ?? null);
}
