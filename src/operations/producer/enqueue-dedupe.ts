import type { EnqueueManyResult, EnqueueResult } from '../../context/client-options.js';
import type { LeaseholdContext } from '../../context/context.js';
import {
  DEDUPE_FIELDS,
  DEDUPE_MODES,
  MAX_DEDUPE_WINDOW_MS,
  MAX_KEY_CHARS,
} from '../../shared/enqueue-fields.js';
import { DatabaseError, isLeaseholdError, ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertInt, assertText } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import {
  type DedupedRow,
  type DedupeMode,
  insertDedupedJobs,
  inWriteTransaction,
  type NewDedupedJob,
  type NewJob,
} from '../../storage/jobs/enqueue.js';

/** Longest dedupe window accepted, in ms (366 days). */
export { MAX_DEDUPE_WINDOW_MS } from '../../shared/enqueue-fields.js';

// A statement answers `stale` only for a key a concurrent enqueue moved after its snapshot was
// taken; the next statement's snapshot includes that commit, so each run gets through one more
// committed racer. Bounded all the same, so a pathological stream of racers fails loudly.
const MAX_RUNS = 50;
const MODES: readonly DedupeMode[] = DEDUPE_MODES;
// Migration 013's constraint refusing a dedupe key whose job has another ordering key.
const ORDERING_MISMATCH = 'dedupe_keys_ordering_key_mismatch';

/** A validated `dedupe` option. */
export interface Dedupe {
  key: string;
  mode: DedupeMode;
  windowMs: number | null;
}

/**
 * Validates `dedupe` of an enqueue (or of one `enqueueMany` item) against the rest of its options:
 * throttle and debounce need `windowMs`, replace refuses it; debounce sets the run time itself
 * (no `runAt` or `delayMs`); `idempotencyKey` is a different contract and is refused beside it.
 */
export function parseDedupe(
  value: unknown,
  field: string,
  siblings: { runAt?: unknown; delayMs?: unknown; idempotencyKey?: unknown },
): Dedupe | null {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError(field, 'must be an object { key, mode, windowMs }');
  }
  rejectUnknownOptions(value, DEDUPE_FIELDS, field);
  const given = value as { key?: unknown; mode?: unknown; windowMs?: unknown };
  const key = assertText(given.key, `${field}.key`, MAX_KEY_CHARS);
  if (!MODES.includes(given.mode as DedupeMode)) {
    throw new ValidationError(`${field}.mode`, `must be one of ${MODES.join(', ')}`);
  }
  const mode = given.mode as DedupeMode;
  let windowMs: number | null = null;
  if (mode === 'replace') {
    if (given.windowMs !== undefined) {
      throw new ValidationError(`${field}.windowMs`, 'is not used by mode replace; leave it out');
    }
  } else {
    if (given.windowMs === undefined)
      throw new ValidationError(`${field}.windowMs`, `is required by mode ${mode}`);
    windowMs = assertInt(given.windowMs, `${field}.windowMs`, 1, MAX_DEDUPE_WINDOW_MS);
  }
  const parent = field.slice(0, field.lastIndexOf('.'));
  if (mode === 'debounce' && (siblings.runAt !== undefined || siblings.delayMs !== undefined)) {
    throw new ValidationError(
      `${parent}.${siblings.runAt !== undefined ? 'runAt' : 'delayMs'}`,
      'cannot be combined with dedupe mode debounce, which runs the job windowMs after the last enqueue',
    );
  }
  if (siblings.idempotencyKey !== undefined) {
    throw new ValidationError(
      `${parent}.idempotencyKey`,
      'cannot be combined with dedupe; use one or the other (idempotencyKey keeps the first job while it is retained)',
    );
  }
  return { key, mode, windowMs };
}

/** `lh.enqueue` with `dedupe`: one statement, run again only for a key a concurrent enqueue moved. */
export async function enqueueDeduped(
  context: LeaseholdContext,
  db: Queryable,
  queue: string,
  job: NewJob,
  dedupe: Dedupe,
  inCallerTransaction: boolean,
): Promise<EnqueueResult> {
  // Autocommit: wake-ups coalesced like plain enqueues' (see src/context/wakeup-coalescer.ts).
  const notify = inCallerTransaction || context.wakeups.notifyInline(queue);
  const [row] = await runUntilSettled(
    context,
    db,
    queue,
    [deduped(job, dedupe, 0)],
    'options.orderingKey',
    notify,
  );
  if (!notify) context.wakeups.quietInsertCommitted(queue);
  const { id, outcome, cancelledId } = row as DedupedRow;
  const result: EnqueueResult = { id: id as string, created: outcome !== 'collapsed' };
  if (cancelledId !== null) result.cancelledJobId = cancelledId;
  return result;
}

/**
 * `lh.enqueueMany` with dedupe keys. Items sharing a key inside the batch fold first, as if
 * enqueued one after another: throttle keeps the first item, debounce and replace the last; the
 * folded ones leave `deduplicated` events on the job. All or nothing: on the pool, one transaction.
 */
