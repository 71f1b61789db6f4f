// What a chaos run writes for the checker, says while it runs and waits for, shared by `npm run
// chaos`, `chaos:hosts` and `chaos:failover`: the acknowledged jobs and the injected faults go into
// the checker's tables (chaos/records/schema.mjs), a progress line reads the queue's counts, and the drain
// waits for the queue to empty.

/** Writes the acknowledged jobs (chaos.acked) and the faults, in the order injected (chaos.faults). */
export async function saveRecords(admin, acked, records) {
  for (let i = 0; i < acked.length; i += 10_000) {
    const slice = acked.slice(i, i + 10_000);
    await admin.query(
      `INSERT INTO chaos.acked (job_id, queue, mode, delay_ms, event_key, event_plan)
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[])`,
      [
        slice.map((a) => a.id),
        slice.map((a) => a.queue),
        slice.map((a) => a.mode),
        slice.map((a) => a.delayMs),
        slice.map((a) => a.eventKey ?? null),
        slice.map((a) => a.eventPlan ?? null),
      ],
    );
  }
  let id = 0;
  for (const r of [...records].sort((a, b) => a.injectedAt - b.injectedAt)) {
    await admin.query(
      'INSERT INTO chaos.faults (id, kind, target, injected_at, healed_at, detail) VALUES ($1, $2, $3, $4, $5, $6)',
      [++id, r.kind, r.target, r.injectedAt, r.healedAt, JSON.stringify(r.detail ?? {})],
    );
  }
}

/** Logs how many jobs succeeded, wait and run; a failed read (a fault at work) logs nothing. */
export async function reportProgress(admin, log) {
  const { rows } = await admin
    .query(
      `SELECT (SELECT count(*) FROM leasehold.finished_jobs)::int AS done,
              (SELECT count(*) FROM leasehold.jobs WHERE status = 'pending')::int AS pending,
              (SELECT count(*) FROM leasehold.jobs WHERE status = 'running')::int AS running`,
    )
    .catch(() => ({ rows: [] }));
  if (rows[0])
    log(`progress: ${rows[0].done} succeeded, ${rows[0].pending} pending, ${rows[0].running} running`);
}

/**
 * Waits until no job of `schemas` (fixed names of the harness's own, never input) is pending or
 * running; false when `timeoutMs` passed first. A failed read (a fault at work) counts as not empty.
 */
export async function drain(admin, timeoutMs, schemas = ['leasehold']) {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const { rows } = await admin
      .query(
        schemas
          .map((s) => `SELECT count(*)::int AS n FROM ${s}.jobs WHERE status IN ('pending', 'running')`)
          .join(' UNION ALL '),
      )
      .catch(() => ({ rows: [{ n: -1 }] }));
    if (rows.every((row) => row.n === 0)) return true;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return false;
}
