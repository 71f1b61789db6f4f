// The steps rules of the chaos checker (the `--steps N` workload, steps-workload.mjs), kept apart
// from checker.mjs (which holds the lease rules): read after a run has healed and drained, from
// the ledger (`<ledger>.step_effects`: one row per run of a step's side effect, with the claim that
// ran it and the value it returned; `<ledger>.runs`: one row per handler run, started_at in database
// time, written after the claim committed; `<ledger>.acked`: the workflows) and Leasehold's
// job_steps and job_events.
//
// - Exactly once: each (job, step) has at most one accepted record, and the ledger holds exactly one
//   effect run with the value that record holds, run by the claim that recorded it.
// - Never again: no later claim ran the effect of a step already recorded.
// - Complete: every succeeded workflow recorded all its steps; every workflow ended succeeded or dead.
// - No stale record: each step (and sleep) was recorded by a claim that ran, before any later
//   claim of the job ran (the later run's start, after its claim committed, is not before the
//   record's transaction time), and before its own claim ended (the record's history event
//   precedes the claim's ending event: both writes take the job's row lock, so their ids are in
//   commit order).

const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;
const ENDS = "('lease_expired', 'retried', 'dead', 'snoozed', 'skipped', 'cancelled')";

/** Measures the steps rules for workflows of `steps` steps; `schemas` as checkFlows takes them. */
export async function checkSteps(db, steps, { leasehold = 'leasehold', ledger = 'chaos' } = {}) {
  if (!IDENT.test(leasehold) || !IDENT.test(ledger)) throw new Error('chaos: bad schema name');
  if (!Number.isInteger(steps) || steps < 1) throw new Error('chaos: steps must be a positive integer');
  const s = `"${leasehold}"`;
  const l = `"${ledger}"`;
  const { rows } = await db.query(
    `
    WITH workflows AS (SELECT job_id FROM ${l}.acked WHERE mode = 'steps'),
    rec AS (
      SELECT st.job_id, st.name, st.kind, st.result #>> '{}' AS value, st.lease_token, st.recorded_at
      FROM ${s}.job_steps AS st JOIN workflows AS w ON w.job_id = st.job_id
    ),
    matched AS (
      SELECT r.job_id, r.name,
        (SELECT count(*) FROM ${l}.step_effects AS e
          WHERE e.job_id = r.job_id AND e.step = r.name AND e.value = r.value) AS holding,
        (SELECT count(*) FROM ${l}.step_effects AS e
          WHERE e.job_id = r.job_id AND e.step = r.name AND e.value = r.value AND e.token = r.lease_token) AS by_recorder
      FROM rec AS r WHERE r.kind = 'step'
    ),
    stale AS (
      SELECT r.job_id, r.name, r.lease_token,
        NOT EXISTS (SELECT 1 FROM ${l}.runs AS x WHERE x.job_id = r.job_id AND x.token = r.lease_token) AS never_ran,
        EXISTS (SELECT 1 FROM ${l}.runs AS x
                WHERE x.job_id = r.job_id AND x.token > r.lease_token AND x.started_at < r.recorded_at) AS after_later_claim,
        EXISTS (SELECT 1 FROM ${s}.job_events AS e
                WHERE e.job_id = r.job_id AND e.lease_token = r.lease_token AND e.kind IN ${ENDS}
                  AND e.id < coalesce((SELECT min(se.id) FROM ${s}.job_events AS se
                                       WHERE se.job_id = r.job_id AND se.kind = 'step' AND se.detail->>'step' = r.name),
                                      9223372036854775807)) AS after_claim_ended
      FROM rec AS r
    ),
    step_counts AS (SELECT job_id, count(*) FILTER (WHERE kind = 'step') AS n FROM rec GROUP BY job_id),
    ended AS (
      SELECT w.job_id, f.id IS NOT NULL AS succeeded, j.status::text AS status
      FROM workflows AS w
      LEFT JOIN ${s}.finished_jobs AS f ON f.id = w.job_id
      LEFT JOIN ${s}.jobs AS j ON j.id = w.job_id
    )
    SELECT
      (SELECT count(*) FROM workflows)::int AS workflows,
      (SELECT count(*) FILTER (WHERE succeeded) FROM ended)::int AS succeeded,
      (SELECT count(*) FILTER (WHERE status = 'dead') FROM ended)::int AS dead,
      (SELECT count(*) FILTER (WHERE NOT succeeded AND status IS DISTINCT FROM 'dead') FROM ended)::int AS not_ended,
      (SELECT count(*) FILTER (WHERE kind = 'step') FROM rec)::int AS recorded_steps,
      (SELECT count(*) FILTER (WHERE kind = 'sleep') FROM rec)::int AS recorded_sleeps,
      (SELECT count(*) FROM ${l}.step_effects AS e JOIN workflows AS w ON w.job_id = e.job_id)::int AS effect_runs,
      (SELECT count(*) FROM (SELECT 1 FROM rec GROUP BY job_id, name HAVING count(*) > 1) AS d)::int AS recorded_twice,
      (SELECT count(*) FROM matched WHERE holding <> 1 OR by_recorder <> 1)::int AS not_once,
      (SELECT count(*) FROM rec AS r WHERE r.kind = 'step' AND EXISTS (
         SELECT 1 FROM ${l}.step_effects AS e
         WHERE e.job_id = r.job_id AND e.step = r.name AND e.token > r.lease_token))::int AS run_after_record,
      (SELECT count(*) FROM ended AS n LEFT JOIN step_counts AS c ON c.job_id = n.job_id
         WHERE n.succeeded AND coalesce(c.n, 0) <> $1)::int AS incomplete,
      (SELECT count(*) FILTER (WHERE never_ran OR after_later_claim OR after_claim_ended) FROM stale)::int AS stale_records,
      (SELECT count(*) FILTER (WHERE never_ran) FROM stale)::int AS stale_never_ran,
      (SELECT count(*) FILTER (WHERE after_later_claim) FROM stale)::int AS stale_after_later_claim,
      (SELECT count(*) FILTER (WHERE after_claim_ended) FROM stale)::int AS stale_after_claim_ended,
      (SELECT coalesce(sum(refused_count), 0) FROM ${s}.lease_refusals WHERE operation = 'step')::int AS refused_step_writes`,
    [steps],
  );
  return rows[0];
}

