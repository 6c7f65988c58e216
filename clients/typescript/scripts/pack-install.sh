#!/usr/bin/env bash
# Packs this package (npm pack: runs `prepare`, so dist/ is fresh) and installs the
# tarball into a new project in DIR, as a user would: `npm install ./tarball pg`.
# The pg, @types/pg and @types/node versions are the ones of package-lock.json.
#   scripts/pack-install.sh DIR     -> DIR/project, with node_modules/@opledger/client
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=$1
mkdir -p "$dest/project"
tgz=$(cd "$here" && npm pack --silent --pack-destination "$dest" | tail -n1)
ver() { node -e "console.log(require('$here/package-lock.json').packages['node_modules/$1'].version)"; }
cat >"$dest/project/package.json" <<JSON
{
  "name": "opledger-client-smoke",
  "private": true,
  "type": "module",
  "dependencies": {
    "@opledger/client": "file:../$tgz",
    "pg": "$(ver pg)"
  },
  "devDependencies": {
    "@types/node": "$(ver @types/node)",
    "@types/pg": "$(ver @types/pg)"
  }
}
JSON
cd "$dest/project"
npm install --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null
test -f node_modules/@opledger/client/dist/src/index.js
test ! -L node_modules/@opledger/client   # a real copy from the tarball, not a link to the work tree
echo "$dest/$tgz"
