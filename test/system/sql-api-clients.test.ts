import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Leasehold } from '../../src/index.js';
import { showOutputOnFailure } from '../support/child-output.js';
import { migratedClient, waitFor } from '../support/db.js';
import { createLogin, type Login, schemaRole } from '../support/roles.js';
import { started } from '../support/worker.js';

// The stable SQL API (docs/sql-api.md) from outside Node, as a producer in another language calls
// it: psql (Debian's postgresql-client) and Python with psycopg 3 (Debian's python3-psycopg, for the
// system's own Python, /usr/bin/python3), each logged in with only <schema>_producer; a Node worker
// runs what they committed. scripts/require-system-packages.mjs refuses to start the suite without
// either.
const PYTHON = '/usr/bin/python3';
const run = promisify(execFile);

let lh: Leasehold;
let login: Login;
const seen: unknown[] = [];

beforeAll(async () => {
  lh = await migratedClient();
  login = await createLogin([schemaRole(lh.schema, 'producer')]);
});

/** Runs `file` with `args` (and `input` on stdin); its output, printed if the test fails. */
async function runChild(
  file: string,
  args: string[],
  env: Record<string, string> = {},
  input?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let result = { code: -1, stdout: '', stderr: '' };
  showOutputOnFailure(`${file} ${args[0] ?? ''}`, () => result);
  const child = run(file, args, { env: { ...process.env, ...env }, timeout: 60_000 });
  if (input !== undefined) child.child.stdin?.end(input);
  try {
    const { stdout, stderr } = await child;
    result = { code: 0, stdout, stderr };
  } catch (err) {
    const { code, stdout, stderr } = err as { code?: number; stdout?: string; stderr?: string };
    result = { code: typeof code === 'number' ? code : -1, stdout: stdout ?? '', stderr: stderr ?? '' };
  }
  return result;
}

/** Runs a worker on `queue` until every job of `ids` succeeded, recording the payloads it saw. */
async function runWorkerUntil(queue: string, ids: string[]): Promise<void> {
  const worker = await started(
    lh.worker({
      queues: {
        [queue]: async (job) => {
          seen.push(job.payload);
        },
      },
      pollIntervalMs: 50,
    }),
  );
  for (const id of ids) {
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: `job ${id}` });
  }
  await worker.stop();
}

describe('the SQL API from psql', () => {
  it('enqueues one and many in a transaction, reads their status, and refuses a mistyped option', async () => {
    const s = `"${lh.schema}"`;
    const script = `\\set ON_ERROR_STOP on
BEGIN;
SELECT ${s}.enqueue('psql-q', '{"from": "psql"}', '{"priority": 4, "maxAttempts": 2}');
SELECT array_to_string(${s}.enqueue_many('psql-q', '[{"n": 1}, {"n": 2}]'), ',');
COMMIT;
`;
    const out = await runChild('psql', ['-X', '-At', login.url], {}, script);
    expect(out.code, out.stderr).toBe(0);
    const [one, many] = out.stdout
      .trim()
      .split('\n')
      .filter((line) => /^[0-9,]+$/.test(line));
    const ids = [one as string, ...(many as string).split(',')];
    expect(await lh.getJob(ids[0]!)).toMatchObject({
      priority: 4,
      maxAttempts: 2,
      payload: { from: 'psql' },
    });
    const status = await runChild('psql', [
      '-X',
      '-At',
      login.url,
      '-c',
      `SELECT ${s}.job_status(${ids[1]})`,
    ]);
    expect(status.stdout.trim()).toBe('pending');

    const refused = await runChild('psql', [
      '-X',
      '-At',
      '-v',
      'ON_ERROR_STOP=1',
      login.url,
      '-c',
      `SELECT ${s}.enqueue('psql-q', '{}', '{"priorty": 1}')`,
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      /ERROR: {2}leasehold: options\.priorty: is not an option \(did you mean priority\?\)/,
    );

    await runWorkerUntil('psql-q', ids);
    expect(seen).toEqual(expect.arrayContaining([{ from: 'psql' }, { n: 1 }, { n: 2 }]));
  });
});

const PYTHON_PRODUCER = `
import json, os, psycopg
from psycopg import errors, sql
from psycopg.types.json import Jsonb

schema = os.environ['LH_SCHEMA']
def fn(name):
    return sql.SQL('{}.{}').format(sql.Identifier(schema), sql.Identifier(name))

out = {}
with psycopg.connect(os.environ['LH_URL']) as conn:
    # psycopg opens a transaction at the first statement: rolled back, then one committed.
    row = conn.execute(sql.SQL('SELECT {}(%s, %s)').format(fn('enqueue')), ['py-q', Jsonb({'n': 'rolled back'})]).fetchone()
    out['rolled_back'] = str(row[0])
    conn.rollback()
    row = conn.execute(sql.SQL('SELECT {}(%s, %s, %s)').format(fn('enqueue')),
                       ['py-q', Jsonb({'n': 'committed'}), Jsonb({'priority': 9, 'idempotencyKey': 'py-1'})]).fetchone()
    out['committed'] = str(row[0])
    again = conn.execute(sql.SQL('SELECT {}(%s, %s, %s)').format(fn('enqueue')),
                         ['py-q', Jsonb({'n': 'again'}), Jsonb({'idempotencyKey': 'py-1'})]).fetchone()
    out['again'] = str(again[0])
    conn.commit()
    try:
        conn.execute(sql.SQL('SELECT {}(%s, %s, %s)').format(fn('enqueue')), ['py-q', Jsonb({}), Jsonb({'priority': 5.5})])
    except errors.InvalidParameterValue as err:
        out['refused'] = {'sqlstate': err.sqlstate, 'message': err.diag.message_primary}
        conn.rollback()
    out['status_rolled_back'] = conn.execute(sql.SQL('SELECT {}(%s)').format(fn('job_status')), [int(out['rolled_back'])]).fetchone()[0]
    out['status_committed'] = conn.execute(sql.SQL('SELECT {}(%s)').format(fn('job_status')), [int(out['committed'])]).fetchone()[0]
print(json.dumps(out))
`;

describe('the SQL API from Python (psycopg)', () => {
  it('a job enqueued in a rolled-back transaction does not exist; one committed is run by a Node worker', async () => {
    const out = await runChild(PYTHON, ['-c', PYTHON_PRODUCER], { LH_URL: login.url, LH_SCHEMA: lh.schema });
    expect(out.code, out.stderr).toBe(0);
    const result = JSON.parse(out.stdout.trim()) as Record<string, unknown>;
    expect(result).toMatchObject({
      again: result.committed,
      status_rolled_back: null,
      status_committed: 'pending',
      refused: {
        sqlstate: '22023',
        message: 'leasehold: options.priority: must be an integer from -1000000 to 1000000 (got 5.5)',
      },
    });
    expect(await lh.getJob(result.rolled_back as string)).toBeNull();
    expect(await lh.getJob(result.committed as string)).toMatchObject({ priority: 9, status: 'pending' });

    await runWorkerUntil('py-q', [result.committed as string]);
    expect(seen).toContainEqual({ n: 'committed' });
    expect(seen).not.toContainEqual({ n: 'rolled back' });
    expect(seen).not.toContainEqual({ n: 'again' });
  });
});
