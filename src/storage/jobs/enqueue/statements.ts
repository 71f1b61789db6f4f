import { defineStatement } from '../../db.js';
import {
  availableAt,
  columnsAndValues,
  firstIdAnswer,
  type ItemField,
  idsAnswer,
  insertJobsFrom,
  itemsWithIds,
  type JobColumn,
  laneOnce,
  rowOfItem,
  TAKE_KEY,
  takeIdempotencyKeys,
  uidOf,
  unnestItems,
} from './fragments.js';

// The enqueue statements, each composed from the fragments of fragments.ts. Which one a batch runs
// is chosen in ../enqueue.ts (chooseInsert). Every statement inserts into jobs (the partitioned
// parent; each row lands in the lane its default names) and wakes the queue's listeners on commit
// unless it is a Quiet one (whose caller sends a coalesced wake-up after commit).

/** The single row of JobInsert and JobInsertQuiet: the job's fields as scalars, the key as `$key`. */
const oneRow = (concurrencyParam: string) =>
  columnsAndValues({
    queue_name: '$1',
    payload: '$2::jsonb',
    priority: '$3',
    available_at: availableAt('$4::timestamptz', '$5::double precision'),
    max_attempts: '$6',
    concurrency_key: concurrencyParam,
  });

/**
 * JobInsert: (nothing) -> pending.
 * Inserts one job and, in the same statement and so the same transaction, notifies listeners of
 * its queue; PostgreSQL delivers the notification only on commit and folds duplicates within one
 * transaction, so a transaction wakes each queue at most once.
 */
export const JobInsert = defineStatement('enqueue_one', (s) => {
  const { columns, values } = oneRow('$8');
  return `
  WITH inserted AS (
    INSERT INTO ${s}.jobs (${columns})
    VALUES (${values.join(', ')})
    RETURNING id
  )
  SELECT inserted.id, pg_notify($7, $1)::text AS notified FROM inserted`;
});

/**
 * JobInsertQuiet: (nothing) -> pending, without a notification. Used by autocommit enqueues that
 * a coalesced wake-up will announce after they commit (see src/wakeup-coalescer.ts): a notifying
 * transaction takes a database-wide lock at commit, so notifying on every insert would keep
 * concurrent enqueues from sharing a WAL flush.
 */
export const JobInsertQuiet = defineStatement('enqueue_one_quiet', (s) => {
  const { columns, values } = oneRow('$7');
  return `
  INSERT INTO ${s}.jobs (${columns})
  VALUES (${values.join(', ')})
  RETURNING id`;
});

/** WakeupNotify: wakes the listeners of one queue, in its own (autocommit) transaction. */
export const WakeupNotify = defineStatement('wakeup_notify', () => 'SELECT pg_notify($1, $2)');

/** The per-job keys a plain batch carries: the concurrency key, and the fairness key when any job has one. */
const plainKeys = (fair: boolean): (ItemField & JobColumn)[] =>
  fair ? ['concurrency_key', 'fairness_key'] : ['concurrency_key'];

/**
 * JobInsertMany: (nothing) -> pending, for a whole batch in one statement.
 * Every field travels as an array (payloads as JSON texts), zipped by unnest. Ids come back in input
 * order (idsAnswer). An explicit ORDER BY on the ordinality cost a sort of every row with its
 * payload, about a tenth of the statement; test/storage/enqueue.test.ts checks the order.
 * With `fair`, each job's fairness key ($9, 022) too; the others do not name the column.
 */
const insertManyText = (s: string, notify: boolean, fair: boolean) => `
  WITH inserted AS (
    ${insertJobsFrom(s, rowOfItem('i', plainKeys(fair)), unnestItems(plainKeys(fair)))}
  )
  ${idsAnswer(notify, '$7')}`;
/** The batch insert described above. */
export const JobInsertMany = defineStatement('enqueue_many', (s) => insertManyText(s, true, false));
/** JobInsertMany without the notification, for coalesced wake-ups (as JobInsertQuiet). */
export const JobInsertManyQuiet = defineStatement('enqueue_many_quiet', (s) =>
  insertManyText(s, false, false),
);
/** JobInsertMany with fairness keys ($9), for a batch (or a single enqueue) where any job has one. */
export const JobInsertManyFair = defineStatement('enqueue_many_fair', (s) => insertManyText(s, true, true));
/** JobInsertManyFair without the notification, for coalesced wake-ups. */
export const JobInsertManyFairQuiet = defineStatement('enqueue_many_fair_quiet', (s) =>
  insertManyText(s, false, true),
);

/**
 * JobInsertManyUniform: JobInsertMany for a uniform batch, the usual bulk load: every job claimable
 * now, with one priority ($3) and one attempt budget ($4), and no key. Only the payloads travel, as
 * one JSON array ($2, the payloads' JSON texts joined: nothing to escape); the rest are scalars or
 * the columns' defaults. Sending five arrays of identical values cost the producer a serialised
 * element each and the server an unnested one, and a text[] of JSON texts had every quote escaped
 * by the driver. The elements come out in array order, so ids are assigned in input order; the
 * answer is the first id and the count (firstIdAnswer). $5 is the wake-up channel, $6 the jobs'
 * identities drawn by the producer (uidOf), and the lane is named once (laneOnce): per row, the
 * server's UUID and the lane's default were a quarter of what a bulk row cost it.
 */
