// Issue 33: `leasehold work <module>` runs a module of defineTask exports, checked against the
// installed tarball (scripts/check-pack.sh runs this in the app): the package's own bin, a task
// exported alone and one in an array, each handling a job, then a graceful stop on SIGTERM.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Leasehold, startEmbeddedPostgres } from 'leasehold';

writeFileSync(
  'tasks.mjs',
  `import { defineTask } from 'leasehold';
export const welcome = defineTask('welcome', { handler: async (job) => console.log('welcomed ' + job.payload.to) });
export const more = [defineTask('invoice', { handler: async (job) => console.log('invoiced ' + job.payload.n) })];
`,
);

const server = await startEmbeddedPostgres();
const lh = new Leasehold({ connectionString: server.connectionString });
let child;
try {
  await lh.migrate();
  await lh.enqueue('welcome', { to: 'ada' });
  await lh.enqueue('invoice', { n: 7 });
  child = spawn('node_modules/.bin/leasehold', ['work', './tasks.mjs'], {
    env: { ...process.env, DATABASE_URL: server.connectionString },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 60_000;
  while (!(output.includes('welcomed ada') && output.includes('invoiced 7'))) {
    if (Date.now() > deadline) throw new Error(`leasehold work did not run both tasks:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGTERM');
  const exit = await exited;
  if (exit.code !== 0)
    throw new Error(
      `leasehold work did not stop gracefully on SIGTERM (${JSON.stringify(exit)}):\n${output}`,
    );
  console.log('leasehold work runs a module of defineTask exports, stops on SIGTERM ok');
} finally {
  child?.kill('SIGKILL');
  await lh.close();
  await server.stop();
}
