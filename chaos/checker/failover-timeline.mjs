// After a failover, the ledger (kept on a server of its own) holds what both primaries
// acknowledged. Copied into the new primary, it is split there into what the new primary's history
// knows and what it cannot: the old primary's acknowledgments that never reached the standby (in
// asynchronous mode, the replication lag window). The known part goes to the chaos checker
// unchanged; the lost part is moved to chaos.lost_* tables and counted here.
//
// How a fact is matched, decisively (no timing guess) wherever the ledger allows:
// - a claim is known when the new primary holds a record that ended it with the same job, token
//   AND claim id (finished_jobs, or a job_events row other than `refused`, which records the
//   claim it refused, not one it ended). The token alone is not enough: the new primary reissues
//   the token numbers of lost claims, to the same owner name even;
// - a completion is known when finished_jobs holds that claim (job, token, claim id);
// - an enqueue is known when the job exists on the new primary with a creation time before the
//   promotion: the new primary's job-id sequence can hand a lost job's id to a new job.
// Enqueues are split by the producer's acknowledgment time (before the promotion: old primary).

const asText = (value) => value;

/** Copies the ledger server's tables into `db` (the new primary's chaos schema, empty so far). */
export async function copyLedger(ledger, db) {
  const tables = ['runs', 'run_ends', 'acks', 'downstream_calls', 'downstream_applied'];
  const copied = {};
  for (const table of tables) {
    // Every value as the server's text: a timestamptz through a JS Date keeps milliseconds only,
    // and a run's start cut to the millisecond can look earlier than its job's microsecond-exact
    // scheduled time (the checker's early-run rule). json_populate_recordset parses the text back.
    const { rows } = await ledger.query({
      text: `SELECT * FROM chaos.${table}`,
      types: { getTypeParser: () => asText },
    });
    for (let i = 0; i < rows.length; i += 5000) {
      await db.query(
        `INSERT INTO chaos.${table} SELECT * FROM json_populate_recordset(null::chaos.${table}, $1::json)`,
        [JSON.stringify(rows.slice(i, i + 5000))],
      );
    }
    copied[table] = rows.length;
  }
  return copied;
}

/**
 * Saves the producer's acknowledgments and the failover's record, then moves what the new primary
 * cannot know to chaos.lost_*; returns the counts. `promotedAt` is database time (a Date).
 */