export async function enqueueManyDeduped(
  context: LeaseholdContext,
  client: Queryable | undefined,
  queue: string,
  jobs: readonly NewJob[],
  dedupes: readonly (Dedupe | null)[],
): Promise<EnqueueManyResult> {
  // Items by key, in input order; the one that stands for a key: throttle's first, else the last.
  const groups = new Map<string, number[]>();
  dedupes.forEach((dedupe, index) => {
    if (dedupe === null) return;
    const group = groups.get(dedupe.key);
    if (group === undefined) {
      groups.set(dedupe.key, [index]);
      return;
    }
    const first = dedupes[group[0] as number] as Dedupe;
    if (first.mode !== dedupe.mode || first.windowMs !== dedupe.windowMs) {
      throw new ValidationError(
        `items[${index}].dedupe`,
        `uses key ${JSON.stringify(dedupe.key)} with another mode or windowMs than items[${group[0]}]`,
      );
    }
    group.push(index);
  });
  const standsFor = jobs.map((_, index) => index);
  const folded = jobs.map(() => 0);
  for (const group of groups.values()) {
    const mode = (dedupes[group[0] as number] as Dedupe).mode;
    const survivor = (mode === 'throttle' ? group[0] : group.at(-1)) as number;
    for (const index of group) standsFor[index] = survivor;
    folded[survivor] = group.length - 1;
  }
  const representatives = jobs.flatMap((job, index) =>
    standsFor[index] === index
      ? [{ index, job: deduped(job, dedupes[index] ?? null, folded[index] as number) }]
      : [],
  );
  const settle = (db: Queryable) =>
    runUntilSettled(
      context,
      db,
      queue,
      representatives.map((r) => r.job),
      'items',
    );
  const rows = client ? await settle(client) : await inOwnTransaction(context, settle);
  const byIndex = new Map(representatives.map((r, i) => [r.index, rows[i] as DedupedRow]));
  return {
    ids: standsFor.map((rep) => byIndex.get(rep)?.id as string),
    created: standsFor.map((rep, index) => rep === index && byIndex.get(rep)?.outcome !== 'collapsed'),
  };
}

// Two batches whose keys overlap, each seeing a different set of them committed, can wait on each
// other's key rows; PostgreSQL then aborts one (deadlock_detected). Ours runs again, whole: its
// transaction rolled back, so nothing of it is left.
const DEADLOCK = '40P01';
const MAX_BATCH_TRANSACTIONS = 3;

async function inOwnTransaction<T>(
  context: LeaseholdContext,
  use: (db: Queryable) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inWriteTransaction(context.pool, use);
    } catch (err) {
      if (attempt >= MAX_BATCH_TRANSACTIONS || (err as { sqlState?: unknown }).sqlState !== DEADLOCK)
        throw err;
    }
  }
}

function deduped(job: NewJob, dedupe: Dedupe | null, folded: number): NewDedupedJob {
  return {
    ...job,
    dedupeKey: dedupe?.key ?? null,
    mode: dedupe?.mode ?? null,
    windowMs: dedupe?.windowMs ?? null,
    folded,
  };
}

// Runs the statement, then again for the items it answered `stale`, until every item is settled.
async function runUntilSettled(
  context: LeaseholdContext,
  db: Queryable,
  queue: string,
  jobs: readonly NewDedupedJob[],
  orderingField: string,
  notify = true,
): Promise<DedupedRow[]> {
  const answers: (DedupedRow | undefined)[] = jobs.map(() => undefined);
  let pending = jobs.map((_, index) => index);
  for (let run = 1; pending.length > 0; run++) {
    if (run > MAX_RUNS) {
      throw new DatabaseError(
        `enqueue failed: a dedupe key kept moving under ${MAX_RUNS} runs of the statement; try again`,
        undefined,
        undefined,
      );
    }
    const rows = await insertOrExplain(
      db,
      context.schema,
      queue,
      pending.map((index) => jobs[index] as NewDedupedJob),
      orderingField,
      notify,
    );
    const stale: number[] = [];
    rows.forEach((row, i) => {
      const index = pending[i] as number;
      if (row.outcome === 'stale') stale.push(index);
      else answers[index] = row;
    });
    pending = stale;
  }
  return answers as DedupedRow[];
}

async function insertOrExplain(
  db: Queryable,
  schema: string,
  queue: string,
  jobs: readonly NewDedupedJob[],
  orderingField: string,
  notify: boolean,
): Promise<DedupedRow[]> {
  try {
    return await insertDedupedJobs(db, schema, queue, jobs, { notify });
  } catch (err) {
    const constraint = (err as { cause?: { constraint?: unknown } }).cause?.constraint;
    if (isLeaseholdError(err, 'DATABASE') && constraint === ORDERING_MISMATCH) {
      throw new ValidationError(
        orderingField,
        `${orderingField === 'items' ? 'hold an orderingKey that differs' : 'differs'} from the ordering key of the pending or running job its dedupe key names; a dedupe key must keep one ordering key (nothing was written)`,
      );
    }
    throw err;
  }
}
