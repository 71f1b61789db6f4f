// `npm run bench -- --only defaults`: Leasehold at its defaults (adaptive read-ahead) against the
// best hand-tuned `prefetch` of the same worker, measured in the same run. One worker process; no-op
// jobs and 10 ms jobs, at concurrency 1, 16 and 100. For each cell, every setting runs once per
// repetition, interleaved, so a drifting machine spreads over all of them; the tuned reference is
// the candidate with the best median, and the ratio is defaults' median over it.
import { summarize } from '../lib/stats.mjs';
import { measureProcessing } from './processing.mjs';

const CONCURRENCIES = [1, 16, 100];

/**
 * Jobs per run for a cell, sized to keep each run a few seconds on 2 cores: 10 ms jobs at
 * concurrency c run at most 100 × c jobs/s.
 */
function jobsFor(options, jobMs, concurrency) {
  if (jobMs === 0) return options.defaultsJobs;
  return Math.min(options.defaultsJobs, Math.max(500, Math.round((1000 / jobMs) * concurrency * 4)));
}

export async function measureDefaults(ctx, options, log) {
  const candidates = options.tunedPrefetch;
  const cells = [];
  for (const jobMs of [0, options.defaultsJobMs]) {
    for (const concurrency of CONCURRENCIES) cells.push({ jobMs, concurrency });
  }
  const settings = [
    { key: 'defaults', systemKey: 'leasehold', prefetch: 0 },
    ...candidates.map((prefetch) => ({
      key: `prefetch ${prefetch}`,
      systemKey: 'leasehold-prefetch',
      prefetch,
    })),
  ];
  const results = new Map(); // cell index -> setting key -> [jobs/s]
  for (let rep = 0; rep < options.reps; rep++) {
    for (const [index, cell] of cells.entries()) {
      const jobs = jobsFor(options, cell.jobMs, cell.concurrency);
      for (const setting of settings) {
        const r = await measureProcessing({
          systemKey: setting.systemKey,
          processes: 1,
          jobs,
          ctx,
          options: {
            ...options,
            concurrency: cell.concurrency,
            prefetch: setting.prefetch,
            jobMs: cell.jobMs,
          },
          rep,
        });
        log(
          `defaults: ${jobs} jobs of ${cell.jobMs} ms, concurrency ${cell.concurrency}, ${setting.key}, run ${rep + 1}/${options.reps}: ${Math.round(r.jobsPerSec)} jobs/s`,
        );
        if (!results.has(index)) results.set(index, new Map());
        const bySetting = results.get(index);
        if (!bySetting.has(setting.key)) bySetting.set(setting.key, []);
        bySetting.get(setting.key).push(r.jobsPerSec);
      }
    }
  }
  const rows = [];
  for (const [index, cell] of cells.entries()) {
    const bySetting = results.get(index);
    let best = null;
    for (const prefetch of candidates) {
      const summary = summarize(bySetting.get(`prefetch ${prefetch}`));
      if (!best || summary.median > best.summary.median) best = { prefetch, summary };
    }
    const jobs = jobsFor(options, cell.jobMs, cell.concurrency);
    const length = cell.jobMs === 0 ? 'no-op' : `${cell.jobMs} ms`;
    rows.push({
      workload: `Defaults vs tuned: ${jobs} ${length} jobs, 1 process × concurrency ${cell.concurrency}`,
      ours: summarize(bySetting.get('defaults')),
      theirsLabel: `best of prefetch ${candidates.join(', ')} in this run: prefetch ${best.prefetch}`,
      theirs: best.summary,
      kind: 'throughput',
    });
  }
  return rows;
}
