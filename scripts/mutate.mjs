#!/usr/bin/env node
// A bounded mutation run (`npm run mutate`, not part of CI): each mutant is one string replacement
// in the code that keeps the promise (the fence, the claim, the sweep, the ordering release, the
// effects ledger). For each, the file is changed, only the test files that should notice are run,
// and the file is restored, whatever happens. A mutant whose tests still pass "survived": either a
// test is missing, or the mutant is equivalent (docs/reliability.md says which, and why).
//
//   node scripts/mutate.mjs                 every mutant
//   node scripts/mutate.mjs fence sweep     only the mutants whose name contains one of the words
//
// Run it on a clean tree: it edits src/ in place (and puts each file back before the next).

import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** name, file, the text to find (exactly once), its replacement, the tests that should fail. */
const MUTANTS = [
  // The fence (src/storage/fence.ts), shared by heartbeat, complete, fail, snooze.
  m('fence-token', 'src/storage/fence.ts', '    AND j.lease_token = input.token\n', '', ['fence-parts']),
  m('fence-claim-id', 'src/storage/fence.ts', '    AND j.lease_claim_id = input.claim_id\n', '', [
    'fence-parts',
  ]),
  m('fence-owner', 'src/storage/fence.ts', '    AND j.lease_owner = input.owner\n', '', ['fence-parts']),
  m('fence-expiry', 'src/storage/fence.ts', '    AND j.lease_expires_at > now()`', '`', ['fencing']),
  m('fence-status', 'src/storage/fence.ts', "    AND j.status::text = 'running'\n", '', [
    'fencing',
    'fence-parts',
    'cancel-pause',
  ]),
  m('fence-no-row-lock', 'src/storage/fence.ts', '      FOR UPDATE OF j\n', '', ['fencing', 'fenced-plans']),
  m(
    'effects-fence-token',
    'src/storage/effects.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text, searched for as written
    'WHERE ${LEASE_FENCE}',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text, searched for as written
    "WHERE ${LEASE_FENCE.replace('AND j.lease_token = input.token', '')}",
    ['effects', 'effects-ledger', 'fence-parts'],
  ),
  m(
    'effects-ledger-no-conflict-guard',
    'src/storage/effects.ts',
    'ON CONFLICT (job_id, name) DO NOTHING',
    'ON CONFLICT (job_id, name) DO UPDATE SET attempt = excluded.attempt',
    ['effects', 'effects-ledger', 'fence-parts'],
  ),
  m(
    'effects-result-without-fence',
    'src/storage/effects.ts',
    '    FROM changed\n    WHERE e.job_id = changed.id AND e.name = $6\n    RETURNING e.job_id\n  )\n  SELECT (SELECT count(*) FROM recorded)',
    '    WHERE e.job_id = $1 AND e.name = $6\n    RETURNING e.job_id\n  )\n  SELECT (SELECT count(*) FROM recorded)',
    ['effects', 'effects-ledger', 'fence-parts'],
  ),
  // The claim (src/storage/claim.ts).
  m(
    'claim-no-token-bump',
    'src/storage/claim.ts',
    'lease_token = j.lease_token + 1,',
    'lease_token = j.lease_token,',
    ['fencing', 'claim'],
  ),
  m(
    'claim-no-attempt-count',
    'src/storage/claim.ts',
    'attempt_count = j.attempt_count + 1,',
    'attempt_count = j.attempt_count,',
    ['fencing', 'failures'],
  ),
  m('claim-ignores-schedule', 'src/storage/claim.ts', '      AND available_at <= now()\n', '', [
    'claim',
    'failures',
  ]),
  m(
    'claim-ignores-pending',
    'src/storage/claim.ts',
    "      AND status = 'pending'\n      AND NOT awaits_predecessor",
    '      AND NOT awaits_predecessor',
    ['claim', 'fencing'],
  ),
  m(
    'claim-ignores-ordering',
    'src/storage/claim.ts',
    '      AND NOT awaits_predecessor\n      AND available_at <= now()',
    '      AND available_at <= now()',
    ['ordering'],
  ),
  m(
    'claim-no-skip-locked',
    'src/storage/claim.ts',
    '    LIMIT $3\n    FOR UPDATE SKIP LOCKED',
    '    LIMIT $3\n    FOR UPDATE',
    ['claim'],
  ),
  m(
    'claim-ignores-pause',
    'src/storage/claim.ts',
    '(paused OR concurrency_limit_per_key IS NOT NULL)',
    '(concurrency_limit_per_key IS NOT NULL)',
    ['cancel-pause'],
  ),
  // The recovery sweep (src/storage/recover.ts).
  m(
    'sweep-recovers-live-leases',
    'src/storage/recover.ts',
    '      AND lease_expires_at <= now()\n    ORDER BY',
    "      AND lease_expires_at <= now() + interval '1 hour'\n    ORDER BY",
    ['fencing', 'recovery-sweep'],
  ),
  m(
    'sweep-no-skip-locked',
    'src/storage/recover.ts',
    '    LIMIT $1\n    FOR UPDATE SKIP LOCKED',
    '    LIMIT $1\n    FOR UPDATE',
    ['fencing'],
  ),
  m(
    'sweep-no-recheck',
    'src/storage/recover.ts',
    "    WHERE j.id = expired.id\n      AND j.status::text = 'running'\n      AND j.lease_expires_at <= now()",
    '    WHERE j.id = expired.id',
    ['fencing', 'recovery-sweep'],
  ),
  // Both expiry tests of the sweep at once (either alone is the other's twin: see docs/reliability.md).
  m(
    'sweep-recovers-live-leases-both-checks',
    'src/storage/recover.ts',
    '      AND lease_expires_at <= now()\n    ORDER BY',
    '    ORDER BY',
    ['fencing', 'recovery-sweep'],
    [['      AND j.lease_expires_at <= now()\n    RETURNING', '    RETURNING']],
  ),
  m(
    'sweep-dead-one-attempt-late',
    'src/storage/recover.ts',
    'WHEN j.attempt_count >= j.max_attempts\n                      THEN',
    'WHEN j.attempt_count > j.max_attempts\n                      THEN',
    ['fencing', 'recovery-sweep', 'failures'],
  ),
  m(
    'sweep-no-limit',
    'src/storage/recover.ts',
    '    ORDER BY lease_expires_at\n    LIMIT $1',
    '    ORDER BY lease_expires_at',
    ['fencing', 'recovery-sweep'],
  ),
  // The ordering release (src/storage/ordering.ts).
  m(
    'ordering-release-any-waiter',
    'src/storage/ordering.ts',
    '      ORDER BY w.id LIMIT 1)`;',
    '      ORDER BY w.id DESC LIMIT 1)`;',
    ['ordering'],
  ),
  m(
    'ordering-release-not-pending',
    'src/storage/ordering.ts',
    "    WHERE w.id = a.head_id AND w.awaits_predecessor AND w.status = 'pending'\n",
    '    WHERE w.id = a.head_id AND w.awaits_predecessor\n',
    ['ordering', 'ordering-maintenance', 'ordering-repair'],
  ),
  m(
    'ordering-head-never-advances',
    'src/storage/ordering.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text, searched for as written
    "THEN ${NEXT_WAITING(s, 'excluded.head_id')} ELSE k.head_id END,",
    'THEN k.head_id ELSE k.head_id END,',
    ['ordering'],
  ),
];

