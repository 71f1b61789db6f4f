// What the numbers were measured on: printed at the top of every run.
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, totalmem } from 'node:os';

const KEY_SETTINGS = ['shared_buffers', 'synchronous_commit', 'fsync', 'max_connections'];

/** Node, CPU and PostgreSQL facts, plus every server setting not at its built-in default. */
export async function describeEnvironment(pool) {
  const version = await pool.query('SELECT version() AS version, current_setting($1) AS short', [
    'server_version',
  ]);
  const settings = await pool.query('SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [
    KEY_SETTINGS,
  ]);
  // 'override' and 'default' are the built-in values; everything else was set by initdb, a config
  // file or the command line and could change the numbers.
  const changed = await pool.query(
    `SELECT name, setting, unit, source FROM pg_settings
     WHERE source NOT IN ('default', 'override', 'client', 'session') ORDER BY name`,
  );
  return {
    node: process.version,
    cores: availableParallelism(),
    cpuModel: cpuModel(),
    memoryGiB: (totalmem() / 2 ** 30).toFixed(1),
    postgres: version.rows[0].short,
    postgresFull: version.rows[0].version,
    settings: Object.fromEntries(settings.rows.map((row) => [row.name, withUnit(row)])),
    nonDefault: changed.rows.map((row) => `${row.name}=${withUnit(row)} (${row.source})`),
  };
}

function withUnit(row) {
  if (row.unit === '8kB') return `${(Number(row.setting) * 8) / 1024} MB`;
  return row.unit ? `${row.setting} ${row.unit}` : row.setting;
}

function cpuModel() {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    return line ? line.split(':')[1].trim() : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * The 1-, 5- and 15-minute load averages. The bench shares the machine with whatever else runs;
 * a load above the core count at the start or end means the numbers are not to be trusted.
 */
export function loadAverage() {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
}

/** The header lines printed before the table. */
export function formatEnvironment(env, server) {
  return [
    `Node ${env.node} · ${env.cores} cores (${env.cpuModel}) · ${env.memoryGiB} GiB RAM`,
    `PostgreSQL ${env.postgres} (${server.embedded ? 'embedded, started by the bench' : 'DATABASE_URL'})`,
    `Key settings: ${Object.entries(env.settings)
      .map(([name, value]) => `${name}=${value}`)
      .join(', ')}`,
    `Non-default settings: ${env.nonDefault.join(', ') || 'none'}`,
    `Load average at start (1/5/15 min): ${loadAverage()}`,
  ].join('\n');
}
