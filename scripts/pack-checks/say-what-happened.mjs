// Issue 38's findings, checked black-box against the installed tarball (scripts/check-pack.sh runs
// this inside the app that installed it): only the package's public API, its CLI binary and a real
// server (embedded, started here). Each check throws with what it saw when it fails.
import { spawn, spawnSync } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { isLeaseholdError, Leasehold, startEmbeddedPostgres } from 'leasehold';

// An internal statement's name: a prefix and a 10-hex-digit digest (leasehold_enqueue_one_3ab6a29fdd).
const STATEMENT_NAME = /[a-z_]+_[0-9a-f]{10}\b/;
const SQLSTATE = /^[0-9A-Z]{5}$/;

function check(ok, what, seen) {
  if (!ok)
    throw new Error(
      `${what}; saw: ${seen instanceof Error ? `${seen.name}: ${seen.message}` : JSON.stringify(seen)}`,
    );
}

/** An error as the API shows it: no internal statement name, `sqlState` only a SQLSTATE. */
function speaksTheApi(err, what) {
  check(!STATEMENT_NAME.test(err.message), `${what}: the message names an internal statement`, err);
  check(
    err.sqlState === undefined || SQLSTATE.test(err.sqlState),
    `${what}: sqlState is not a SQLSTATE (${err.sqlState})`,
    err,
  );
}

