// The enqueue module: (nothing) -> pending, for one job or a batch, plain, keyed, ordered or
// deduplicated. Its folder, storage/enqueue/, holds the parts: fields.ts (the validated job),
// fragments.ts (the named SQL fragments and the one column list), statements.ts and dedupe.ts (the
// statements composed from them), write-transaction.ts. This file is the module's face, and
// chooseInsert below is the one place where a batch's statement is chosen.
import { randomUUID } from 'node:crypto';
import { type Queryable, run, type Statement } from '../db.js';
import { runLaneRouted } from '../roles/lane-routing.js';
import { type DedupeOutcome, JobInsertDeduped, type NewDedupedJob } from './enqueue/dedupe.js';
import { batchColumns, hasFairnessKey, type NewJob } from './enqueue/fields.js';
import {
  JobInsert,
  JobInsertKeyed,
  JobInsertKeyedFair,
  JobInsertMany,
  JobInsertManyFair,
  JobInsertManyFairQuiet,
  JobInsertManyQuiet,
  JobInsertManyUniform,
  JobInsertManyUniformBefore027,
  JobInsertManyUniformBefore027Quiet,
  JobInsertManyUniformQuiet,
  JobInsertOrdered,
  JobInsertOrderedFair,
  JobInsertQuiet,
  WakeupNotify,
} from './enqueue/statements.js';

export type { DedupeMode, DedupeOutcome, NewDedupedJob } from './enqueue/dedupe.js';
/** The dedupe statement (for the definer functions). */
export { JobInsertDeduped } from './enqueue/dedupe.js';
export { batchColumns, hasFairnessKey, type NewJob } from './enqueue/fields.js';
/** The ordering key take, shared with the scheduler's ScheduleFire. */
export { TAKE_KEY } from './enqueue/fragments.js';
export {
  JobInsert,
  JobInsertKeyed,
  JobInsertKeyedFair,
  JobInsertMany,
  JobInsertManyFair,
  JobInsertManyFairQuiet,
  JobInsertManyQuiet,
  JobInsertManyUniform,
  JobInsertManyUniformQuiet,
  JobInsertOrdered,
  JobInsertOrderedFair,
  JobInsertQuiet,
} from './enqueue/statements.js';
/** A read-committed transaction for a deduplicated batch run again. */
export { inWriteTransaction } from './enqueue/write-transaction.js';

/** The NOTIFY channel of a schema. Notifications carry only a queue name, never job data. */
export function wakeupChannel(schema: string): string {
  return `${schema}_wakeup`;
}

/** Wakes the listeners of `queue` (its own transaction). */
export async function notifyQueue(db: Queryable, schema: string, queue: string): Promise<void> {
  await run(db, WakeupNotify(schema), [wakeupChannel(schema), queue]);
}

/** A batch to insert, by what its jobs carry beyond their own fields. */
export type InsertBatch =
  /** One job without keys: the single-row statement. */
  | { kind: 'one'; job: NewJob }
  /** Jobs without ordering, idempotency or dedupe keys. */
  | { kind: 'plain'; jobs: readonly NewJob[] }
  /** Jobs each with an idempotency key (keys[i] for jobs[i], each key once). */
  | { kind: 'keyed'; jobs: readonly NewJob[]; keys: readonly string[] }
  /** Jobs some of which have ordering keys. */
  | { kind: 'ordered'; jobs: readonly NewJob[] }
  /** Jobs some of which have dedupe keys (each key once). */
  | { kind: 'deduped'; jobs: readonly NewDedupedJob[] };

/** True when every job of the batch is claimable now with the first one's priority and attempt budget, without a key. */
function isUniform(jobs: readonly NewJob[]): boolean {
  const first = jobs[0];
  if (!first) return false;
  for (const job of jobs) {
    if (
      job.runAt !== null ||
      job.delayMs !== 0 ||
      job.concurrencyKey !== null ||
      hasFairnessKey(job) ||
      job.priority !== first.priority ||
      job.maxAttempts !== first.maxAttempts
    ) {
      return false;
    }
  }
  return true;
}

/**
 * A batch's statement and parameters; `before027`, for a statement that names columns a schema
 * before 018 or 027 lacks (the uniform batch's lane and identities), the twin that runs there
 * instead (runLaneRouted) and its own parameters.
 */
