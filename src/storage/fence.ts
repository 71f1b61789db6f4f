/**
 * The fence: the one condition every lease-holding write must pass, and the shared parts of the
 * batched fenced statements (the `input` arrays, the `fenced` CTE). Refused writes are counted by
 * `refusals.ts`.
 */

/**
 * The fence every lease-holding write must pass: same claim (token and random claim id), same
 * owner, lease not yet lapsed. The claim id keeps a token number reissued after a failover from
 * matching an older claim (see migration 005).
 * `status::text` is deliberate: written as `status = 'running'` the condition matches the
 * predicate of jobs_expired_lease_idx, and once a prepared statement switches to its generic plan
 * (which guesses 10 rows for the batch) the planner drove the join from that index, rescanning
 * the whole batch for every running job: 500 completions with 2,000 leases held took 160 ms
 * instead of 5. Hidden from the partial index, the batch drives primary-key lookups in every plan.
 */
export const LEASE_FENCE = `j.id = input.id
    AND j.status::text = 'running'
    AND j.lease_owner = input.owner
    AND j.lease_token = input.token
    AND j.lease_claim_id = input.claim_id
    AND j.lease_expires_at > now()`;

/**
 * The `fenced` CTE of a batched fenced statement: the jobs of `input` whose lease is still the
 * presented one, each locked FOR UPDATE, with every `input` column. The statement then changes
 * exactly these rows by primary key.
 * Why a LATERAL probe per input row rather than a join of input and jobs on the fence: joined, the
 * planner costs the fence from the statistics of jobs, and statistics analysed while every job was
 * pending promise about one running job. It then drove the join from jobs and rescanned the batch
 * for every row (70 ms for 500 completions instead of 4). The row lock keeps the LATERAL subquery
 * from being flattened into a join, so the batch always drives one primary-key probe per lease.
 * Locking here, in READ COMMITTED, re-checks the fence on the newest version of a row a concurrent
 * transaction changed, and holds the row until commit, so the write that follows needs no fence.
 * Rows are locked in id order (the sorted subquery is kept apart by OFFSET 0, and the nested loop
 * keeps its order), so two fenced statements over the same leases, say a heartbeat and the
 * completion of the same jobs, wait for each other instead of deadlocking.
 * With `withLane`, each fenced row comes with the lane it was found and locked in (`lane`), so that
 * the write that follows may go to that lane alone (lane-routing.ts): a locked row cannot move
 * before the statement ends.
 * `queueParam` (a scalar parameter, `$8`) names the one queue of the batch: the probe is then
 * restricted to it, so a layout that splits jobs by queue (partitions, Citus shards, clusters; see
 * docs/scaling.md) is reached in that queue's part only. It routes, it does not fence: a job never
 * changes queue, and a lease's queue is the one it was claimed from (callers group by it, see
 * `byQueue`).
 */
export function fencedCte(s: string, withLane = false, queueParam?: string): string {
  return `fenced AS (
    SELECT input.*${withLane ? ', current_lease.lane' : ''}
    FROM (SELECT * FROM input ORDER BY id OFFSET 0) AS input
    CROSS JOIN LATERAL (
      SELECT ${withLane ? 'j.lane' : 'j.id'} FROM ${s}.jobs AS j
      WHERE ${LEASE_FENCE}${
        queueParam === undefined
          ? ''
          : `
        AND j.queue_name = ${queueParam}::text`
      }
      FOR UPDATE OF j
    ) AS current_lease
  )`;
}

/** A lease reference as the fenced statements take it. */
export interface FenceRef {
  jobId: string;
  token: string;
  claimId: string;
  owner: string;
  queue: string;
}

/**
 * The values of a statement that presents one lease as its first five parameters ($1 id, $2 token,
 * $3 claim id, $4 owner, $5 queue), as the effects ledger's and the durable steps' statements do.
 */
export function leaseValues(lease: FenceRef): unknown[] {
  return [lease.jobId, lease.token, lease.claimId, lease.owner, lease.queue];
}

/** One claim of one job, as a map key: its job id, token and claim id. */
export function leaseKey(ref: Pick<FenceRef, 'jobId' | 'token' | 'claimId'>): string {
  return `${ref.jobId}/${ref.token}/${ref.claimId}`;
}

/**
 * The `input` columns of a batched fenced statement, from its first five parameters (the arrays of
 * `fenceArrays`); `more` lists the statement's own columns, from $6 on, as `$6::type[]` pairs.
 */
export const FENCE_INPUT_ARRAYS = '$1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[]';
/** Column names matching FENCE_INPUT_ARRAYS. */
export const FENCE_INPUT_COLUMNS = 'id, token, claim_id, owner, queue_name';

/**
 * Lease references grouped by queue, in the order each queue first appears: a batched fenced
 * statement covers one queue (its scalar queue parameter), so that it can be answered from that
 * queue's part of a layout split by queue. A worker's batch is usually of one queue.
 */
export function byQueue<T extends Pick<FenceRef, 'queue'>>(refs: readonly T[]): T[][] {
  const groups = new Map<string, T[]>();
  for (const ref of refs) {
    const group = groups.get(ref.queue);
    if (group) group.push(ref);
    else groups.set(ref.queue, [ref]);
  }
  return [...groups.values()];
}

/**
 * Splits lease references into five parallel arrays: ids, tokens, claim ids, owners, queues ($1..$5
 * of a fenced statement), each sent as a PostgreSQL array literal built here in one pass. node-postgres
 * would build the same text element by element (two regular expressions and a string concatenation
 * per value): the largest single share of a no-op drain's allocations. A value that is not what a
 * lease holds (a non-decimal id or token) is sent as a plain array instead, for the server to refuse.
 */
export function fenceArrays(
  refs: readonly FenceRef[],
): [string | string[], string | string[], string | string[], string, string] {
  const ids: string[] = [];
  const tokens: string[] = [];
  const claimIds: string[] = [];
  const owners: string[] = [];
  const queues: string[] = [];
  for (const ref of refs) {
    ids.push(ref.jobId);
    tokens.push(ref.token);
    claimIds.push(ref.claimId);
    owners.push(ref.owner);
    queues.push(ref.queue);
  }
  return [
    bigintArrayLiteral(ids),
    bigintArrayLiteral(tokens),
    bigintArrayLiteral(claimIds),
    textArrayLiteral(owners),
    textArrayLiteral(queues),
  ];
}

const DECIMAL_BIGINT = /^-?[0-9]{1,19}$/;

/** `{1,2,3}` for decimal integer strings; the array itself when one is not (node-postgres quotes it). */
export function bigintArrayLiteral(values: readonly string[]): string | string[] {
  for (const value of values)
    if (typeof value !== 'string' || !DECIMAL_BIGINT.test(value)) return [...values];
  return `{${values.join(',')}}`;
}

/**
 * `{"a","b"}`: every element double-quoted (null as NULL), with backslashes and double quotes escaped, as
 * array_in reads them (so commas, braces, spaces and the word NULL stay plain text). Runs of one
 * value (a batch's owner and queue) are quoted once.
 */
export function textArrayLiteral(values: readonly string[]): string {
  let last: string | undefined;
  let lastQuoted = '';
  const quoted = values.map((value) => {
    if (value === null || value === undefined) return 'NULL';
    if (value !== last) {
      last = value;
      lastQuoted = `"${String(value).replace(/[\\"]/g, '\\$&')}"`;
    }
    return lastQuoted;
  });
  return `{${quoted.join(',')}}`;
}
