// The flows rules of the chaos checker, kept apart from checker.mjs (which holds the lease rules):
// read after a run has healed and drained, from the ledger's runs (`<ledger>.runs`: one row per
// handler run, started_at in database time) and Leasehold's flow tables.
//
// - Order: every run of a flow child started after each of its parents had succeeded, that is
//   after the parent's accepted completion (its finished_jobs row; finished_at is that
//   transaction's time, before its commit, and the child could be claimed only after the commit).
//   A child with onParentDead 'run' may also have started after a parent ended dead or cancelled.
// - Stranded: no child still waits for parents that have all succeeded (a lost release).

const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;

/** Measures the flow rules; `schemas` names Leasehold's schema and the ledger's (default leasehold, chaos). */
export async function checkFlows(db, { leasehold = 'leasehold', ledger = 'chaos' } = {}) {
  if (!IDENT.test(leasehold) || !IDENT.test(ledger)) throw new Error('chaos: bad schema name');
  const s = `"${leasehold}"`;
  const { rows } = await db.query(`
    WITH child_runs AS (
      SELECT r.job_id, r.token, r.started_at
      FROM "${ledger}".runs AS r
      WHERE EXISTS (SELECT 1 FROM ${s}.job_dependencies AS d WHERE d.child_id = r.job_id)
    ),
    early AS (
      SELECT c.job_id, c.token, d.parent_id
      FROM child_runs AS c
      JOIN ${s}.job_dependencies AS d ON d.child_id = c.job_id
      JOIN ${s}.flow_nodes AS n ON n.job_id = c.job_id
      LEFT JOIN ${s}.finished_jobs AS f ON f.id = d.parent_id
      LEFT JOIN ${s}.jobs AS p ON p.id = d.parent_id
      WHERE NOT (
        (f.id IS NOT NULL AND f.finished_at <= c.started_at)
        OR (n.on_parent_dead = 'run' AND p.status::text IN ('dead', 'cancelled') AND p.finished_at <= c.started_at))
    ),
    stranded AS (
      SELECT c.id
      FROM ${s}.jobs AS c
      WHERE c.status = 'pending' AND c.waiting_parents > 0
        AND EXISTS (SELECT 1 FROM ${s}.job_dependencies AS d WHERE d.child_id = c.id)
        AND NOT EXISTS (
          SELECT 1 FROM ${s}.job_dependencies AS d
          WHERE d.child_id = c.id AND NOT EXISTS (SELECT 1 FROM ${s}.finished_jobs AS f WHERE f.id = d.parent_id))
    )
    SELECT (SELECT count(*) FROM child_runs)::int AS child_runs,
           (SELECT count(DISTINCT (job_id, token)) FROM early)::int AS early_runs,
           (SELECT coalesce(jsonb_agg(jsonb_build_object('job', job_id::text, 'token', token::text, 'parent', parent_id::text)), '[]')
              FROM (SELECT * FROM early LIMIT 5) AS e) AS early_examples,
           (SELECT count(*) FROM stranded)::int AS stranded`);
  return rows[0];
}

/** The flow rules as the report lists them: name, measured value, kept or not. */
export function flowInvariants(facts) {
  return [
    {
      name: 'flow child runs started before all their parents succeeded',
      value: `${facts.early_runs} of ${facts.child_runs}`,
      bound: '= 0',
      ok: facts.early_runs === 0,
    },
    {
      name: 'flow children still waiting for parents that all succeeded',
      value: facts.stranded,
      bound: '= 0',
      ok: facts.stranded === 0,
    },
  ];
}
