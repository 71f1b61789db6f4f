import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import { directDatabaseUrl } from '../support/db.js';

// CVE-2018-1058: whoever may create objects in a schema on a connection's search_path can shadow
// what an unqualified name resolves to. An exact-type match beats pg_catalog's polymorphic one
// (unnest(anyarray), anyenum = anyenum), and a search_path that lists public before pg_catalog
// hands over even now(). Here such objects are planted in public, in a database of this file's own,
// with the most exposed setting (public first), and every statement the library runs must still
// reach pg_catalog's objects: its connections pin their search_path.

const name = `lh_search_path_${randomBytes(5).toString('hex')}`;
const schema = 'lh_sp';
let url = '';
let lh: Leasehold;

async function onDatabase<T>(target: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: target });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  await onDatabase(directDatabaseUrl(), (c) => c.query(`CREATE DATABASE "${name}"`));
  const parsed = new URL(directDatabaseUrl());
  parsed.pathname = `/${name}`;
  url = parsed.toString();
  // Migrate first (the types must exist to be shadowed), then plant, then use.
  const migrator = new Leasehold({ connectionString: url, schema });
  await migrator.migrate();
  await migrator.close();
  await onDatabase(url, async (c) => {
    await c.query(`
      CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'hijacked: public.unnest'; END $$;
      CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'hijacked: public.now'; END $$;
      CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'hijacked: public.pg_notify'; END $$;
      CREATE FUNCTION public.status_eq(${schema}.job_status, ${schema}.job_status) RETURNS boolean
        LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'hijacked: public.='; END $$;
      CREATE OPERATOR public.= (LEFTARG = ${schema}.job_status, RIGHTARG = ${schema}.job_status,
                                FUNCTION = public.status_eq);
      ALTER DATABASE "${name}" SET search_path = public, pg_catalog;`);
  });
  // This file connects to the server itself, never through the suite's pooler: the client is told
  // so, as an operator's would be (under LEASEHOLD_POOLER=transaction the role's setting pins it).
  const pooler = process.env.LEASEHOLD_POOLER;
  delete process.env.LEASEHOLD_POOLER;
  try {
    lh = new Leasehold({ connectionString: url, schema, listen: false });
  } finally {
    if (pooler !== undefined) process.env.LEASEHOLD_POOLER = pooler;
  }
}, 60_000);

afterAll(async () => {
  await lh?.close();
  await onDatabase(directDatabaseUrl(), (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
});

describe('a hostile public schema (CVE-2018-1058)', () => {
  it('is live: a plain session on that database resolves the planted objects', async () => {
    await expect(onDatabase(url, (c) => c.query('SELECT now()'))).rejects.toThrow(/hijacked: public\.now/);
    await expect(
      onDatabase(url, (c) => c.query('SELECT * FROM unnest($1::bigint[])', [[1]])),
    ).rejects.toThrow(/hijacked: public\.unnest/);
  });

  it('cannot shadow now(), unnest, pg_notify or = in what the library runs', async () => {
    const { ids } = await lh.enqueueMany('sp', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    expect(ids).toHaveLength(3);
    const leases = await lh.claim({ queue: 'sp', owner: 'w', limit: 3 });
    expect(leases).toHaveLength(3);
    expect(await lh.heartbeat(leases[0]!)).toBe(true);
    expect(await lh.completeMany(leases.slice(0, 2))).toEqual(new Set([leases[0]!.jobId, leases[1]!.jobId]));
    expect(await lh.fail(leases[2]!, new Error('x'), { retryable: true })).toBe('retry');
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 0 });
    expect((await lh.getJob(ids[0]!, { history: true }))?.status).toBe('succeeded');
    expect((await lh.stats()).queues.map((q) => q.queue)).toEqual(['sp']);
  });

  it('stays pinned when the URL carries startup options of its own, which still apply', async () => {
    // pg lets a URL's `options` replace the options a client adds at connect: the pinned path
    // was lost until the library took the URL's options out and put its own after them.
    const withOptions = new URL(url);
    withOptions.searchParams.set('options', '-c work_mem=4321kB -c search_path=public');
    const pooler = process.env.LEASEHOLD_POOLER;
    delete process.env.LEASEHOLD_POOLER;
    let client: Leasehold;
    try {
      client = new Leasehold({ connectionString: withOptions.toString(), schema, listen: false });
    } finally {
      if (pooler !== undefined) process.env.LEASEHOLD_POOLER = pooler;
    }
    try {
      const { rows } = await client.pool.query<{
        path: string;
        work_mem: string;
        seqscan: string;
        jit: string;
        plans: string;
      }>(
        'SELECT current_setting($1) AS path, current_setting($2) AS work_mem, current_setting($3) AS seqscan, current_setting($4) AS jit, current_setting($5) AS plans',
        ['search_path', 'work_mem', 'enable_seqscan', 'jit', 'plan_cache_mode'],
      );
      // The lanes' planner setting applies too, JIT is off with it, and prepared statements keep
      // their generic plan (see INDEX_PLANS_OPTION).
      expect(rows[0]).toEqual({
        path: 'pg_catalog,pg_temp',
        work_mem: '4321kB',
        seqscan: 'off',
        jit: 'off',
        plans: 'force_generic_plan',
      });
      const { ids } = await client.enqueueMany('sp-options', [{ payload: 1 }]);
      const [lease] = await client.claim({ queue: 'sp-options', owner: 'w' });
      expect(lease?.jobId).toBe(ids[0]);
      expect(await client.complete(lease!)).toBe(true);
    } finally {
      await client.close();
    }
  });
});