/** A TCP relay to the server that can be cut (every connection dropped, new ones refused) and restored. */
async function relayTo(port) {
  const sockets = new Set();
  let up = true;
  const server = createServer((client) => {
    if (!up) return client.destroy();
    const upstream = connect(port, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    cut() {
      up = false;
      for (const s of sockets) s.destroy();
    },
    restore() {
      up = true;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A port nothing listens on. */
async function refusedPort() {
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const server = await startEmbeddedPostgres();
const url = new URL(server.connectionString);
const schema = 'black_box';
const lh = new Leasehold({ connectionString: server.connectionString, schema });
const relay = await relayTo(Number(url.port));
const children = [];
const relayUrl = new URL(server.connectionString);
relayUrl.port = String(relay.port);
try {
  await lh.migrate();

  // 1. start() against a refused port rejects with DATABASE, and the process then exits by itself.
  const refused = `postgres://postgres@127.0.0.1:${await refusedPort()}/postgres`;
  const startScript = `
    import { Leasehold } from 'leasehold';
    const lh = new Leasehold({ connectionString: ${JSON.stringify(refused)} });
    const worker = lh.worker({ queues: { emails: async () => {} } });
    const err = await worker.start().then(() => null, (e) => e);
    console.log(JSON.stringify({ code: err?.code, message: err?.message, sqlState: err?.sqlState }));`;
  const started = spawnSync(process.execPath, ['--input-type=module', '-e', startScript], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  check(
    started.status === 0 && started.signal === null,
    'start() against a refused port: the process did not exit by itself',
    started,
  );
  const startError = JSON.parse(started.stdout.trim().split('\n').at(-1));
  check(
    startError.code === 'DATABASE',
    'start() against a refused port: expected a DATABASE error',
    startError,
  );
  speaksTheApi(startError, 'start() against a refused port');
  console.log('start against a refused port: rejects with DATABASE, process exits ok');

  // 2. A down server and a closed client: errors that speak the API.
  const viaRelay = new Leasehold({
    connectionString: relayUrl.href,
    schema,
  });
  await viaRelay.enqueue('emails', { n: 0 });
  relay.cut();
  const down = await viaRelay.enqueue('emails', { n: 1 }).then(
    () => null,
    (e) => e,
  );
  relay.restore();
  check(isLeaseholdError(down, 'DATABASE'), 'enqueue on a down server: expected a DATABASE error', down);
  speaksTheApi(down, 'enqueue on a down server');
  check(
    /\benqueue\b/.test(down.message),
    'enqueue on a down server: the message does not name the call',
    down,
  );
  await viaRelay.close();
  const closed = await viaRelay.enqueue('emails', { n: 2 }).then(
    () => null,
    (e) => e,
  );
  check(isLeaseholdError(closed, 'CLIENT_CLOSED'), 'enqueue after close(): expected CLIENT_CLOSED', closed);
  speaksTheApi(closed, 'enqueue after close()');
  console.log('down server and closed client: errors name the call, no statement names, SQLSTATEs only ok');

  // 3. A worker whose database drops for 4 s: one warning, and its work finished after.
  // 40 jobs of 200 ms, two at a time: about 4 s of work, cut for 4 s after the fourth, so most of
  // it is claimed, run or recorded after the database is back.
  const jobs = 40;
  await lh.enqueueMany(
    'outage',
    Array.from({ length: jobs }, (_, n) => ({ payload: { n } })),
  );
  const workerScript = `
    import { Leasehold } from 'leasehold';
    const lh = new Leasehold({ connectionString: process.env.RELAY_URL, schema: ${JSON.stringify(schema)} });
    let done = 0;
    const worker = lh.worker({ queues: { outage: { concurrency: 2, handler: async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      console.log('done ' + ++done);
    } } } });
    await worker.start();
    process.stdin.once('data', async () => { process.stdin.destroy(); await worker.stop(); await lh.close(); });`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', workerScript], {
    env: { ...process.env, RELAY_URL: relayUrl.href },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  children.push(child);
  const until = async (test, what, ms = 60_000) => {
    const deadline = Date.now() + ms;
    while (!(await test())) {
      if (Date.now() > deadline)
        throw new Error(`${what}\nworker stdout:\n${stdout}\nworker stderr:\n${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  await until(() => stdout.includes('done 4\n'), 'the worker did not start its jobs');
  relay.cut();
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  relay.restore();
  const succeeded = async () =>
    (await lh.stats()).queues.find((q) => q.queue === 'outage')?.completedInWindow ?? 0;
  await until(
    async () => (await succeeded()) === jobs,
    `the worker did not finish its ${jobs} jobs after the outage`,
  );
  child.stdin.end('stop\n');
  const exit = await exited;
  check(exit.code === 0, `the worker did not stop cleanly\n${stderr}`, exit);
  const unreachable = stderr.match(/LEASEHOLD_DATABASE_UNREACHABLE/g)?.length ?? 0;
  check(
    unreachable === 1,
    `a 4 s outage: expected one LEASEHOLD_DATABASE_UNREACHABLE warning\n${stderr}`,
    unreachable,
  );
  check(!stderr.includes('password'), 'the warning must not carry a password', stderr);
  console.log(`a 4 s outage: one LEASEHOLD_DATABASE_UNREACHABLE warning, all ${jobs} jobs finished after ok`);

  // 4. Queues are known: a typo is refused, { create: true } pauses an empty queue, no phantom.
  await lh.enqueue('emails', { n: 3 });
  const typo = await lh.pauseQueue('emials').then(
    () => null,
    (e) => e,
  );
  check(
    isLeaseholdError(typo, 'QUEUE_NOT_FOUND') && typo.message.includes('emails'),
    "pauseQueue('emials'): expected QUEUE_NOT_FOUND naming emails",
    typo,
  );
  await lh.pauseQueue('reports', { create: true });
  const names = (await lh.listQueues()).map((q) => q.name);
  check(
    !names.includes('emials') && names.includes('reports'),
    'listQueues: a phantom queue, or the created one missing',
    names,
  );
  const cli = spawnSync('node_modules/.bin/leasehold', ['pause', 'emials', '--schema', schema], {
    env: { ...process.env, DATABASE_URL: server.connectionString },
    encoding: 'utf8',
    timeout: 30_000,
  });
  check(
    cli.status !== 0 && `${cli.stdout}${cli.stderr}`.includes('"emails"'),
    'leasehold pause emials: expected a non-zero exit naming "emails"',
    cli,
  );
  console.log('unknown queues refused by the API and the CLI, no phantom, { create: true } ok');

  // 5. A drained queue stays visible, with its completions in the window.
  const drained = await lh.runUntilIdle({ queues: { emails: async () => {} } });
  check(drained.succeeded >= 1, 'the emails jobs did not run', drained);
  const listed = (await lh.listQueues()).find((q) => q.name === 'emails');
  check(listed && listed.pending === 0 && listed.running === 0, 'a drained queue left listQueues()', listed);
  const stats = (await lh.stats()).queues.find((q) => q.queue === 'emails');
  check(
    stats && stats.completedInWindow >= 1,
    'a drained queue left stats(), or lost its completions',
    stats,
  );
  console.log('a drained queue stays in listQueues() and stats() with completedInWindow ok');
} finally {
  for (const child of children) child.kill('SIGKILL');
  await relay.close();
  await lh.close();
  await server.stop();
}