export interface ChosenInsert {
  statement: Statement;
  values: unknown[];
  before027?: { statement: Statement; values: unknown[] };
}

/**
 * The statement a batch runs and its parameters: the one place the choice is made. A plain job pays
 * for nothing it does not carry: no key rows, no ids drawn ahead, no fairness column unless a job
 * has a fairness key, and a uniform batch sends its payloads alone. `notify: false` (plain batches
 * only) leaves the wake-up to the caller; keyed and ordered batches always notify.
 */
export function chooseInsert(
  schema: string,
  queue: string,
  batch: InsertBatch,
  notify: boolean,
): ChosenInsert {
  const channel = wakeupChannel(schema);
  if (batch.kind === 'one') {
    const { job } = batch;
    // With a fairness key, the batch insert that names the column (the single-row one does not).
    if (hasFairnessKey(job)) return chooseInsert(schema, queue, { kind: 'plain', jobs: [job] }, notify);
    const own = [queue, job.payloadJson, job.priority, job.runAt, job.delayMs, job.maxAttempts];
    return notify
      ? { statement: JobInsert(schema), values: [...own, channel, job.concurrencyKey] }
      : { statement: JobInsertQuiet(schema), values: [...own, job.concurrencyKey] };
  }
  if (batch.kind === 'deduped') {
    const { jobs } = batch;
    return {
      statement: JobInsertDeduped(schema),
      values: [
        queue,
        ...batchColumns(jobs),
        channel,
        jobs.map((job) => job.orderingKey),
        jobs.map((job) => job.concurrencyKey),
        jobs.map((job) => job.dedupeKey),
        jobs.map((job) => job.mode),
        jobs.map((job) => job.windowMs),
        jobs.map((job) => job.folded),
        notify,
      ],
    };
  }
  const { jobs } = batch;
  const fair = jobs.some(hasFairnessKey);
  const fairnessKeys = fair ? [jobs.map((job) => job.fairnessKey ?? null)] : [];
  const concurrencyKeys = jobs.map((job) => job.concurrencyKey);
  if (batch.kind === 'keyed') {
    return {
      statement: (fair ? JobInsertKeyedFair : JobInsertKeyed)(schema),
      values: [queue, ...batchColumns(jobs), channel, batch.keys, concurrencyKeys, ...fairnessKeys],
    };
  }
  if (batch.kind === 'ordered') {
    return {
      statement: (fair ? JobInsertOrderedFair : JobInsertOrdered)(schema),
      values: [
        queue,
        ...batchColumns(jobs),
        channel,
        jobs.map((job) => job.orderingKey),
        concurrencyKeys,
        ...fairnessKeys,
      ],
    };
  }
  if (isUniform(jobs)) {
    const first = jobs[0] as NewJob;
    const own = [
      queue,
      `[${jobs.map((job) => job.payloadJson).join(',')}]`,
      first.priority,
      first.maxAttempts,
    ];
    return {
      statement: (notify ? JobInsertManyUniform : JobInsertManyUniformQuiet)(schema),
      values: [...own, channel, jobUids(jobs.length)],
      before027: {
        statement: (notify ? JobInsertManyUniformBefore027 : JobInsertManyUniformBefore027Quiet)(schema),
        values: [...own, channel],
      },
    };
  }
  const many = fair
    ? notify
      ? JobInsertManyFair
      : JobInsertManyFairQuiet
    : notify
      ? JobInsertMany
      : JobInsertManyQuiet;
  return {
    statement: many(schema),
    values: [queue, ...batchColumns(jobs), channel, concurrencyKeys, ...fairnessKeys],
  };
}

/** Inserts one job; returns its id. `notify: false` leaves the wake-up to the caller. */
export async function insertJob(
  db: Queryable,
  schema: string,
  queue: string,
  job: NewJob,
  { notify = true }: { notify?: boolean } = {},
): Promise<string> {
  const { statement, values } = chooseInsert(schema, queue, { kind: 'one', job }, notify);
  const row = (await run<{ id?: string } & IdsRow>(db, statement, values))[0];
  return (row?.id ?? readIds(row)[0]) as string;
}

/**
 * Inserts many jobs of one queue in one statement (all or nothing); returns ids in input order.
 * `notify: false` leaves the wake-up to the caller.
 */
