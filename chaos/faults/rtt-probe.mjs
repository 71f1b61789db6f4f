// Measures the round trip a worker host sees to PostgreSQL: run inside the host's namespace (`ip
// netns exec`), it opens one connection through the host's relay and times `SELECT 1` queries one
// after another. Prints { n, medianMs, minMs, maxMs } as JSON. Used by the many-hosts harness
// (chaos/harness/hosts-run.mjs) to state the latency phase's delay as measured, not as configured.
//   node chaos/faults/rtt-probe.mjs CONNECTION_STRING [COUNT]
import pg from 'pg';

const [connectionString, countText = '40'] = process.argv.slice(2);
const count = Number(countText);
if (!connectionString || !Number.isInteger(count) || count < 1 || count > 10_000) {
  console.error('usage: node chaos/faults/rtt-probe.mjs CONNECTION_STRING [COUNT 1..10000]');
  process.exit(2);
}
const client = new pg.Client({ connectionString, application_name: 'lhh-rtt-probe' });
await client.connect();
try {
  for (let i = 0; i < 3; i++) await client.query('SELECT 1'); // warm: plans, buffers, the relay's path
  const times = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await client.query('SELECT 1');
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const round = (ms) => Math.round(ms * 10) / 10;
  console.log(
    JSON.stringify({
      n: count,
      medianMs: round(times[Math.floor(count / 2)]),
      minMs: round(times[0]),
      maxMs: round(times[count - 1]),
    }),
  );
} finally {
  await client.end();
}
