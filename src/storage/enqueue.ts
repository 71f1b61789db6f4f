import { defineStatement, type Queryable, run } from './db.js';

/** The NOTIFY channel of a schema. Notifications carry only a queue name, never job data. */
export function wakeupChannel(schema: string): string {
  return `${schema}_wakeup`;
}

/**
 * JobInsert: (nothing) -> pending.
 * Inserts one job and, in the same statement and so the same transaction, notifies listeners of
 * its queue; PostgreSQL delivers the notification only on commit and folds duplicates within one
 * transaction, so a transaction wakes each queue at most once.
 */
export const JobInsert = defineStatement(
  'enqueue_one',
  (s) => `
  WITH inserted AS (
    INSERT INTO ${s}.jobs (queue_name, payload, priority, available_at, max_attempts, concurrency_key)
    VALUES ($1, $2::jsonb, $3, coalesce($4::timestamptz, now() + $5::double precision * interval '1 millisecond'), $6, $8)
    RETURNING id
  )
  SELECT inserted.id, pg_notify($7, $1)::text AS notified FROM inserted`,
);

/**
 * JobInsertQuiet: (nothing) -> pending, without a notification. Used by autocommit enqueues that
 * a coalesced wake-up will announce after they commit (see src/wakeup-coalescer.ts): a notifying
 * transaction takes a database-wide lock at commit, so notifying on every insert would keep
 * concurrent enqueues from sharing a WAL flush.
 */
export const JobInsertQuiet = defineStatement(
  'enqueue_one_quiet',
  (s) => `
  INSERT INTO ${s}.jobs (queue_name, payload, priority, available_at, max_attempts, concurrency_key)
  VALUES ($1, $2::jsonb, $3, coalesce($4::timestamptz, now() + $5::double precision * interval '1 millisecond'), $6, $7)
  RETURNING id`,
);

/** WakeupNotify: wakes the listeners of one queue, in its own (autocommit) transaction. */
const WakeupNotify = defineStatement('wakeup_notify', () => 'SELECT pg_notify($1, $2)');

/**
 * JobInsertMany: (nothing) -> pending, for a whole batch in one statement.
 * Every column travels as an array (payloads as JSON texts), zipped by a multi-argument unnest.
 * Ids come back in input order: unnest yields rows in array order, the insert draws identity
 * values in the order rows reach it, and nothing in between reorders them (no sort, no join, and
 * PostgreSQL never runs an INSERT in parallel). An explicit ORDER BY on the ordinality cost a sort
 * of every row with its payload, about a tenth of the statement; test/storage/enqueue.test.ts checks the
 * order.
 */
const insertManyText = (s: string, notify: boolean, fair = false) => `
  WITH inserted AS (
    INSERT INTO ${s}.jobs (queue_name, payload, priority, available_at, max_attempts, concurrency_key${fair ? ', fairness_key' : ''})
    SELECT $1, i.payload::jsonb, i.priority,
           coalesce(i.run_at, now() + i.delay_ms * interval '1 millisecond'), i.max_attempts, i.concurrency_key${fair ? ', i.fairness_key' : ''}
    FROM unnest($2::text[], $3::integer[], $4::timestamptz[], $5::double precision[], $6::integer[], $8::text[]${fair ? ', $9::text[]' : ''})
      AS i(payload, priority, run_at, delay_ms, max_attempts, concurrency_key${fair ? ', fairness_key' : ''})
    RETURNING id
  )
  SELECT array_agg(id ORDER BY id)::text[] AS ids${notify ? ', pg_notify($7, $1)::text AS notified' : ', $7::text IS NULL AS quiet'}
  FROM inserted`;
export const JobInsertMany = defineStatement('enqueue_many', (s) => insertManyText(s, true));

/** JobInsertManyQuiet: JobInsertMany without the notification, for coalesced wake-ups (as JobInsertQuiet). */
export const JobInsertManyQuiet = defineStatement('enqueue_many_quiet', (s) => insertManyText(s, false));

/**
 * JobInsertManyFair: JobInsertMany with each job's fairness key ($9, 022), for a batch (or a single
 * enqueue) where any job has one; jobs without a key get null. The other inserts do not name the
 * column, so enqueues without keys are unchanged.
 */
export const JobInsertManyFair = defineStatement('enqueue_many_fair', (s) => insertManyText(s, true, true));
/** JobInsertManyFair without the notification, for coalesced wake-ups. */
export const JobInsertManyFairQuiet = defineStatement('enqueue_many_fair_quiet', (s) =>
  insertManyText(s, false, true),
);

/**
 * JobInsertManyUniform: JobInsertMany for a uniform batch, the usual bulk load: every job claimable
 * now, with one priority ($3) and one attempt budget ($4), and no concurrency key. Only the payloads
 * travel, as one JSON array ($2, the payloads' JSON texts joined: nothing to escape); the rest are
 * scalars or the columns' defaults. Sending five arrays of identical values cost the producer a
 * serialised element each and the server an unnested one, and a text[] of JSON texts had every
 * quote escaped by the driver (the bulk enqueue's share of issue 28: pay for what you use). The
 * elements come out in array order, so ids are assigned in input order. $5 is the wake-up channel.
 */
