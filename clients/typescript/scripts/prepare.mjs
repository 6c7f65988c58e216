// Builds dist/ (tsc -p tsconfig.build.json): npm's `prepare` step.
//
// npm runs `prepare` here on `npm ci` / `npm install` in this folder and on `npm pack`,
// but also when this folder is another project's dependency (`file:../typescript` in
// clients/mcp, `npm install /path/to/clients/typescript`). Then npm runs it in this
// folder without having installed this package's devDependencies, so `tsc` may be
// missing: the script installs them first (npm ci from package-lock.json, scripts off),
// as npm itself does for a dependency from git. Plain Node 18 and any npm from 8 on.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(here, 'node_modules', 'typescript', 'bin', 'tsc');

// The settings of the npm that runs this script reach it as npm_config_* variables. Some
// would make the inner install act on the outer project (local_prefix, prefix) or leave
// the devDependencies out (omit, production); only where and how to fetch packages
// carries over.
const KEEP = new Set(['cache', 'userconfig', 'globalconfig', 'registry', 'proxy', 'https_proxy', 'noproxy',
  'cafile', 'ca', 'strict_ssl', 'offline', 'prefer_offline', 'prefer_online', 'fetch_retries']);
function innerEnv() {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    const m = /^npm_config_(.*)$/i.exec(key);
    if (m ? KEEP.has(m[1].toLowerCase().replace(/-/g, '_')) : !/^npm_/i.test(key)) env[key] = value;
  }
  return env;
}

function run(command, args, env = process.env) {
  const r = spawnSync(command, args, { cwd: here, env, stdio: 'inherit' });
  if (r.error) throw r.error;
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (!existsSync(tsc)) {
  console.error(`@opledger/client: installing its build tools (devDependencies) in ${here} to build dist/`);
  const npm = process.env.npm_execpath;
  const [command, prefix] = npm && /\.[cm]?js$/.test(npm) ? [process.execPath, [npm]] : ['npm', []];
  run(command, [...prefix, 'ci', '--include=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'],
    innerEnv());
}
run(process.execPath, [tsc, '-p', 'tsconfig.build.json']);