const UNIFORM_ROWS = 'jsonb_array_elements($2::jsonb) WITH ORDINALITY AS t(p, ord)';
const uniformRow = { queue_name: '$1', payload: 'p', priority: '$3', max_attempts: '$4' };
const insertUniformText = (s: string, notify: boolean) => `
  WITH inserted AS (
    ${insertJobsFrom(s, { ...uniformRow, lane: laneOnce(s), job_uid: uidOf('$6', 'ord') }, UNIFORM_ROWS)}
  )
  ${firstIdAnswer(notify, '$5')}`;
/** The uniform batch insert described above. */
export const JobInsertManyUniform = defineStatement('enqueue_many_uniform', (s) =>
  insertUniformText(s, true),
);
/** JobInsertManyUniform without the notification, for coalesced wake-ups. */
export const JobInsertManyUniformQuiet = defineStatement('enqueue_many_uniform_quiet', (s) =>
  insertUniformText(s, false),
);

/**
 * JobInsertManyUniformBefore027: the uniform batch on a schema without the lane (018) or the job
 * identity (027) columns, a process of this version enqueuing during a rolling upgrade: both are
 * left to whatever defaults the schema has. It takes $1..$5 (no identities); insertJobs runs it
 * when the schema refuses the columns (runLaneRouted).
 */
const insertUniformBefore027Text = (s: string, notify: boolean) => `
  WITH inserted AS (
    ${insertJobsFrom(s, uniformRow, UNIFORM_ROWS)}
  )
  ${firstIdAnswer(notify, '$5')}`;
/** The uniform batch insert for a schema before 027, described above. */
export const JobInsertManyUniformBefore027 = defineStatement('enqueue_many_uniform_before_027', (s) =>
  insertUniformBefore027Text(s, true),
);
/** JobInsertManyUniformBefore027 without the notification. */
export const JobInsertManyUniformBefore027Quiet = defineStatement(
  'enqueue_many_uniform_before_027_quiet',
  (s) => insertUniformBefore027Text(s, false),
);

/**
 * JobInsertKeyed: (nothing) -> pending for each item whose idempotency key ($8, one per item, each
 * at most once) is new in queue $1; an item whose key is taken inserts nothing and answers the job
 * holding the key, with created = false. Ids are drawn first (items), the key rows taken in key
 * order (takeIdempotencyKeys), and a job row inserted only where its key row is new. So exactly one
 * job is created per key, every item gets its id, in one statement, inside caller transactions
 * too. One row per item, in input order. Plain enqueue (no key) does none of this.
 * Keys: job_keys' primary key (queue_name, idempotency_key).
 */
const keyedText = (s: string, fair: boolean) => `
  WITH ${itemsWithIds(s, ['idempotency_key', ...plainKeys(fair)])},
  ${takeIdempotencyKeys(s)},
  inserted AS (
    ${insertJobsFrom(s, { id: 'i.id', ...rowOfItem('i', plainKeys(fair)) }, 'items AS i\n    JOIN keys ON keys.job_id = i.id', '\n    ORDER BY i.id')}
  )
  SELECT keys.job_id::text AS id, keys.job_id = i.id AS created,
         (SELECT count(pg_notify($7, $1)) FROM inserted) AS notified
  FROM items AS i
  JOIN keys USING (idempotency_key)
  ORDER BY i.ord`;
/** The keyed insert described above. */
export const JobInsertKeyed = defineStatement('enqueue_keyed', (s) => keyedText(s, false));
/** JobInsertKeyed with each job's fairness key ($10, 022). */
export const JobInsertKeyedFair = defineStatement('enqueue_keyed_fair', (s) => keyedText(s, true));

/**
 * JobInsertOrdered: (nothing) -> pending, for jobs of queue $1 with ordering keys ($8; jobs without
 * a key in the same batch are inserted as usual). Ids are drawn first, in input order; then each
 * key's row in ordering_keys is taken (TAKE_KEY), in key order (so concurrent batches cannot
 * deadlock), and the key's first new job becomes its head if the key was idle. Every other job of
 * the key is inserted with awaits_predecessor set: outside jobs_claimable_idx until the statement
 * finishing the job ahead of it releases it. Two enqueues of one key serialise on the key row; a
 * completion of the key's head takes the same row lock.
 */
const orderedText = (s: string, fair: boolean) => `
  WITH ${itemsWithIds(s, ['ordering_key', ...plainKeys(fair)])},
  groups AS (
    SELECT ordering_key, min(id) AS first_id, count(*)::int AS n
    FROM items
    WHERE ordering_key IS NOT NULL
    GROUP BY ordering_key
  ),
  keys AS (
    INSERT INTO ${s}.ordering_keys AS k (queue_name, ordering_key, head_id, waiting)
    SELECT $1, g.ordering_key, g.first_id, g.n - 1
    FROM groups AS g
    ORDER BY g.ordering_key
    ${TAKE_KEY}
  ),
  inserted AS (
    ${insertJobsFrom(
      s,
      {
        id: 'i.id',
        ...rowOfItem('i', ['ordering_key', ...plainKeys(fair)]),
        awaits_predecessor: 'keys.head_id IS DISTINCT FROM i.id AND i.ordering_key IS NOT NULL',
      },
      'items AS i\n    LEFT JOIN keys ON keys.ordering_key = i.ordering_key',
      '\n    ORDER BY i.id',
    )}
  )
  ${idsAnswer(true, '$7')}`;
/** The ordered insert described above. */
export const JobInsertOrdered = defineStatement('enqueue_ordered', (s) => orderedText(s, false));
/** JobInsertOrdered with each job's fairness key ($10, 022). */
export const JobInsertOrderedFair = defineStatement('enqueue_ordered_fair', (s) => orderedText(s, true));
