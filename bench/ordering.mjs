// Claim throughput with ordering keys and with per-key concurrency limits, as ratios to plain
// claims. Standalone: `npm run build && node bench/ordering.mjs` (DATABASE_URL, or an embedded
// server); `npm run bench` runs the same workload (bench/workloads/ordering.mjs).
import { openServer } from './lib/server.mjs';
import { measureOrdering } from './workloads/ordering.mjs';

const server = await openServer({ settings: {} });
try {
  const rates = await measureOrdering(server.connectionString);
  console.log('claim + complete, 20000 jobs, 4 claimers, batches of 100, median of 3');
  for (const [name, rate] of Object.entries(rates)) {
    console.log(
      `${name.padEnd(14)} ${rate.median.toFixed(0).padStart(7)} jobs/s   ratio to plain ${(rate.median / rates.plain.median).toFixed(2)}`,
    );
  }
} finally {
  await server.stop();
}
process.exit(0);
