// The mutants of `npm run mutate` (scripts/mutate.mjs): one row each, so that a rewrite of the code
// it mutates is followed by re-pointing `find` and `replace` at the new text, nothing else.
//
//   name        what the mutant breaks, in a few words (the filters of `npm run mutate` match it)
//   covers      the hot transition it stands for (TRANSITIONS below; the --list test checks each
//               is covered, and that the CI subset covers every fenced one)
//   file        the file it edits, from the repository's root
//   find        a text found exactly once in that file (a mutant whose text is gone is NOT APPLIED,
//               which fails the run and `--list`: re-point it)
//   replace     what it becomes
//   tests       names of the test files that must notice (found under test/ by name)
//   more        further [find, replace] pairs applied with it, in the same file
//   ci          true: .ci/run runs it (`--ci`), see CI_NOTE
//   equivalent  for a mutant no test can notice, why (it survives and the run still passes; killed,
//               it fails the run: its reason is stale)

/** The hot transitions every run covers (issue 32); `fenced` ones are all in the CI subset. */
export const TRANSITIONS = [
  { name: 'fence token', fenced: true },
  { name: 'claim id', fenced: true },
  { name: 'expiry', fenced: true },
  { name: 'sweep', fenced: true },
  { name: 'ordering', fenced: true },
  { name: 'pause', fenced: false },
  { name: 'per-key limits', fenced: false },
  { name: 'rate limits', fenced: false },
  { name: 'round-robin', fenced: false },
  { name: 'flow release', fenced: true },
  { name: 'job.transaction', fenced: true },
  { name: 'effects', fenced: true },
  { name: 'durable steps', fenced: true },
  { name: 'dedupe replace', fenced: true },
  { name: 'schedule tick', fenced: false },
  { name: 'plain completion', fenced: true },
  { name: 'batch handler', fenced: true },
  { name: 'abort reason', fenced: false },
  { name: 'bulk enqueue', fenced: false },
];

/** Why .ci/run runs a subset: each mutant is a vitest run of its own (8-47 s on a loaded machine). */
export const CI_NOTE =
  'the CI subset is one mutant per fenced transition part (the fence, the claim, the sweep, the ' +
  'hand-overs, the handler transaction, the effects ledger, the step fence, the replace), the rest run by `npm run mutate`';