export async function splitTimeline(db, { acked, fault, promotedAt }) {
  await db.query(`
    CREATE TABLE chaos.acked_all (job_id bigint NOT NULL, queue text NOT NULL, mode text NOT NULL,
      delay_ms int NOT NULL, acked_at timestamptz NOT NULL);
    CREATE TABLE chaos.lost_acked (LIKE chaos.acked_all);
    CREATE TABLE chaos.lost_runs (LIKE chaos.runs);
    CREATE TABLE chaos.lost_run_ends (LIKE chaos.run_ends);
    CREATE TABLE chaos.lost_acks (LIKE chaos.acks, reason text NOT NULL);
    CREATE TABLE chaos.lost_downstream_calls (LIKE chaos.downstream_calls);`);
  for (let i = 0; i < acked.length; i += 10_000) {
    const slice = acked.slice(i, i + 10_000);
    await db.query(
      `INSERT INTO chaos.acked_all (job_id, queue, mode, delay_ms, acked_at)
       SELECT j, q, m, d, to_timestamp(t / 1000.0)
       FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[]) AS u(j, q, m, d, t)`,
      [
        slice.map((a) => a.id),
        slice.map((a) => a.queue),
        slice.map((a) => a.mode),
        slice.map((a) => a.delayMs),
        slice.map((a) => a.ackedAt),
      ],
    );
  }
  await db.query(
    'INSERT INTO chaos.faults (id, kind, target, injected_at, healed_at, detail) VALUES (1, $1, $2, $3, $4, $5)',
    [fault.kind, fault.target, fault.injectedAt, fault.healedAt, JSON.stringify(fault.detail)],
  );
  await db.query(`
    CREATE INDEX ON chaos.acks (job_id, token);
    CREATE INDEX ON chaos.downstream_calls (job_id, token);
    ANALYZE chaos.acked_all, chaos.runs, chaos.run_ends, chaos.acks, chaos.downstream_calls;`);
  const one = async (sql, values = []) => (await db.query(sql, values)).rows[0];

  // Enqueues: acknowledged by the old primary, and no job of that id created before the promotion.
  const enqueues = await one(
    `
    WITH lost AS (
      DELETE FROM chaos.acked_all a
      WHERE a.acked_at < $1
        AND NOT EXISTS (SELECT 1 FROM leasehold.jobs j WHERE j.id = a.job_id AND j.created_at < $1)
        AND NOT EXISTS (SELECT 1 FROM leasehold.finished_jobs f WHERE f.id = a.job_id AND f.created_at < $1)
      RETURNING *
    ), moved AS (INSERT INTO chaos.lost_acked SELECT * FROM lost RETURNING job_id)
    SELECT count(*)::int AS lost,
      count(*) FILTER (WHERE EXISTS (SELECT 1 FROM leasehold.jobs j WHERE j.id = m.job_id)
        OR EXISTS (SELECT 1 FROM leasehold.finished_jobs f WHERE f.id = m.job_id))::int AS ids_reissued
    FROM moved m`,
    [promotedAt],
  );
  await db.query(
    'INSERT INTO chaos.acked (job_id, queue, mode, delay_ms) SELECT job_id, queue, mode, delay_ms FROM chaos.acked_all',
  );

  // Claims: no record on the new primary ended this (job, token, claim id).
  await db.query(`
    CREATE TABLE chaos.known_claims AS
      SELECT id AS job_id, lease_token AS token, lease_claim_id::text AS claim_id FROM leasehold.finished_jobs
      UNION
      SELECT job_id, lease_token, lease_claim_id::text FROM leasehold.job_events
      WHERE kind <> 'refused' AND lease_claim_id IS NOT NULL;
    CREATE INDEX ON chaos.known_claims (job_id, token, claim_id);
    ANALYZE chaos.known_claims;`);
  const claims = await one(
    `
    WITH lost AS (
      DELETE FROM chaos.runs r
      WHERE NOT EXISTS (SELECT 1 FROM chaos.known_claims k
                        WHERE k.job_id = r.job_id AND k.token = r.token AND k.claim_id = r.claim_id)
      RETURNING *
    ), moved AS (INSERT INTO chaos.lost_runs SELECT * FROM lost RETURNING *)
    SELECT count(*)::int AS lost,
      count(*) FILTER (WHERE started_at >= $1)::int AS started_after_promotion,
      count(*) FILTER (WHERE claim_id IS NULL)::int AS without_claim_id,
      count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM chaos.lost_acked a WHERE a.job_id = m.job_id))::int AS of_known_jobs,
      min(started_at) AS first_started_at
    FROM moved m`,
    [promotedAt],
  );
  await db.query(`
    WITH lost AS (
      DELETE FROM chaos.run_ends e
      WHERE EXISTS (SELECT 1 FROM chaos.lost_runs r WHERE r.job_id = e.job_id AND r.token = e.token AND r.claim_id = e.claim_id)
      RETURNING *
    ) INSERT INTO chaos.lost_run_ends SELECT * FROM lost;
    WITH lost AS (
      DELETE FROM chaos.downstream_calls c
      WHERE EXISTS (SELECT 1 FROM chaos.lost_runs r WHERE r.job_id = c.job_id AND r.token = c.token AND r.claim_id = c.claim_id)
      RETURNING *
    ) INSERT INTO chaos.lost_downstream_calls SELECT * FROM lost;`);

  // Answers to the old holders of lost claims, and completions acknowledged on a known claim that
  // the new primary does not hold (the claim reached the standby, its completion did not).
  const acks = await one(
    `
    WITH lost AS (
      DELETE FROM chaos.acks a
      WHERE EXISTS (SELECT 1 FROM chaos.lost_runs r WHERE r.job_id = a.job_id AND r.token = a.token AND r.claim_id = a.claim_id)
         OR (a.result = 'completed' AND NOT EXISTS (
               SELECT 1 FROM leasehold.finished_jobs f
               WHERE f.id = a.job_id AND f.lease_token = a.token AND f.lease_claim_id::text = a.claim_id))
      RETURNING *, CASE WHEN EXISTS (SELECT 1 FROM chaos.lost_runs r WHERE r.job_id = a.job_id AND r.token = a.token
                                     AND r.claim_id = a.claim_id) THEN 'claim lost' ELSE 'completion lost' END AS reason
    ), moved AS (INSERT INTO chaos.lost_acks SELECT * FROM lost RETURNING *)
    SELECT count(*) FILTER (WHERE result = 'completed')::int AS completions_lost,
      count(*) FILTER (WHERE result = 'completed' AND reason = 'claim lost')::int AS completions_lost_with_claim,
      count(*) FILTER (WHERE result = 'completed' AND reason = 'completion lost')::int AS completions_lost_alone,
      count(*) FILTER (WHERE result = 'completed' AND written_at >= $1)::int AS completions_lost_acked_after_promotion,
      count(*) FILTER (WHERE result <> 'completed')::int AS other_answers,
      min(written_at) FILTER (WHERE result = 'completed') AS first_lost_completion_at
    FROM moved`,
    [promotedAt],
  );
  const enqueueWindow = await one(
    'SELECT min(acked_at) AS first, max(acked_at) AS last FROM chaos.lost_acked',
  );
  // Lost jobs and lost claims, once their old holders met the new primary: refused and counted.
  const refusedOldHolders = await one(
    `SELECT count(*)::int AS n FROM leasehold.job_events e
     WHERE e.kind = 'refused' AND EXISTS (
       SELECT 1 FROM chaos.lost_runs r WHERE r.job_id = e.job_id AND r.token = e.lease_token AND r.claim_id = e.lease_claim_id::text)`,
  );
  const downstream = await one(`
    SELECT (SELECT count(*) FROM chaos.lost_downstream_calls)::int AS calls_by_lost_claims,
      (SELECT count(*) FROM chaos.lost_downstream_calls l WHERE EXISTS (
         SELECT 1 FROM chaos.downstream_calls c WHERE c.key = l.key))::int AS repeated_by_new_primary`);
  // An effect recorded in the effects ledger (on the server that failed over) by a claim whose
  // completion was lost is lost with it: the job runs again and performs it again.
  const effects = await one(`
    SELECT count(*)::int AS repeated,
      count(*) FILTER (WHERE EXISTS (SELECT 1 FROM chaos.lost_acks l
                                     WHERE l.job_id = c.job_id AND l.reason = 'completion lost'))::int AS after_lost_completion
    FROM (SELECT job_id FROM chaos.downstream_calls WHERE kind = 'effect' GROUP BY job_id HAVING count(*) > 1) c`);
  return {
    effects,
    enqueues: { ...enqueues, firstAckedAt: enqueueWindow.first, lastAckedAt: enqueueWindow.last },
    claims,
    acks,
    refusedOldHolders: refusedOldHolders.n,
    downstream,
  };
}
