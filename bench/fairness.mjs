// Claim throughput of a round-robin queue against a plain one, as ratios (issue 34). Standalone
// and indicative: `npm run build && node bench/fairness.mjs [jobs] [rounds]` (DATABASE_URL, or an
// embedded server); defaults 20,000 jobs, 3 rounds.
import { openServer } from './lib/server.mjs';
import { measureFairness } from './workloads/fairness.mjs';

const jobs = Number(process.argv[2] ?? 20_000);
const rounds = Number(process.argv[3] ?? 3);
const server = await openServer({ settings: {} });
try {
  const rates = await measureFairness(server.connectionString, { jobs, rounds });
  console.log(`claim + complete, ${jobs} jobs, 4 claimers, batches of 100, median of ${rounds}`);
  for (const [name, rate] of Object.entries(rates)) {
    console.log(
      `${name.padEnd(22)} ${rate.median.toFixed(0).padStart(7)} jobs/s   ratio to plain ${(rate.median / rates.plain.median).toFixed(2)}`,
    );
  }
} finally {
  await server.stop();
}
process.exit(0);