// biome-ignore-start lint/suspicious/noTemplateCurlyInString: the source texts, searched for as written
/** Every mutant, in the order they run. */
export const MUTANTS = [
  // The fence (src/storage/fence.ts), shared by heartbeat, complete, fail, snooze.
  {
    name: 'fence-token',
    covers: 'fence token',
    file: 'src/storage/fence.ts',
    find: '    AND j.lease_token = input.token\n',
    replace: '',
    tests: ['fence-parts'],
    ci: true,
  },
  {
    name: 'fence-claim-id',
    covers: 'claim id',
    file: 'src/storage/fence.ts',
    find: '    AND j.lease_claim_id = input.claim_id\n',
    replace: '',
    tests: ['fence-parts'],
    ci: true,
  },
  {
    name: 'fence-owner',
    covers: 'fence token',
    file: 'src/storage/fence.ts',
    find: '    AND j.lease_owner = input.owner\n',
    replace: '',
    tests: ['fence-parts'],
  },
  {
    name: 'fence-expiry',
    covers: 'expiry',
    file: 'src/storage/fence.ts',
    find: '    AND j.lease_expires_at > now()`',
    replace: '`',
    tests: ['fencing'],
    ci: true,
  },
  {
    name: 'fence-status',
    covers: 'fence token',
    file: 'src/storage/fence.ts',
    find: "    AND j.status::text = 'running'\n",
    replace: '',
    tests: ['fencing', 'fence-parts', 'cancel-pause'],
  },
  {
    name: 'fence-no-row-lock',
    covers: 'fence token',
    file: 'src/storage/fence.ts',
    find: '      FOR UPDATE OF j\n',
    replace: '',
    tests: ['fencing', 'fenced-plans'],
    ci: true,
  },
  // The effects ledger (src/storage/flows/effects.ts).
  {
    name: 'effects-fence-token',
    covers: 'effects',
    file: 'src/storage/flows/effects.ts',
    find: 'WHERE ${LEASE_FENCE}',
    replace: "WHERE ${LEASE_FENCE.replace('AND j.lease_token = input.token', '')}",
    tests: ['effects', 'effects-ledger', 'fence-parts'],
    ci: true,
  },
  {
    name: 'effects-ledger-no-conflict-guard',
    covers: 'effects',
    file: 'src/storage/flows/effects.ts',
    find: 'ON CONFLICT (job_id, name) DO NOTHING',
    replace: 'ON CONFLICT (job_id, name) DO UPDATE SET attempt = excluded.attempt',
    tests: ['effects', 'effects-ledger', 'fence-parts'],
  },
  {
    name: 'effects-result-without-fence',
    covers: 'effects',
    file: 'src/storage/flows/effects.ts',
    find: '    FROM changed\n    WHERE e.job_id = changed.id AND e.name = $6\n    RETURNING e.job_id\n  )\n  SELECT (SELECT count(*) FROM recorded)',
    replace:
      '    WHERE e.job_id = $1 AND e.name = $6\n    RETURNING e.job_id\n  )\n  SELECT (SELECT count(*) FROM recorded)',
    tests: ['effects', 'effects-ledger', 'fence-parts'],
  },
  // Durable steps (src/storage/flows/steps.ts, src/runtime/durable/steps.ts).
  {
    name: 'steps-record-without-fence',
    covers: 'durable steps',
    file: 'src/storage/flows/steps.ts',
    find: '    WHERE ${LEASE_FENCE}\n',
    replace: '    WHERE j.id = input.id\n',
    tests: ['durable-steps'],
    ci: true,
  },
  {
    name: 'steps-recorded-step-runs-again',
    covers: 'durable steps',
    file: 'src/runtime/durable/steps.ts',
    find: '    if (recorded) return recorded.result as T;\n',
    replace: '',
    tests: ['durable-steps'],
  },
  {
    name: 'steps-read-on-every-call',
    covers: 'durable steps',
    file: 'src/runtime/durable/steps.ts',
    find: 'this.#recorded ??= this.#bounded(',
    replace: 'this.#recorded = this.#bounded(',
    tests: ['durable-steps'],
  },
  {
    name: 'steps-wait-past-the-lease',
    covers: 'durable steps',
    file: 'src/runtime/durable/steps.ts',
    find: '    return beforeDeadline(this.#host, write, () => this.#lost(key, what));\n',
    replace: '    return write;\n',
    tests: ['black-hole'],
  },
  {
    name: 'steps-no-order-check',
    covers: 'durable steps',
    file: 'src/runtime/durable/steps.ts',
    find: 'if (found.name !== key || found.kind !== kind) {',
    replace: 'if (found.kind !== kind) {',
    tests: ['durable-steps'],
  },
  {
    name: 'steps-sleep-never-hands-back',
    covers: 'durable steps',
    file: 'src/runtime/durable/steps.ts',
    find: '    if (remainingMs > 0) throw new SnoozeError(Math.ceil(remainingMs));\n',
    replace: '',
    tests: ['durable-steps'],
  },
  // The uniform bulk insert: identities drawn by the producer, the lane named once (issue 28).
  {
    name: 'bulk-ignores-producer-uids',
    covers: 'bulk enqueue',
    file: 'src/storage/jobs/enqueue/fragments.ts',
    find: '`coalesce((${param}::uuid[])[${ord}::int], gen_random_uuid())`',
    replace: '`coalesce(CASE WHEN ${param}::uuid[] IS NULL THEN NULL::uuid END, gen_random_uuid())`',
    tests: ['enqueue'],
  },
  // The plain completion's one-row answer: the jobs it did not complete (issue 28).
  {
    name: 'plain-completion-hides-refusals',
    covers: 'plain completion',
    file: 'src/storage/leases/complete.ts',
    find: 'ARRAY(SELECT id FROM refused_rows)::text[] AS refused_ids',
    replace: '(SELECT ARRAY[]::text[] FROM (SELECT count(*) FROM refused_rows) AS n) AS refused_ids',
    tests: ['fencing', 'complete-shapes'],
  },
  {
    name: 'plain-completion-hides-deferred',
    covers: 'plain completion',
    file: 'src/storage/leases/complete.ts',
    find: 'ARRAY(SELECT id FROM fenced WHERE id NOT IN (SELECT id FROM changed))::text[] AS deferred_ids',
    replace: 'ARRAY[]::text[] AS deferred_ids',
    tests: ['complete-shapes'],
  },
  // The claim: the fragments every claim is made of (src/storage/leases/claim/fragments.ts).
  {
    name: 'claim-no-token-bump',
    covers: 'fence token',
    file: 'src/storage/leases/claim/fragments.ts',
    find: '${set}lease_token = j.lease_token + 1,',
    replace: '${set}lease_token = j.lease_token,',
    tests: ['fencing', 'claim'],
    ci: true,
  },
  {
    name: 'claim-keeps-old-claim-id',
    covers: 'claim id',
    file: 'src/storage/leases/claim/fragments.ts',
    find: '${set}lease_claim_id = ${grant.claimId},',
    replace: '${set}lease_claim_id = coalesce(j.lease_claim_id, ${grant.claimId}),',
    tests: ['claim-id', 'fence-parts'],
    ci: true,
  },
  {
    name: 'lapse-probe-blind',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: 'AND lease_expires_at <= now()) AS lapsed',
    replace: "AND lease_expires_at <= now() - interval '1 day') AS lapsed",
    tests: ['recovery-schedule'],
  },
  {
    name: 'fairness-probe-misses-keys',
    covers: 'ordering',
    file: 'src/storage/upkeep/aging.ts',
    find: 'EXISTS (SELECT 1 FROM ${s}.ordering_keys) AS keyed',
    replace: 'false AS keyed',
    tests: ['ordering-maintenance'],
  },
  {
    name: 'claim-id-pool-repeats',
    covers: 'claim id',
    file: 'src/storage/leases/claim/claim-id.ts',
    find: '  claimIdOffset += CLAIM_ID_BYTES;\n',
    replace: '',
    tests: ['claim-id-pool'],
  },
  {
    name: 'claim-no-attempt-count',
    covers: 'expiry',
    file: 'src/storage/leases/claim/fragments.ts',
    find: 'attempt_count = j.attempt_count + 1,',
    replace: 'attempt_count = j.attempt_count,',
    tests: ['fencing', 'failures'],
  },
  {
    name: 'claim-ignores-schedule',
    covers: 'expiry',
    file: 'src/storage/leases/claim/fragments.ts',
    find: "  'waiting_parents = 0',\n  'available_at <= now()',\n",
    replace: "  'waiting_parents = 0',\n",
    tests: ['claim', 'failures'],
  },
  {
    name: 'claim-ignores-pending',
    covers: 'fence token',
    file: 'src/storage/leases/claim/fragments.ts',
    find: `  "status = 'pending'",\n`,
    replace: '',
    tests: ['claim', 'fencing'],
  },
  {
    name: 'claim-ignores-ordering',
    covers: 'ordering',
    file: 'src/storage/leases/claim/fragments.ts',
    find: "  'NOT awaits_predecessor',\n",
    replace: '',
    tests: ['ordering'],
    ci: true,
  },
  {
    name: 'claim-ignores-flow-parents',
    covers: 'flow release',
    file: 'src/storage/leases/claim/fragments.ts',
    find: "  'waiting_parents = 0',\n",
    replace: '',
    tests: ['flows'],
  },
  {
    name: 'claim-no-skip-locked',
    covers: 'fence token',
    file: 'src/storage/leases/claim/fragments.ts',
    find: '    LIMIT ${window.limit}\n    FOR UPDATE SKIP LOCKED',
    replace: '    LIMIT ${window.limit}\n    FOR UPDATE',
    tests: ['claim'],
  },
  {
    name: 'claim-ignores-pause',
    covers: 'pause',
    file: 'src/storage/leases/claim/fragments.ts',
    find: 'AND (paused OR concurrency_limit_per_key IS NOT NULL OR rate_limit_max IS NOT NULL',
    replace: 'AND (concurrency_limit_per_key IS NOT NULL OR rate_limit_max IS NOT NULL',
    tests: ['cancel-pause'],
  },
  // Per-key concurrency limits (src/storage/leases/claim/per-key-limit.ts).
  {
    name: 'limited-claim-grants-past-limit',
    covers: 'per-key limits',
    file: 'src/storage/leases/claim/per-key-limit.ts',
    find: 'SET granted = least(excluded.granted, greatest(0, (SELECT per_key FROM settings) - k.running)),',
    replace: 'SET granted = excluded.granted,',
    tests: ['fairness'],
  },
  {
    name: 'limited-claim-ignores-running',
    covers: 'per-key limits',
    file: 'src/storage/leases/claim/per-key-limit.ts',
    find: 'greatest(0, (SELECT per_key FROM settings) - coalesce(k.running, 0)) AS room',
    replace: '(SELECT per_key FROM settings) AS room',
    tests: ['fairness'],
  },
  {
    // Both guards at once: the snapshot's room and the counter row's grant.
    name: 'limited-claim-ignores-running-keys',
    covers: 'per-key limits',
    file: 'src/storage/leases/claim/per-key-limit.ts',
    find: 'greatest(0, (SELECT per_key FROM settings) - coalesce(k.running, 0)) AS room',
    replace: '(SELECT per_key FROM settings) AS room',
    more: [
      [
        'SET granted = least(excluded.granted, greatest(0, (SELECT per_key FROM settings) - k.running)),',
        'SET granted = excluded.granted,',
      ],
    ],
    tests: ['fairness', 'rate-limits'],
  },
  // Rate limits (src/storage/leases/claim/throttle.ts).
  {
    name: 'rate-limit-window-empty',
    covers: 'rate limits',
    file: 'src/storage/leases/claim/throttle.ts',
    find: "rate_limit_per_ms::double precision * interval '1 millisecond' AS per,",
    replace: "rate_limit_per_ms::double precision * interval '0 millisecond' AS per,",
    tests: ['rate-limits'],
  },
  {
    name: 'rate-limit-thousandfold',
    covers: 'rate limits',
    file: 'src/storage/leases/claim/throttle.ts',
    find: 'SELECT rate_limit_max AS rate_max,',
    replace: 'SELECT rate_limit_max * 1000 AS rate_max,',
    tests: ['rate-limits'],
  },
  // The recovery sweep (src/storage/leases/recover.ts).
  {
    name: 'sweep-recovers-live-leases',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: '      AND lease_expires_at <= now()\n    ORDER BY',
    replace: "      AND lease_expires_at <= now() + interval '1 hour'\n    ORDER BY",
    tests: ['fencing', 'recovery-sweep'],
    equivalent:
      'the UPDATE\'s own expiry re-check decides alone (the CTE\'s row lock holds until commit): docs/reliability.md, "Mutation run"',
  },
  {
    name: 'sweep-no-skip-locked',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: '    LIMIT $1\n    FOR UPDATE SKIP LOCKED',
    replace: '    LIMIT $1\n    FOR UPDATE',
    tests: ['fencing'],
  },
  {
    name: 'sweep-no-recheck',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: "    WHERE j.id = expired.id\n      AND j.status::text = 'running'\n      AND j.lease_expires_at <= now()",
    replace: '    WHERE j.id = expired.id',
    tests: ['fencing', 'recovery-sweep'],
    equivalent:
      'the CTE\'s FOR UPDATE SKIP LOCKED re-evaluates its expiry test on the newest row version and holds the lock: docs/reliability.md, "Mutation run"',
  },
  {
    // Both expiry tests of the sweep at once (either alone is the other's twin, above).
    name: 'sweep-recovers-live-leases-both-checks',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: '      AND lease_expires_at <= now()\n    ORDER BY',
    replace: '    ORDER BY',
    more: [['      AND j.lease_expires_at <= now()\n    RETURNING', '    RETURNING']],
    tests: ['fencing', 'recovery-sweep'],
    ci: true,
  },
  {
    name: 'sweep-dead-one-attempt-late',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: 'WHEN j.attempt_count >= j.max_attempts\n                      THEN',
    replace: 'WHEN j.attempt_count > j.max_attempts\n                      THEN',
    tests: ['fencing', 'recovery-sweep', 'failures'],
  },
  {
    name: 'sweep-no-limit',
    covers: 'sweep',
    file: 'src/storage/leases/recover.ts',
    find: '    ORDER BY lease_expires_at\n    LIMIT $1',
    replace: '    ORDER BY lease_expires_at',
    tests: ['fencing', 'recovery-sweep'],
  },
  // The ordering hand-over (src/storage/queues/ordering.ts).
  {
    name: 'ordering-release-any-waiter',
    covers: 'ordering',
    file: 'src/storage/queues/ordering.ts',
    find: '      ORDER BY w.id LIMIT 1)`;',
    replace: '      ORDER BY w.id DESC LIMIT 1)`;',
    tests: ['ordering'],
  },
  {
    name: 'ordering-release-not-pending',
    covers: 'ordering',
    file: 'src/storage/queues/ordering.ts',
    find: "WHERE w.id = a.head_id AND w.awaits_predecessor AND w.status = 'pending'${",
    replace: 'WHERE w.id = a.head_id AND w.awaits_predecessor${',
    tests: ['ordering', 'ordering-maintenance', 'ordering-repair'],
    equivalent:
      'a waiting job (awaits_predecessor) is always pending: every path that ends one clears the flag: docs/reliability.md, "Mutation run"',
  },
  {
    name: 'ordering-head-never-advances',
    covers: 'ordering',
    file: 'src/storage/queues/ordering.ts',
    find: "THEN ${NEXT_WAITING(s, 'excluded.head_id')} ELSE k.head_id END,",
    replace: 'THEN k.head_id ELSE k.head_id END,',
    tests: ['ordering'],
  },
  // The flow release (src/storage/flows/flow-release.ts), in the completion's statement.
  {
    name: 'flow-release-never-releases',
    covers: 'flow release',
    file: 'src/storage/flows/flow-release.ts',
    find: '    SET waiting_parents = greatest(0, c.waiting_parents - e.n)\n    FROM (SELECT child_queue, child_id,',
    replace: '    SET waiting_parents = c.waiting_parents\n    FROM (SELECT child_queue, child_id,',
    tests: ['flows'],
    ci: true,
  },
  {
    name: 'flow-release-resolves-twice',
    covers: 'flow release',
    file: 'src/storage/flows/flow-release.ts',
    find: 'WHERE d.parent_id = ANY (ARRAY(SELECT id FROM ${source} WHERE has_children)) AND NOT d.resolved\n    RETURNING d.child_id, d.flow_id IS NULL AS invoked,\n',
    replace:
      'WHERE d.parent_id = ANY (ARRAY(SELECT id FROM ${source} WHERE has_children))\n    RETURNING d.child_id, d.flow_id IS NULL AS invoked,\n',
    tests: ['flows'],
  },
  // The plain completion (src/storage/leases/complete.ts, issue 28): a batch of plain jobs skips the
  // ordering, key-slot and flow steps, and must still hand a job that needs them to the whole
  // statement; the worker must choose it from the claim's flag.
  {
    name: 'plain-completion-moves-featured-job',
    covers: 'plain completion',
    file: 'src/storage/leases/complete.ts',
    find: "const PLAIN_ONLY = 'AND j.ordering_key IS NULL AND NOT j.holds_key_slot AND NOT j.has_children';",
    replace: "const PLAIN_ONLY = 'AND true';",
    tests: ['complete-shapes'],
    ci: true,
  },
  {
    name: 'claim-never-plain',
    covers: 'plain completion',
    file: 'src/storage/leases/claim/fragments.ts',
    find: "export const CLAIMED_PLAIN =\n  '(j.ordering_key IS NULL AND NOT j.holds_key_slot AND NOT j.has_children) AS plain';",
    replace: "export const CLAIMED_PLAIN = 'false AS plain';",
    tests: ['complete-shapes'],
  },
  // job.transaction (src/runtime/run/job-transaction.ts): the completion inside the handler's transaction.
  {
    name: 'transaction-commits-refused-completion',
    covers: 'job.transaction',
    file: 'src/runtime/run/job-transaction.ts',
    find: '      if (!accepted) {\n        refused = true;\n        throw REFUSED;\n      }',
    replace: '      if (!accepted) {\n        refused = true;\n      }',
    tests: ['job-transaction'],
    ci: true,
  },
  {
    name: 'transaction-completes-outside',
    covers: 'job.transaction',
    file: 'src/runtime/run/job-transaction.ts',
    find: 'accepted = (await completeJobs(db, store.schema, [ref])).has(host.lease.jobId);',
    replace: 'accepted = (await completeJobs(store.pool, store.schema, [ref])).has(host.lease.jobId);',
    tests: ['job-transaction'],
  },
  {
    name: 'transaction-lane-move-is-an-error',
    covers: 'job.transaction',
    file: 'src/runtime/run/job-transaction.ts',
    find: '    if (presented && !accepted && isMovedRowConflict(err)) return { done: false, error: err };\n',
    replace: '',
    tests: ['job-transaction'],
  },
  // Dedupe's replace (src/storage/enqueue-dedupe.ts, src/storage/cancel-set.ts).
  {
    name: 'replace-no-token-bump',
    covers: 'dedupe replace',
    file: 'src/storage/cancel-set.ts',
    find: '        lease_token = j.lease_token + 1,\n',
    replace: '',
    tests: ['dedupe', 'cancel-pause'],
    ci: true,
  },
  {
    name: 'replace-keeps-running-job',
    covers: 'dedupe replace',
    file: 'src/storage/jobs/enqueue/dedupe.ts',
    find: "WHERE o.outcome = 'replaced' AND j.id = t.id AND j.status = 'running'",
    replace: "WHERE o.outcome = 'replaced' AND j.id = t.id AND j.status = 'running' AND false",
    tests: ['dedupe'],
  },
  // Round-robin fairness (src/storage/leases/claim/round-robin.ts, 022).
  {
    name: 'fair-claim-key-by-key',
    covers: 'round-robin',
    file: 'src/storage/leases/claim/round-robin.ts',
    find: '    ORDER BY round, pos\n    LIMIT ${limit}',
    replace: '    ORDER BY pos, round\n    LIMIT ${limit}',
    tests: ['fairness-round-robin'],
  },
  {
    name: 'fair-claim-cursor-stays',
    covers: 'round-robin',
    file: 'src/storage/leases/claim/round-robin.ts',
    find: '    SET last_key = coalesce(\n          ${served},\n          (SELECT key FROM walked_last))',
    replace: '    SET last_key = t.last_key',
    tests: ['fairness-round-robin'],
  },
  {
    name: 'fair-claim-across-priorities',
    covers: 'round-robin',
    file: 'src/storage/leases/claim/round-robin.ts',
    find: '        AND fairness_key IS NOT NULL\n        AND priority = (SELECT priority FROM top)`;',
    replace: '        AND fairness_key IS NOT NULL`;',
    tests: ['fairness-round-robin'],
  },
  {
    name: 'fair-claim-shares-with-keys-not-due',
    covers: 'round-robin',
    file: 'src/storage/leases/claim/round-robin.ts',
    find: '    SELECT key, pos FROM walked WHERE due\n',
    replace: '    SELECT key, pos FROM walked\n',
    tests: ['fairness-round-robin'],
  },
  {
    name: 'fair-claim-stops-at-keys-not-due',
    covers: 'round-robin',
    file: 'src/storage/leases/claim/round-robin.ts',
    find: "    FROM after_turn AS w, LATERAL ${nextKey(s, 'w.key')} AS following (key, due)\n    WHERE w.n_due < ${limit}",
    replace:
      "    FROM after_turn AS w, LATERAL ${nextKey(s, 'w.key')} AS following (key, due)\n    WHERE w.pos < ${limit}",
    tests: ['fairness-round-robin'],
  },
  // The schedule tick (src/storage/schedules/schedule-fire.ts).
  {
    name: 'schedule-tick-fires-twice',
    covers: 'schedule tick',
    file: 'src/storage/schedules/schedule-fire.ts',
    find: '    ON CONFLICT (schedule_name, tick_at) DO NOTHING\n',
    replace: '    ON CONFLICT (schedule_name, tick_at) DO UPDATE SET job_id = excluded.job_id\n',
    more: [['      AND last_tick_at IS NOT DISTINCT FROM $3::timestamptz\n', '']],
    tests: ['scheduler', 'schedules'],
  },
  {
    name: 'schedule-tick-fires-paused',
    covers: 'schedule tick',
    file: 'src/storage/schedules/schedule-fire.ts',
    find: 'WHERE name = $1 AND revision = $2::bigint AND NOT paused',
    replace: 'WHERE name = $1',
    tests: ['scheduler', 'schedules'],
  },
  // Batch handlers (src/runtime/batch/batch-runner.ts, src/runtime/batch/batch-transaction.ts).
  {
    name: 'batch-transaction-partial-commit',
    covers: 'batch handler',
    file: 'src/runtime/batch/batch-transaction.ts',
    find: 'if (accepted === null || accepted.size < items.length) throw REFUSED;',
    replace: 'if (accepted === null) throw REFUSED;',
    tests: ['batch-handlers'],
    ci: true,
  },
  {
    name: 'batch-results-dropped',
    covers: 'batch handler',
    file: 'src/runtime/batch/batch-runner.ts',
    find: 'this.#completed(item, (value as readonly unknown[] | undefined)?.[i])',
    replace: 'this.#completed(item, undefined)',
    tests: ['batch-handlers'],
  },
  // Why a handler was stopped (src/runtime/run/lease-keeper.ts).
  {
    name: 'abort-cancel-read-as-lease-lost',
    covers: 'abort reason',
    file: 'src/runtime/run/lease-keeper.ts',
    find: "cancelled.has(leaseKey(job.lease)) ? 'cancelled' : 'lease-lost'",
    replace: "'lease-lost'",
    tests: ['abort-reasons', 'cancel-pause'],
  },
];
// biome-ignore-end lint/suspicious/noTemplateCurlyInString: the source texts, searched for as written
