'use strict';
// A throwaway PostgreSQL 15 cluster owned by the chaos run: initdb in a temp
// dir as the non-root `postgres` OS user (via runuser when we are root),
// loopback TCP on a free port, and crash/restart with pg_ctl -m immediate.

const fs = require('node:fs');
const path = require('node:path');
const net = require('node:net');
const os = require('node:os');
const { spawn, spawnSync, execFileSync } = require('node:child_process');

const BINDIR = process.env.PG_BINDIR || '/usr/lib/postgresql/15/bin';
const isRoot = process.getuid && process.getuid() === 0;

function asPgArgs(cmd, args) {
  return isRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}
function runPgSync(cmd, args, { timeoutMs = 120000 } = {}) {
  const [c, a] = asPgArgs(cmd, args);
  const r = spawnSync(c, a, { encoding: 'utf8', timeout: timeoutMs });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr || r.stdout || r.error}`);
  return r.stdout;
}
function runPg(cmd, args, { timeoutMs = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    const [c, a] = asPgArgs(cmd, args);
    const p = spawn(c, a, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; }); p.stderr.on('data', (d) => { out += d; });
    const t = setTimeout(() => { p.kill('SIGKILL'); }, timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); if (code === 0) resolve(out); else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${out}`)); });
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

class Cluster {
  constructor(baseDir) {
    this.base = baseDir;
    this.data = path.join(baseDir, 'pgdata');
    this.sock = path.join(baseDir, 'sock');
    this.log = path.join(baseDir, 'postgresql.log');
    this.running = false;
  }
  async init() {
    this.port = await freePort();
    fs.mkdirSync(this.sock, { recursive: true });
    if (isRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
      fs.chownSync(this.base, uid, gid); fs.chownSync(this.sock, uid, gid);
    }
    runPgSync(path.join(BINDIR, 'initdb'), ['-D', this.data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']);
    fs.appendFileSync(path.join(this.data, 'postgresql.conf'), [
      '', '# opledger chaos harness',
      `listen_addresses = '127.0.0.1'`, `port = ${this.port}`, `unix_socket_directories = '${this.sock}'`,
      'max_connections = 100', 'shared_buffers = 64MB', 'fsync = on', 'synchronous_commit = on',
      'log_min_messages = warning', 'log_line_prefix = \'%m [%p] %a \'', `log_min_error_statement = panic`,
      'lock_timeout = 0', 'deadlock_timeout = 200ms', '',
    ].join('\n'));
    await this.start();
  }
  async start() {
    await runPg(path.join(BINDIR, 'pg_ctl'), ['-D', this.data, '-l', this.log, '-w', '-t', '90', 'start']);
    this.running = true;
  }
  async crash() {
    this.running = false;
    await runPg(path.join(BINDIR, 'pg_ctl'), ['-D', this.data, '-m', 'immediate', '-w', '-t', '60', 'stop']);
  }
  stopSync() {
    try { runPgSync(path.join(BINDIR, 'pg_ctl'), ['-D', this.data, '-m', 'immediate', '-w', '-t', '30', 'stop'], { timeoutMs: 40000 }); } catch (_) { /* not running */ }
    this.running = false;
  }
  pgConfig() { return { host: '127.0.0.1', port: this.port, user: 'postgres', database: 'postgres' }; }
}

function makeTempBase() {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'opledger-chaos-'));
  fs.chmodSync(d, 0o755);
  return d;
}

module.exports = { Cluster, makeTempBase, freePort, isRoot };
