import type pg from 'pg';
import { PeriodicService } from '../../maintenance/periodic-service.js';
import { assertQueueName } from '../../shared/validation.js';
import {
  pruneRollup,
  type RollupGauges,
  readRollup,
  writeRollup,
} from '../../storage/operator/metrics-rollup.js';
import type { LeaseholdStats } from './stats.js';
import { readStats } from './stats.js';

/** Minutes recomputed by each pass after the first (late commits within them are counted). */
const RECOMPUTED_MINUTES = 3;
/** Minutes the first pass fills from the tables (completions and events only; gauges start now). */
const BACKFILL_MINUTES = 60;
/** At most this many completions and events are read per pass. */
const MAX_ROWS_PER_PASS = 50_000;
/** Rollup rows are kept this long. */
export const ROLLUP_KEEP_HOURS = 48;

/** The gauges of one stats snapshot, per queue, as the rollup stores them. */
export function gaugesOf(stats: LeaseholdStats): RollupGauges[] {
  const refused = new Map<string, number>();
  for (const r of stats.refusals) refused.set(r.queue, (refused.get(r.queue) ?? 0) + r.count);
  return stats.queues.map((q) => ({
    queue: q.queue,
    pending: q.pending,
    running: q.running,
    near_expiry: q.leasesExpiringSoon,
    oldest_claimable_ms: q.oldestClaimableAgeMs,
    refused_total: refused.get(q.queue) ?? 0,
  }));
}

/**
 * One rollup pass: samples the gauges (`lh.stats()`), recomputes the recent minutes' counts and
 * stores both in metrics_rollup, then prunes rows past ROLLUP_KEEP_HOURS. Two statements plus the
 * stats transaction, each bounded.
 */
export async function rollupMetrics(
  pool: pg.Pool,
  schema: string,
  options: { minutes?: number; stats?: LeaseholdStats } = {},
): Promise<number> {
  const stats = options.stats ?? (await readStats(pool, schema, { windowMs: 60_000 }));
  const written = await writeRollup(
    pool,
    schema,
    options.minutes ?? RECOMPUTED_MINUTES,
    MAX_ROWS_PER_PASS,
    gaugesOf(stats),
  );
  await pruneRollup(pool, schema, ROLLUP_KEEP_HOURS);
  return written;
}

/** The rollup pass on a timer: the first pass backfills an hour, later ones recompute three minutes. */
export class MetricsRollupService extends PeriodicService<number> {
  #first = true;

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    intervalMs: number,
    onError?: (err: unknown) => void,
  ) {
    super(intervalMs, onError);
  }

  /** Runs one pass now. */
  async runOnce(): Promise<number> {
    const minutes = this.#first ? BACKFILL_MINUTES : RECOMPUTED_MINUTES;
    const written = await rollupMetrics(this.pool, this.schema, { minutes });
    this.#first = false;
    return written;
  }
}

/** One queue's series over a range, one point per minute (null where nothing was sampled). */
export interface QueueSeries {
  queue: string;
  /** Minute starts, ms since the epoch. */
  minutes: number[];
  completed: number[];
  retried: number[];
  dead: number[];
  leaseExpired: number[];
  /** Lost-fence writes refused in each minute (null before the first sample). */
  refused: (number | null)[];
  running: (number | null)[];
  nearExpiry: (number | null)[];
  oldestClaimableMs: (number | null)[];
  /** Retries by error code over the whole range. */
  retriesByCode: Record<string, number>;
}

/** Reads the per-minute series of the last `range` (hour or day), per queue, every minute present. */
export async function readMetricsHistory(
  pool: pg.Pool,
  schema: string,
  range: 'hour' | 'day',
  queue: string | null = null,
): Promise<{ from: number; to: number; queues: QueueSeries[] }> {
  if (queue !== null) assertQueueName(queue);
  const minutes = range === 'day' ? 1440 : 60;
  const rows = await readRollup(pool, schema, minutes, queue, 100_000);
  const now = Date.now();
  const to = Math.floor(now / 60_000) * 60_000;
  const from = to - (minutes - 1) * 60_000;
  const byQueue = new Map<string, typeof rows>();
  for (const row of rows) {
    const list = byQueue.get(row.queue_name) ?? [];
    list.push(row);
    byQueue.set(row.queue_name, list);
  }
  const queues: QueueSeries[] = [];
  for (const [name, list] of byQueue) {
    const at = new Map(list.map((row) => [row.minute_ms, row]));
    const series: QueueSeries = {
      queue: name,
      minutes: [],
      completed: [],
      retried: [],
      dead: [],
      leaseExpired: [],
      refused: [],
      running: [],
      nearExpiry: [],
      oldestClaimableMs: [],
      retriesByCode: {},
    };
    let lastRefused: number | null = null;
    for (let minute = from; minute <= to; minute += 60_000) {
      const row = at.get(minute);
      series.minutes.push(minute);
      series.completed.push(row?.completed ?? 0);
      series.retried.push(row?.retried ?? 0);
      series.dead.push(row?.dead ?? 0);
      series.leaseExpired.push(row?.lease_expired ?? 0);
      const total = row?.refused_total ?? null;
      series.refused.push(total === null || lastRefused === null ? null : Math.max(0, total - lastRefused));
      if (total !== null) lastRefused = total;
      series.running.push(row?.running ?? null);
      series.nearExpiry.push(row?.near_expiry ?? null);
      series.oldestClaimableMs.push(row?.oldest_claimable_ms ?? null);
      for (const [code, n] of Object.entries(row?.retries_by_code ?? {})) {
        series.retriesByCode[code] = (series.retriesByCode[code] ?? 0) + n;
      }
    }
    queues.push(series);
  }
  return { from, to, queues };
}