/** One mutant: `find` -> `replace` in `file` (and each further [find, replace] pair of `more`). */
// Test files live in room folders (test/storage/, test/runtime/, ...): find each by its name.
const testFiles = readdirSync(`${root}test`, { recursive: true }).filter((f) => f.endsWith('.test.ts'));
function testFile(name) {
  const found = testFiles.find((f) => f === `${name}.test.ts` || f.endsWith(`/${name}.test.ts`));
  if (!found) throw new Error(`mutate: no test file named ${name}.test.ts under test/`);
  return `test/${found}`;
}

function m(name, file, find, replace, tests, more = []) {
  return { name, file, edits: [[find, replace], ...more], tests: tests.map(testFile) };
}

const filters = process.argv.slice(2);
const chosen = MUTANTS.filter(
  (mutant) => filters.length === 0 || filters.some((f) => mutant.name.includes(f)),
);
const results = [];
let restore = null;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    restore?.();
    process.exit(130);
  });
}

for (const mutant of chosen) {
  const path = `${root}${mutant.file}`;
  const original = readFileSync(path, 'utf8');
  const counts = mutant.edits.map(([find]) => original.split(find).length - 1);
  if (counts.some((n) => n !== 1)) {
    results.push({
      ...mutant,
      verdict: `NOT APPLIED (texts found ${counts.join('/')} times: update it)`,
      ms: 0,
    });
    console.log(`${results.at(-1).verdict} ${mutant.name}`);
    continue;
  }
  restore = () => writeFileSync(path, original);
  const started = Date.now();
  try {
    let mutated = original;
    for (const [find, replace] of mutant.edits) mutated = mutated.replace(find, () => replace);
    writeFileSync(path, mutated);
    const run = spawnSync(
      process.execPath,
      [`${root}node_modules/vitest/vitest.mjs`, 'run', '--bail=1', ...mutant.tests],
      { cwd: root, encoding: 'utf8', timeout: 300_000, env: process.env },
    );
    const verdict = run.status === 0 ? 'SURVIVED' : run.signal ? `killed (timeout, ${run.signal})` : 'killed';
    results.push({ ...mutant, verdict, ms: Date.now() - started });
  } finally {
    restore();
    restore = null;
  }
  const last = results.at(-1);
  console.log(
    `${last.verdict.padEnd(10)} ${mutant.name} (${Math.round(last.ms / 1000)} s: ${mutant.tests.join(' ')})`,
  );
}

const survivors = results.filter((r) => r.verdict !== 'killed' && !r.verdict.startsWith('killed'));
console.log(`\n| mutant | file | tests run | result |\n| --- | --- | --- | --- |`);
for (const r of results) {
  console.log(
    `| ${r.name} | ${r.file.replace('src/storage/', '')} | ${r.tests.map((t) => t.slice(t.lastIndexOf('/') + 1, -8)).join(', ')} | ${r.verdict} |`,
  );
}
console.log(
  `\n${results.length - survivors.length} of ${results.length} killed; survivors: ${survivors.map((s) => s.name).join(', ') || 'none'}`,
);
process.exitCode = survivors.length === 0 ? 0 : 1;
