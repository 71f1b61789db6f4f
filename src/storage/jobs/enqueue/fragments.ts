// The SQL fragments every enqueue statement is composed from (statements.ts composes them; the
// choice of statement for a batch is made once, in ../enqueue.ts). A fragment is a piece of one
// statement's text: where the new rows come from, the row each becomes, the key rows it takes, the
// answer it returns. `s` is the quoted schema. Values travel as $n parameters, in the same positions
// in every statement that carries them: $1 the queue, $2..$6 the job's own fields (payload,
// priority, run_at, delay_ms, max_attempts), $7 the wake-up channel, $8 on the statement's own
// fields in the order it names them (itemFields below).

/**
 * The columns an enqueue writes, in the order every insert names them: the one column list. A
 * statement gives values for the columns it needs (jobRow); the others take their defaults (status
 * 'pending', created_at now(), and any column a later migration adds with a default).
 */
const JOB_COLUMNS = [
  'id',
  'queue_name',
  'payload',
  'priority',
  'available_at',
  'max_attempts',
  'ordering_key',
  'concurrency_key',
  'fairness_key',
  'awaits_predecessor',
  'lane',
  'job_uid',
] as const;

/** A column an enqueue writes. */
export type JobColumn = (typeof JOB_COLUMNS)[number];

/** The values of one new row, by column; columns left out take their defaults. */
export type JobRow = Partial<Record<JobColumn, string>>;

/**
 * The fields a batch carries per job, each as an array parameter zipped by unnest: the field's name
 * (the item's column `i.<name>`) and its element type. The first five are every batch's $2..$6.
 */
const ITEM_FIELD_TYPES = {
  payload: 'text',
  priority: 'integer',
  run_at: 'timestamptz',
  delay_ms: 'double precision',
  max_attempts: 'integer',
  ordering_key: 'text',
  concurrency_key: 'text',
  fairness_key: 'text',
  idempotency_key: 'text',
  dedupe_key: 'text',
  mode: 'text',
  window_ms: 'double precision',
  folded: 'integer',
} as const;

/** A field a batch carries per job. */
export type ItemField = keyof typeof ITEM_FIELD_TYPES;

/** The job's own fields, $2..$6 of every statement. */
const JOB_FIELDS: readonly ItemField[] = ['payload', 'priority', 'run_at', 'delay_ms', 'max_attempts'];

/** The first parameter after the job's own fields and the channel ($7). */
const FIRST_EXTRA_PARAM = 8;

/** A batch's fields: the job's own, then `extra` from $8 on, in that order. */
export function itemFields(extra: readonly ItemField[]): { name: ItemField; param: number }[] {
  return [
    ...JOB_FIELDS.map((name, i) => ({ name, param: 2 + i })),
    ...extra.map((name, i) => ({ name, param: FIRST_EXTRA_PARAM + i })),
  ];
}

/**
 * Source `unnest`: the batch's rows, one per array element, zipped by a multi-argument unnest (rows
 * come out in array order). `ordinality` adds `ord`, each row's position.
 */
export function unnestItems(extra: readonly ItemField[], ordinality = false): string {
  const fields = itemFields(extra);
  const arrays = fields.map((f) => `$${f.param}::${ITEM_FIELD_TYPES[f.name]}[]`).join(', ');
  const names = fields.map((f) => f.name).join(', ');
  return ordinality
    ? `unnest(${arrays}) WITH ORDINALITY\n      AS i(${names}, ord)`
    : `unnest(${arrays})\n      AS i(${names})`;
}

/**
 * CTE `items`: the batch with an id drawn per row, in input order (ORDER BY the ordinality, and
 * MATERIALIZED so the ids are drawn once), for statements that must know a row's id before they
 * insert it: to name it in a key row (idempotency, ordering, dedupe keys).
 */
export function itemsWithIds(s: string, extra: readonly ItemField[]): string {
  return `items AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')) AS id, i.*
    FROM ${unnestItems(extra, true)}
    ORDER BY i.ord
  )`;
}

/** When the job becomes claimable: `runAt`, or now plus `delayMs` (database time). */
export function availableAt(runAt: string, delayMs: string): string {
  return `coalesce(${runAt}, now() + ${delayMs} * interval '1 millisecond')`;
}

/** The row of an item (`i`): its own fields, plus `extra` columns carried under their own names. */
export function rowOfItem(alias: string, extra: readonly JobColumn[] = []): JobRow {
  const row: JobRow = {
    queue_name: '$1',
    payload: `${alias}.payload::jsonb`,
    priority: `${alias}.priority`,
    available_at: availableAt(`${alias}.run_at`, `${alias}.delay_ms`),
    max_attempts: `${alias}.max_attempts`,
  };
  for (const column of extra) row[column] = `${alias}.${column}`;
  return row;
}

/** The row's columns and values, each in JOB_COLUMNS order. */
export function columnsAndValues(row: JobRow): { columns: string; values: string[] } {
  const present = JOB_COLUMNS.filter((column) => row[column] !== undefined);
  return { columns: present.join(', '), values: present.map((column) => row[column] as string) };
}

