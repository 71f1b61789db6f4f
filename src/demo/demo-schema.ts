/**
 * The demo's only SQL: dropping the throwaway schema it made. Leasehold has no public call to
 * remove a schema, so it is done here, on a name the demo itself generated, checked and quoted.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';

const DEMO_SCHEMA = /^leasehold_demo_[0-9a-f]{8}$/;

/** A fresh schema name for one demo run. */
export function newDemoSchema(): string {
  return `leasehold_demo_${randomBytes(4).toString('hex')}`;
}

/** Drops the demo's schema and everything in it. */
export async function dropDemoSchema(pool: pg.Pool, schema: string): Promise<void> {
  // Only ever a name newDemoSchema made: never drop a schema the demo did not create.
  if (!DEMO_SCHEMA.test(schema)) throw new Error(`not a demo schema: ${schema}`);
  // Right after workers are killed, their server backends may still be finishing a statement over
  // several of the schema's tables; the DROP can then lose a deadlock. Try a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((resolve) => setTimeout(resolve, 300 * attempt));
    }
  }
}