/** The steps rules as the report lists them: name, measured value, bound, kept or not. */
export function stepInvariants(facts) {
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  return [
    rule(
      'workflows that ended neither succeeded nor dead',
      `${facts.not_ended} of ${facts.workflows}`,
      '= 0',
      facts.not_ended === 0,
    ),
    rule(
      'steps recorded twice (one job, one step name)',
      facts.recorded_twice,
      '= 0',
      facts.recorded_twice === 0,
    ),
    rule(
      'recorded steps whose value is not in exactly one effect run, by the recording claim',
      `${facts.not_once} of ${facts.recorded_steps}`,
      '= 0',
      facts.not_once === 0,
    ),
    rule(
      'recorded steps whose effect a later claim ran again',
      facts.run_after_record,
      '= 0',
      facts.run_after_record === 0,
    ),
    rule('succeeded workflows missing a step record', facts.incomplete, '= 0', facts.incomplete === 0),
    rule(
      'steps and sleeps recorded by a stale lease (never ran, after a later claim ran, after the claim ended)',
      `${facts.stale_records} (${facts.stale_never_ran}, ${facts.stale_after_later_claim}, ${facts.stale_after_claim_ended})`,
      '= 0',
      facts.stale_records === 0,
    ),
    rule(
      'steps recorded (the workload really ran steps)',
      facts.recorded_steps,
      '> 0',
      facts.recorded_steps > 0,
    ),
  ];
}

/** What the steps workload did, as the line printed under the report. */
export function formatSteps(facts) {
  return (
    `Steps workload: ${facts.workflows} workflows (${facts.succeeded} succeeded, ${facts.dead} dead), ` +
    `${facts.recorded_steps} steps and ${facts.recorded_sleeps} sleeps recorded, ${facts.effect_runs} effect runs ` +
    `(${facts.effect_runs - facts.recorded_steps} run again: a run whose record was refused or never made), ` +
    `${facts.refused_step_writes} stale step writes refused and counted.`
  );
}