/**
 * The lane of a new row is the column's default, job_lane_at(now()), evaluated per row; a statement
 * may name it once instead (`laneOnce`, an InitPlan: the same value, since now() is fixed for the
 * transaction). Naming it saved about a tenth of the server's time per row of a 1,000-row batch,
 * but a statement that names the column fails on a schema before 018, where a process of this
 * version must still enqueue during a rolling upgrade (test/storage/lanes-migration.test.ts): so
 * only the uniform batch names it, and it has a twin for such schemas (statements.ts).
 */
export const laneOnce = (s: string) => `(SELECT ${s}.job_lane_at(now()))`;

/**
 * The identity of row `ord` of a batch: the producer's random UUID from the array `$param` (drawn
 * with crypto.randomUUID, a few tens of nanoseconds each), or the server's gen_random_uuid() where
 * the array has none. The column's default draws one per row on the server, where it was about a
 * fifth of a bulk row's cost (pg_strong_random per call). A subscript of a uuid[] without NULLs is
 * an offset, not a walk.
 */
export const uidOf = (param: string, ord: string) =>
  `coalesce((${param}::uuid[])[${ord}::int], gen_random_uuid())`;

/**
 * INSERT of `row` into jobs from `source` (a FROM clause), returning the new ids. With an `id`
 * drawn by the statement, OVERRIDING SYSTEM VALUE lets it through the identity column. The lane
 * and the identity take the columns' defaults unless `given` names them (see above).
 */
export function insertJobsFrom(s: string, given: JobRow, source: string, tail = ''): string {
  const row: JobRow = { ...given };
  const { columns, values } = columnsAndValues(row);
  return `INSERT INTO ${s}.jobs (${columns})${row.id !== undefined ? '\n    OVERRIDING SYSTEM VALUE' : ''}
    SELECT ${values.join(', ')}
    FROM ${source}${tail}
    RETURNING id`;
}

/**
 * Answer of a batch: the new ids as texts in input order (identity values are drawn in the order
 * rows reach the insert, which is the source's order; nothing in between reorders them), and the
 * wake-up: with `notify`, pg_notify of the queue on channel `$channel` (delivered on commit, folded
 * per transaction); without, the channel parameter is still referenced so the parameter list is the
 * same, and the caller sends a coalesced wake-up after commit (wakeup-coalescer.ts).
 */
export function idsAnswer(notify: boolean, channel: string): string {
  return `SELECT array_agg(id ORDER BY id)::text[] AS ids${wakeUp(notify, channel)}
  FROM inserted`;
}

/** The wake-up column of an answer (see idsAnswer). */
const wakeUp = (notify: boolean, channel: string) =>
  notify ? `, pg_notify(${channel}, $1)::text AS notified` : `, ${channel}::text IS NULL AS quiet`;

/**
 * Answer of a large batch: its first id and its size, and the ids themselves only when they are not
 * the consecutive run first .. first + n - 1 (another session drew from the sequence between this
 * batch's rows; the subquery, an InitPlan, runs only then). A lone producer's batch is one run, so
 * 1,000 ids are neither aggregated, sent nor parsed; readIds (../enqueue.ts) rebuilds them.
 */
export function firstIdAnswer(notify: boolean, channel: string): string {
  return `SELECT min(id)::text AS first_id, count(*)::int AS n,
         CASE WHEN max(id) - min(id) + 1 <> count(*)
           THEN (SELECT array_agg(id ORDER BY id)::text[] FROM inserted) END AS ids${wakeUp(notify, channel)}
  FROM inserted`;
}

/**
 * Key take of an ordering key, under the key row's lock (INSERT ... ON CONFLICT DO UPDATE reads the
 * latest committed version): a key with no head and nobody waiting is idle, so the new job becomes
 * its head; otherwise the job waits behind it. A key with no head but waiting jobs is being
 * repaired: new jobs wait too. Shared with the scheduler's ScheduleFire (schedule-fire.ts).
 */
export const TAKE_KEY = `
    ON CONFLICT (queue_name, ordering_key) DO UPDATE
      SET head_id = CASE WHEN k.head_id IS NULL AND k.waiting = 0 THEN excluded.head_id ELSE k.head_id END,
          waiting = CASE WHEN k.head_id IS NULL AND k.waiting = 0 THEN excluded.waiting
                         ELSE k.waiting + excluded.waiting + 1 END
    RETURNING k.ordering_key, k.head_id`;

/**
 * Key take of an idempotency key: the key row is inserted with the id the item's job would get, in
 * key order (concurrent batches cannot deadlock). A concurrent insert of the same key waits on that
 * index entry until the first transaction ends; ON CONFLICT DO UPDATE (a no-op update) then locks
 * and returns the committed row, which DO NOTHING plus a fallback SELECT in the same statement could
 * not see (its snapshot predates the other commit). So exactly one job is created per key and every
 * item gets its id. Each key at most once per batch (the caller folds duplicates first).
 */
export function takeIdempotencyKeys(s: string): string {
  return `keys AS (
    INSERT INTO ${s}.job_keys AS k (queue_name, idempotency_key, job_id)
    SELECT $1, i.idempotency_key, i.id FROM items AS i
    ORDER BY i.idempotency_key
    ON CONFLICT (queue_name, idempotency_key) DO UPDATE SET queue_name = k.queue_name
    RETURNING k.idempotency_key, k.job_id
  )`;
}