const insertUniformText = (s: string, notify: boolean) => `
  WITH inserted AS (
    INSERT INTO ${s}.jobs (queue_name, payload, priority, max_attempts)
    SELECT $1, p, $3, $4
    FROM jsonb_array_elements($2::jsonb) AS p
    RETURNING id
  )
  SELECT array_agg(id ORDER BY id)::text[] AS ids${notify ? ', pg_notify($5, $1)::text AS notified' : ', $5::text IS NULL AS quiet'}
  FROM inserted`;
export const JobInsertManyUniform = defineStatement('enqueue_many_uniform', (s) =>
  insertUniformText(s, true),
);
/** JobInsertManyUniform without the notification, for coalesced wake-ups. */
export const JobInsertManyUniformQuiet = defineStatement('enqueue_many_uniform_quiet', (s) =>
  insertUniformText(s, false),
);

/** True when the job takes turns under a fairness key (022). */
export function hasFairnessKey(job: NewJob): boolean {
  return job.fairnessKey !== undefined && job.fairnessKey !== null;
}

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

/** A validated job ready to insert. */
export interface NewJob {
  payloadJson: string;
  priority: number;
  runAt: Date | null;
  delayMs: number;
  maxAttempts: number;
  /** Per-aggregate ordering key (see ordering.ts); null for none. */
  orderingKey: string | null;
  /** Per-key concurrency limit key; null for none. */
  concurrencyKey: string | null;
  /** The key a round-robin queue takes turns between (claim-fair.ts); null or absent for none. */
  fairnessKey?: string | null;
}

/** Inserts one job; returns its id. `notify: false` leaves the wake-up to the caller. */
export async function insertJob(
  db: Queryable,
  schema: string,
  queue: string,
  job: NewJob,
  { notify = true }: { notify?: boolean } = {},
): Promise<string> {
  // With a fairness key, the batch insert that names the column (the plain one does not).
  if (hasFairnessKey(job)) return (await insertJobs(db, schema, queue, [job], { notify }))[0] as string;
  if (!notify) {
    const quiet = await run<{ id: string }>(db, JobInsertQuiet(schema), [
      queue,
      job.payloadJson,
      job.priority,
      job.runAt,
      job.delayMs,
      job.maxAttempts,
      job.concurrencyKey,
    ]);
    return quiet[0]?.id as string;
  }
  const rows = await run<{ id: string }>(db, JobInsert(schema), [
    queue,
    job.payloadJson,
    job.priority,
    job.runAt,
    job.delayMs,
    job.maxAttempts,
    wakeupChannel(schema),
    job.concurrencyKey,
  ]);
  return rows[0]?.id as string;
}

/** Wakes the listeners of `queue` (its own transaction). */
export async function notifyQueue(db: Queryable, schema: string, queue: string): Promise<void> {
  await run(db, WakeupNotify(schema), [wakeupChannel(schema), queue]);
}

/**
 * The columns every batch insert takes, in parameter order $2..$6: payloads as JSON texts, then
 * priority, run_at, delay_ms and max_attempts, as parallel arrays. (One JSON array parsed with
 * jsonb_array_elements was measurably slower than a text array cast element by element.)
 */
export function batchColumns(
  jobs: readonly NewJob[],
): [string[], number[], (Date | null)[], number[], number[]] {
  return [
    jobs.map((job) => job.payloadJson),
    jobs.map((job) => job.priority),
    jobs.map((job) => job.runAt),
    jobs.map((job) => job.delayMs),
    jobs.map((job) => job.maxAttempts),
  ];
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
  if (isUniform(jobs)) {
    const first = jobs[0] as NewJob;
    const uniform = await run<{ ids: string[] }>(
      db,
      (notify ? JobInsertManyUniform : JobInsertManyUniformQuiet)(schema),
      [
        queue,
        `[${jobs.map((job) => job.payloadJson).join(',')}]`,
        first.priority,
        first.maxAttempts,
        wakeupChannel(schema),
      ],
    );
    return uniform[0]?.ids ?? [];
  }
  if (jobs.some(hasFairnessKey)) {
    const fair = await run<{ ids: string[] }>(
      db,
      (notify ? JobInsertManyFair : JobInsertManyFairQuiet)(schema),
      [
        queue,
        ...batchColumns(jobs),
        wakeupChannel(schema),
        jobs.map((job) => job.concurrencyKey),
        jobs.map((job) => job.fairnessKey ?? null),
      ],
    );
    return fair[0]?.ids ?? [];
  }
  const rows = await run<{ ids: string[] }>(db, (notify ? JobInsertMany : JobInsertManyQuiet)(schema), [
    queue,
    ...batchColumns(jobs),
    wakeupChannel(schema),
    jobs.map((job) => job.concurrencyKey),
  ]);
  return rows[0]?.ids ?? [];
}
