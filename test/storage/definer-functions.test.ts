import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { FUNCTIONS, schemaFunctions } from '../../src/storage/roles/functions.js';
import { databaseUrl, directDatabaseUrl, migratedClient } from '../support/db.js';

// The function registry (src/storage/functions.ts) declares each function's parameter and result
// types by hand; a statement changed by a later edit must not drift from them. PostgreSQL says
// what the direct statement takes (and, from version 16, what it returns).
describe('the function registry', () => {
  it('declares every function with the parameter and result types of the statement it runs', async () => {
    const lh = await migratedClient();
    // A session of its own: PREPARE outlives a transaction (and a pooler would move it).
    const client = new pg.Client({ connectionString: directDatabaseUrl() });
    await client.connect();
    try {
      const { rows: version } = await client.query(`SELECT current_setting('server_version_num')::int AS n`);
      const withResults = version[0].n >= 160000;
      const canonical = async (types: string) => {
        if (types === '') return [];
        const { rows } = await client.query(
          `SELECT array_agg(format_type(t::regtype, NULL) ORDER BY n)::text[] AS types
           FROM unnest(string_to_array($1, ',')) WITH ORDINALITY AS u(t, n)`,
          [types],
        );
        return rows[0].types as string[];
      };
      for (const [i, fn] of schemaFunctions(lh.schema).entries()) {
        const entry = FUNCTIONS[i]!;
        await client.query('BEGIN');
        try {
          await client.query(`PREPARE registry_check AS ${fn.direct.text}`);
          const { rows } = await client.query(
            `SELECT (SELECT array_agg(format_type(t, NULL) ORDER BY n)::text[]
                     FROM unnest(parameter_types::oid[]) WITH ORDINALITY AS u(t, n)) AS params
                    ${
                      withResults
                        ? `, (SELECT array_agg(format_type(t, NULL) ORDER BY n)::text[]
                     FROM unnest(result_types::oid[]) WITH ORDINALITY AS u(t, n)) AS results`
                        : ''
                    }
             FROM pg_prepared_statements WHERE name = 'registry_check'`,
          );
          expect(rows[0].params, `${fn.label}: args`).toEqual(await canonical(entry.args));
          if (withResults) {
            const declared =
              entry.returns === null
                ? null
                : await canonical(
                    entry.returns
                      .split(',')
                      .map((column) => column.trim().split(/\s+/).slice(1).join(' '))
                      .join(','),
                  );
            expect(rows[0].results, `${fn.label}: returns`).toEqual(declared);
          }
        } finally {
          await client.query('ROLLBACK');
          await client.query('DEALLOCATE registry_check');
        }
      }
      // And every one is installed, under the name the client calls.
      const { rows } = await client.query(
        `SELECT count(*)::int AS n FROM pg_proc WHERE pronamespace = $1::regnamespace AND proname = ANY($2)`,
        [lh.schema, schemaFunctions(lh.schema).map((fn) => fn.name)],
      );
      expect(rows[0].n).toBe(FUNCTIONS.length);
    } finally {
      await client.end();
    }
  });

  it('migrate() installs a function this version lacks even when the schema version is current', async () => {
    const lh = await migratedClient();
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      const claim = schemaFunctions(lh.schema).find((fn) => fn.label === 'claim_jobs')!;
      await client.query(`DROP FUNCTION ${claim.signature}`);
      expect(await lh.migrate()).toMatchObject({ applied: [] });
      const { rows } = await client.query(
        `SELECT has_function_privilege($2, p.oid, 'EXECUTE') AS worker FROM pg_proc AS p
         WHERE pronamespace = $1::regnamespace AND proname = $3`,
        [lh.schema, `${lh.schema}_worker`, claim.name],
      );
      expect(rows).toEqual([{ worker: true }]);
    } finally {
      await client.end();
    }
  });
});