export async function insertJobs(
  db: Queryable,
  schema: string,
  queue: string,
  jobs: readonly NewJob[],
  { notify = true }: { notify?: boolean } = {},
): Promise<string[]> {
  const { statement, values, before027 } = chooseInsert(schema, queue, { kind: 'plain', jobs }, notify);
  const rows = before027
    ? await runLaneRouted<IdsRow>(db, schema, statement, before027.statement, values, before027.values)
    : await run<IdsRow>(db, statement, values);
  return readIds(rows[0]);
}

/**
 * `n` random job identities (migration 027) as one uuid[] literal, drawn here rather than by the
 * column's default: crypto.randomUUID takes its randomness from a pooled buffer, where the
 * server's gen_random_uuid() asks the system for 16 bytes per row.
 */
function jobUids(n: number): string {
  const uids = new Array<string>(n);
  for (let i = 0; i < n; i++) uids[i] = randomUUID();
  return `{${uids.join(',')}}`;
}

/** A batch's answer: its ids, or (firstIdAnswer) its first id and count when they are consecutive. */
interface IdsRow {
  ids: string[] | null;
  first_id?: string | null;
  n?: number;
}

/** The ids of a batch's answer, in input order. */
export function readIds(row: IdsRow | undefined): string[] {
  if (!row) return [];
  if (row.ids) return row.ids;
  const n = row.n ?? 0;
  if (n === 0 || row.first_id === null || row.first_id === undefined) return [];
  const ids = new Array<string>(n);
  const first = Number(row.first_id);
  if (Number.isSafeInteger(first + n)) {
    for (let i = 0; i < n; i++) ids[i] = String(first + i);
  } else {
    const big = BigInt(row.first_id);
    for (let i = 0; i < n; i++) ids[i] = String(big + BigInt(i));
  }
  return ids;
}

/** Inserts jobs of one queue, some with ordering keys, in one statement; ids in input order. */
export async function insertOrderedJobs(
  db: Queryable,
  schema: string,
  queue: string,
  jobs: readonly NewJob[],
): Promise<string[]> {
  const { statement, values } = chooseInsert(schema, queue, { kind: 'ordered', jobs }, true);
  const rows = await run<{ ids: string[] }>(db, statement, values);
  return rows[0]?.ids ?? [];
}

/**
 * Inserts each job unless its idempotency key (keys[i], each key once) is taken; answers, in input
 * order, the id of the job holding each key and whether this statement created it.
 */
export async function insertKeyedJobs(
  db: Queryable,
  schema: string,
  queue: string,
  jobs: readonly NewJob[],
  keys: readonly string[],
): Promise<{ id: string; created: boolean }[]> {
  const { statement, values } = chooseInsert(schema, queue, { kind: 'keyed', jobs, keys }, true);
  const rows = await run<{ id: string; created: boolean }>(db, statement, values);
  return rows.map((row) => ({ id: row.id, created: row.created }));
}

/** Inserts a job unless its key is taken; returns the id of the job holding the key. */
export async function insertKeyedJob(
  db: Queryable,
  schema: string,
  queue: string,
  job: NewJob,
  key: string,
): Promise<{ id: string; created: boolean }> {
  return (await insertKeyedJobs(db, schema, queue, [job], [key]))[0] as { id: string; created: boolean };
}

/** One item's answer: the job it resolved to (null when `stale`), and, for `replaced`, the cancelled job. */
export interface DedupedRow {
  id: string | null;
  outcome: DedupeOutcome;
  cancelledId: string | null;
}

/**
 * Runs JobInsertDeduped for `jobs` of `queue` (each key at most once); answers in input order.
 * Items answered `stale` wrote nothing and must be run again (a new statement sees the commit).
 * `notify: false` leaves the wake-up to the caller.
 */
export async function insertDedupedJobs(
  db: Queryable,
  schema: string,
  queue: string,
  jobs: readonly NewDedupedJob[],
  { notify = true }: { notify?: boolean } = {},
): Promise<DedupedRow[]> {
  const { statement, values } = chooseInsert(schema, queue, { kind: 'deduped', jobs }, notify);
  const rows = await run<{ id: string | null; outcome: DedupeOutcome; cancelled_id: string | null }>(
    db,
    statement,
    values,
  );
  return rows.map((row) => ({ id: row.id, outcome: row.outcome, cancelledId: row.cancelled_id }));
}
