#!/usr/bin/env bash
# The README's two commands, as a newcomer runs them: from a fresh clone in a folder only its owner
# may enter (mode 0700, like /root or a `mktemp -d` checkout), as the user running this script
# (root in CI, where the embedded server then runs as the `postgres` user, which cannot enter that
# folder), with no DATABASE_URL: `npm ci && npm run demo`, then `npm test`. .ci/run runs this in
# place of a plain `npm test` on the embedded server, so the suite runs once, from the clone. It
# tests what is committed, as any clone would.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
  echo "check-fresh-clone: note: uncommitted changes in $root are not part of the clone" >&2
fi
work=$(mktemp -d)
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT
git clone --quiet "$root" "$work/leasehold"
cd "$work/leasehold"
echo "fresh clone of $(git rev-parse --short HEAD) in $work (mode $(stat -c %a "$work")), as $(id -un)"
env -u DATABASE_URL npm ci --no-audit --no-fund
env -u DATABASE_URL npm run demo
env -u DATABASE_URL npm test
