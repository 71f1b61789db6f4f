import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Server, startServer, startStandby } from '../../chaos/server.mjs';
import { type Lease, Leasehold } from '../../src/index.js';
import { waitFor } from '../support/db.js';

/**
 * A primary and a streaming standby of its own (the embedded binaries; the standby is a cold copy
 * of the primary's folder, see chaos/server.mjs), and an asynchronous failover whose last claim
 * never reached the standby. The promoted standby then knows the job as it was before that claim,
 * and reissues the same token number to the next claimer. The token alone cannot tell the two
 * holders apart: this is why every claim also gets a random claim id, which heartbeat, completion
 * and failure must present. The old holder's writes reach the new primary (its client follows the
 * host list) and must change nothing there, and be counted.
 * The full-size run of this (50,000 jobs, both replication modes) is `npm run chaos:failover`.
 */
let primary: Server;
let standby: Server;
const clients: Leasehold[] = [];
const QUEUE = 'failover-pin';
// Both holders use one owner name (a worker restarted under its name, or two processes sharing
// one): neither the token nor the owner then tells them apart, only the claim id.
const OWNER = 'worker-1';

beforeAll(async () => {
  const options = {
    initdbArgs: ['--username=postgres', '--auth=trust', '--encoding=UTF8', '--no-locale', '--no-sync'],
    env: { LC_ALL: 'C' },
    tempPrefix: 'leasehold-failover-pin-',
    timeoutMs: 60_000,
  };
  // fsync off: the killed primary is never started again, so nothing relies on its files.
  primary = await startServer(
    { unix_socket_directories: "''", max_connections: '30', fsync: 'off', wal_keep_size: "'64MB'" },
    options,
  );
  standby = await startStandby(primary, { name: 'pin_standby' });
});

afterAll(async () => {
  for (const lh of clients.splice(0)) await lh.close().catch(() => {});
  await standby?.destroy('immediate');
  await primary?.destroy('immediate');
});

// Both servers in libpq's multi-host form, the primary first: the client finds the writable one.
function client(): Leasehold {
  const url = `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/postgres?target_session_attrs=read-write`;
  const lh = new Leasehold({ connectionString: url, poolSize: 2, listen: false, connectTimeoutMs: 2000 });
  lh.pool.on('error', () => {}); // the killed primary's idle connections report here
  clients.push(lh);
  return lh;
}

async function onServer<T>(server: Server, run: (db: pg.Client) => Promise<T>): Promise<T> {
  const db = new pg.Client({ connectionString: server.connectionString });
  await db.connect();
  try {
    return await run(db);
  } finally {
    await db.end();
  }
}

// The job as the standby has replayed it (a hot standby answers reads).
function onStandby(jobId: string): Promise<{ status: string; lease_token: string } | undefined> {
  return onServer(standby, async (db) => {
    const { rows } = await db.query<{ status: string; lease_token: string }>(
      'SELECT status, lease_token::text FROM leasehold.jobs WHERE id = $1',
      [jobId],
    );
    return rows[0];
  });
}

describe('failover to a standby that missed the last claim', () => {
  it("the old holder's heartbeat, completion and failure are refused on the new primary, though its token number is reissued", async () => {
    const a = client();
    await a.migrate();
    const { id } = await a.enqueue(QUEUE, { n: 1 });

    // Everything so far is on the standby: wait until it has replayed the primary's WAL position.
    const lsn = await onServer(
      primary,
      async (db) => (await db.query('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn,
    );
    await waitFor(
      () =>
        onServer(standby, async (db) => {
          const { rows } = await db.query('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up', [
            lsn,
          ]);
          return rows[0].caught_up === true;
        }),
      { what: 'the standby to replay the enqueue' },
    );
    expect((await onStandby(id))?.status).toBe('pending');

    // Cut replication: with no primary_conninfo the standby stops its WAL receiver, and the claim
    // below stays on the primary alone, as a claim in an asynchronous standby's lag window does.
    await onServer(standby, async (db) => {
      await db.query(`ALTER SYSTEM SET primary_conninfo = ''`);
      await db.query('SELECT pg_reload_conf()');
    });
    await waitFor(
      () =>
        onServer(primary, async (db) => {
          const { rows } = await db.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM pg_stat_replication',
          );
          return rows[0]?.n === 0;
        }),
      { what: 'the walsender to go' },
    );

    const [leaseA] = await a.claim({ queue: QUEUE, owner: OWNER, leaseMs: 60_000 });
    expect(leaseA?.jobId).toBe(id);
    const heldByA = leaseA as Lease;
    expect((await onStandby(id))?.status).toBe('pending'); // the claim did not reach the standby

    // The old primary dies with every process at once; the standby takes over.
    await primary.kill();
    await standby.promote();

    const b = client();
    const [leaseB] = await b.claim({ queue: QUEUE, owner: OWNER, leaseMs: 60_000 });
    expect(leaseB?.jobId).toBe(id);
    const heldByB = leaseB as Lease;
    // The same token number, reissued by the new primary: only the claim id tells A from B.
    expect(heldByB.token).toBe(heldByA.token);
    expect(heldByB.claimId).not.toBe(heldByA.claimId);

    // A's client still holds connections to the dead primary: the first call that meets one fails
    // and sends the client through the host list, to the new primary.
    await waitFor(
      () =>
        a.getJob(id).then(
          (job) => job !== null,
          () => false,
        ),
      { what: "A's client to reach the new primary" },
    );
    const before = await b.getJob(id);
    // A asks for a lease ten times longer than B's: accepted, it would move the expiry.
    expect(await a.heartbeat(heldByA, { leaseMs: 600_000 })).toBe(false);
    expect(await a.complete(heldByA)).toBe(false);
    expect(await a.fail(heldByA, new Error('late failure'))).toBe('lost');

    // Nothing changed: B still holds the job with its lease, and each refusal was counted.
    const during = await b.getJob(id, { history: true });
    expect(during?.status).toBe('running');
    expect(during?.leaseToken).toBe(heldByB.token);
    expect(during?.attemptCount).toBe(1);
    expect(during?.leaseExpiresAt).toEqual(before?.leaseExpiresAt);
    const refused = (await b.leaseRefusals())
      .filter((r) => r.queue === QUEUE)
      .map((r) => [r.operation, r.count])
      .sort();
    expect(refused).toEqual([
      ['complete', 1],
      ['fail', 1],
      ['heartbeat', 1],
    ]);
    const refusedEntries = (during?.history ?? []).filter((e) => e.kind === 'refused');
    expect(refusedEntries.map((e) => `${e.operation} ${e.owner} ${e.token}`).sort()).toEqual(
      ['complete', 'fail', 'heartbeat'].map((op) => `${op} ${OWNER} ${heldByA.token}`),
    );

    expect(await b.complete(heldByB)).toBe(true);
    const after = await b.getJob(id);
    expect(after?.status).toBe('succeeded');
    expect(after?.leaseToken).toBe(heldByB.token);
  });
});
