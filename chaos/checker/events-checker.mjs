// The events rules of the chaos checker (the `--steps N --event-pct P` workload, steps-workload.mjs),
// beside the steps rules (steps-checker.mjs): read after a run has healed and drained, from the
// ledger (`<ledger>.acked`: each waiting workflow's event key and plan, 'before', 'after' or
// 'never'; `<ledger>.step_effects`) and Leasehold's job_steps (a wait is a step of kind 'wait',
// its result {"timedOut": false, "payload": ...} or {"timedOut": true}), job_waits and
// job_events_sent (every event sent, kept 24 h: a run is shorter).
//
// - Every waiter ended: each succeeded waiting workflow recorded its wait, ended (woken or timed
//   out), and left no waiting row behind.
// - Not lost: a wait whose event was sent before the workflow was enqueued was woken by it; one
//   whose event was sent more than a second before its timeout was not timed out.
// - Not invented: a wait whose event was never sent timed out; a woken wait holds the payload of
//   an event sent with its own key.
// - Not run again: no recorded step of a woken workflow was run again by a later claim.
// Every count is a grouped join or an index lookup per wait: a 100,000-workflow run answers in seconds.

import { WORKFLOW_EVENT } from '../harness/steps-workload.mjs';

const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;

/** Measures the events rules; `schemas` names Leasehold's schema and the ledger's. */
export async function checkEvents(db, { leasehold = 'leasehold', ledger = 'chaos' } = {}) {
  if (!IDENT.test(leasehold) || !IDENT.test(ledger)) throw new Error('chaos: bad schema name');
  const s = `"${leasehold}"`;
  const l = `"${ledger}"`;
  const { rows } = await db.query(
    `
    WITH waiting AS (
      SELECT job_id, event_key, event_plan FROM ${l}.acked WHERE mode = 'steps' AND event_plan IS NOT NULL
    ),
    sent AS (
      SELECT key, min(sent_at) AS first_sent, count(*) AS n FROM ${s}.job_events_sent WHERE name = $1 GROUP BY key
    ),
    waits AS (
      SELECT w.job_id, w.event_key, w.event_plan, st.seq, st.lease_token, st.recorded_at, st.wake_at,
             st.result IS NOT NULL AS ended, (st.result->>'timedOut')::boolean AS timed_out,
             st.result->'payload' AS payload, f.id IS NOT NULL AS succeeded, se.first_sent
      FROM waiting AS w
      LEFT JOIN ${s}.job_steps AS st ON st.job_id = w.job_id AND st.kind = 'wait'
      LEFT JOIN ${s}.finished_jobs AS f ON f.id = w.job_id
      LEFT JOIN sent AS se ON se.key = w.event_key
    ),
    woken AS (SELECT job_id FROM waits WHERE timed_out = false)
    SELECT
      (SELECT count(*) FROM waiting)::int AS waiting_workflows,
      (SELECT count(*) FROM waits WHERE seq IS NOT NULL)::int AS waits_recorded,
      (SELECT count(*) FROM waits WHERE timed_out = false)::int AS woken,
      (SELECT count(*) FROM waits WHERE timed_out)::int AS timed_out,
      (SELECT count(*) FROM waits WHERE timed_out = false AND first_sent < recorded_at)::int AS woken_by_earlier_event,
      (SELECT count(*) FROM waits WHERE succeeded AND NOT coalesce(ended, false))::int AS unresolved,
      (SELECT count(*) FROM ${s}.job_waits AS jw JOIN ${s}.finished_jobs AS f ON f.id = jw.job_id)::int AS left_waiting,
      (SELECT count(*) FROM waits WHERE event_plan = 'before' AND timed_out)::int AS before_timed_out,
      (SELECT count(*) FROM waits
        WHERE event_plan = 'after' AND timed_out AND first_sent < wake_at - interval '1 second')::int AS after_missed,
      (SELECT count(*) FROM waits WHERE event_plan = 'never' AND timed_out = false)::int AS never_woken,
      (SELECT count(*) FROM waits AS w WHERE w.timed_out = false AND NOT EXISTS (
         SELECT 1 FROM ${s}.job_events_sent AS e
         WHERE e.name = $1 AND e.key = w.event_key AND e.payload = w.payload))::int AS wrong_payload,
      (SELECT count(*) FROM ${s}.job_steps AS r JOIN woken AS w ON w.job_id = r.job_id
        WHERE r.kind = 'step' AND EXISTS (
          SELECT 1 FROM ${l}.step_effects AS e
          WHERE e.job_id = r.job_id AND e.step = r.name AND e.token > r.lease_token))::int AS woken_ran_again,
      (SELECT coalesce(sum(n), 0) FROM sent)::int AS events_stored`,
    [WORKFLOW_EVENT],
  );
  return rows[0];
}

/** The events rules as the report lists them: name, measured value, bound, kept or not. */
export function eventInvariants(facts) {
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  const zero = (name, value) => rule(name, value, '= 0', value === 0);
  return [
    zero(
      'succeeded waiting workflows whose wait did not end (no wait, or neither woken nor timed out)',
      facts.unresolved,
    ),
    zero('waiting rows left behind by succeeded workflows', facts.left_waiting),
    zero(
      'waits timed out although their event was sent before the workflow was enqueued',
      facts.before_timed_out,
    ),
    zero('waits timed out although their event was sent over 1 s before the timeout', facts.after_missed),
    zero('waits woken although their event was never sent', facts.never_woken),
    zero('woken waits holding no payload of an event sent with their key', facts.wrong_payload),
    zero('recorded steps of woken workflows that a later claim ran again', facts.woken_ran_again),
    rule('waits woken by an event (the workload really waited)', facts.woken, '> 0', facts.woken > 0),
    rule('waits timed out (the timeout path really ran)', facts.timed_out, '> 0', facts.timed_out > 0),
  ];
}

/** What the waits did, as the line printed under the report; `sent` is the producer's count. */
export function formatEvents(facts, sent) {
  return (
    `Events: ${facts.waiting_workflows} waiting workflows, ${facts.waits_recorded} waits recorded: ` +
    `${facts.woken} woken (${facts.woken_by_earlier_event} by an event sent before the wait began), ` +
    `${facts.timed_out} timed out; ${sent ?? '?'} events sent by the producer (${facts.events_stored} stored).`
  );
}
