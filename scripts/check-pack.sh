#!/usr/bin/env bash
# Proves the package works as users install it: pack it, install the tarball into an empty
# project, import it with plain Node ESM, and type-check a consumer against its declarations.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$root"
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
cd "$work"
npm init -y >/dev/null
npm pkg set type=module >/dev/null
npm install --silent --no-audit --no-fund "./$tarball" >/dev/null

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
