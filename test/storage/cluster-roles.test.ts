import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dropUnusedRoles, existingRoles } from '../support/cluster-roles.js';
import { directDatabaseUrl, dropSchema, uniqueSchema } from '../support/db.js';
import { asSuperuser } from '../support/roles.js';

// What the suite's teardown does on a shared server with the group roles it created: drop a role
// once nothing depends on it, and leave one that a schema still grants to.
describe('cleaning up cluster-wide roles after a run', () => {
  it('drops a role nothing uses, and keeps one a schema still grants privileges to', async () => {
    const unused = `lh_probe_${randomBytes(4).toString('hex')}`;
    const used = `lh_probe_${randomBytes(4).toString('hex')}`;
    const schema = uniqueSchema();
    await asSuperuser(async (c) => {
      await c.query(`CREATE ROLE ${unused} NOLOGIN`);
      await c.query(`CREATE ROLE ${used} NOLOGIN`);
      await c.query(`CREATE SCHEMA ${schema}`);
      await c.query(`GRANT USAGE ON SCHEMA ${schema} TO ${used}`);
    });
    try {
      expect(await dropUnusedRoles(directDatabaseUrl(), [unused, used])).toEqual([unused]);
      expect(await existingRoles(directDatabaseUrl(), [unused, used])).toEqual([used]);
      // Once its schema is gone, it goes too.
      await dropSchema(schema);
      expect(await dropUnusedRoles(directDatabaseUrl(), [used])).toEqual([used]);
      expect(await existingRoles(directDatabaseUrl(), [unused, used])).toEqual([]);
    } finally {
      await dropSchema(schema);
      await asSuperuser((c) => c.query(`DROP ROLE IF EXISTS ${unused}, ${used}`));
    }
  });
});
