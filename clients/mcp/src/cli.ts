// opledger-mcp: the command line.
//
//   opledger-mcp [--config FILE] [--name NAME] [LISTEN OPTIONS] -- COMMAND [ARGS...]
//   opledger-mcp [--config FILE] [--name NAME] [LISTEN OPTIONS] --url URL
//   opledger-mcp register  --config FILE [-- COMMAND ... | --url URL]      (as an opledger_admin)
//   opledger-mcp reconcile --config FILE [--once] [--interval 5s] [--batch 20] -- COMMAND ... | --url URL
//   opledger-mcp approve OPERATION_ID [--approver NAME] [--note TEXT]     (as an opledger_approver)

import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { checkRegistrations, listServerTools, policiesOf, reconcileOnce, registerPolicies } from './admin.js';
import { ConfigError, loadConfig, parseDuration, type GatewayConfig } from './config.js';
import { LedgerDb, makePool } from './db.js';
import { childEnv } from './env.js';
import { Gateway, type Session } from './gateway.js';
import { httpGuard, TOKEN_VARIABLE, type HttpGuard } from './http_guard.js';
import { log, setLogLevel, type Level } from './log.js';

const USAGE = `usage:
  opledger-mcp [--config FILE] [--name NAME] [LISTEN OPTIONS] -- COMMAND [ARGS...]
  opledger-mcp [--config FILE] [--name NAME] [LISTEN OPTIONS] --url URL
  opledger-mcp register  --config FILE [-- COMMAND [ARGS...] | --url URL]
  opledger-mcp reconcile --config FILE [--once] [--interval 5s] [--batch 20] (-- COMMAND [ARGS...] | --url URL)
  opledger-mcp approve OPERATION_ID [--approver NAME] [--note TEXT]

Without --listen the gateway speaks MCP on stdin/stdout. LISTEN OPTIONS (Streamable HTTP at /mcp):
  --listen [HOST:]PORT   HOST defaults to 127.0.0.1 (loopback); any other address needs a token
  --token-file FILE      every request must carry "Authorization: Bearer TOKEN" (the file's content);
                         or the variable ${TOKEN_VARIABLE}. Never on the command line.
  --allow-host NAME      a host name clients address the gateway by (Host header; repeatable);
                         loopback names are allowed on loopback and wildcard binds
  --allow-origin ORIGIN  a browser origin allowed to call (Origin header; repeatable)

The ledger: DATABASE_URL, or the libpq variables PGHOST PGPORT PGUSER PGDATABASE PGPASSWORD.
A wrapped server (-- COMMAND) gets the gateway's environment without DATABASE_URL, OPLEDGER_*
and every libpq variable (PG...).
Approvals through elicitation use OPLEDGER_APPROVER_DATABASE_URL (an opledger_approver role);
inline lookups resolve through OPLEDGER_RECONCILER_DATABASE_URL (an opledger_reconciler role).
Logs: one JSON line per event on stderr (OPLEDGER_MCP_LOG_LEVEL=debug|info|warn|error).
See docs/mcp.md.`;

interface Args {
  mode: 'run' | 'register' | 'reconcile' | 'approve' | 'help';
  config?: string;
  name?: string;
  listen?: string;
  tokenFile?: string;
  allowHosts?: string[];
  allowOrigins?: string[];
  url?: string;
  command?: string[];
  once?: boolean;
  interval?: string;
  batch?: number;
  operationId?: string;
  approver?: string;
  note?: string;
  logLevel?: Level;
}

export function parseArgs(argv: string[]): Args {
  const a: Args = { mode: 'run' };
  let i = 0;
  if (['register', 'reconcile', 'approve', 'help'].includes(argv[0])) { a.mode = argv[0] as Args['mode']; i = 1; }
  const value = (flag: string) => {
    const v = argv[++i];
    if (v === undefined) throw new ConfigError(`${flag} needs a value`);
    return v;
  };
  for (; i < argv.length; i++) {
    const x = argv[i];
    if (x === '--') { a.command = argv.slice(i + 1); break; }
    else if (x === '--config' || x === '-c') a.config = value(x);
    else if (x === '--name') a.name = value(x);
    else if (x === '--listen') a.listen = value(x);
    else if (x === '--token-file') a.tokenFile = value(x);
    else if (x === '--allow-host') (a.allowHosts ??= []).push(value(x));
    else if (x === '--allow-origin') (a.allowOrigins ??= []).push(value(x));
    else if (x === '--token' || x.startsWith('--token=')) {
      throw new ConfigError(`--token: a token on the command line is visible to every user of this machine (ps); ` +
        `give it in a file (--token-file FILE) or in the variable ${TOKEN_VARIABLE}`);
    }
    else if (x === '--url') a.url = value(x);
    else if (x === '--once') a.once = true;
    else if (x === '--interval') a.interval = value(x);
    else if (x === '--batch') a.batch = Number(value(x));
    else if (x === '--approver') a.approver = value(x);
    else if (x === '--note') a.note = value(x);
    else if (x === '--log-level') a.logLevel = value(x) as Level;
    else if (x === '-h' || x === '--help') a.mode = 'help';
    else if (a.mode === 'approve' && !a.operationId && !x.startsWith('-')) a.operationId = x;
    else throw new ConfigError(`unknown argument: ${x}`);
  }
  if (a.command && a.command.length === 0) throw new ConfigError('nothing after --: give the command of the MCP server');
  if (a.command && a.url) throw new ConfigError('give either -- COMMAND or --url, not both');
  if (!a.listen && (a.tokenFile || a.allowHosts || a.allowOrigins)) {
    throw new ConfigError('--token-file, --allow-host and --allow-origin belong with --listen');
  }
  return a;
}

function downstreamFactory(a: Args): () => Transport {
  if (a.url) {
    const url = new URL(a.url);
    return () => new StreamableHTTPClientTransport(url);
  }
  if (a.command) {
    const [command, ...args] = a.command;
    return () => new StdioClientTransport({ command, args, env: childEnv(), stderr: 'inherit' });
  }
  throw new ConfigError('give the MCP server to wrap: -- COMMAND [ARGS...] or --url URL');
}

function serverName(a: Args, cfg: GatewayConfig): string {
  if (a.name) return a.name;
  if (cfg.server) return cfg.server;
  if (a.url) return new URL(a.url).host;
  const cmd = a.command ?? [];
  // "node path/to/server.js" -> "server"; "mcp-server-memory" -> itself.
  const pick = cmd.find((c, idx) => idx > 0 && !c.startsWith('-')) && /^(node|npx|python3?|uvx|deno|bun)$/.test(path.basename(cmd[0]))
    ? cmd.find((c, idx) => idx > 0 && !c.startsWith('-'))! : cmd[0] ?? 'server';
  return path.basename(pick).replace(/\.(m?js|py|ts)$/, '');
}

async function serveHttp(gw: Gateway, guard: HttpGuard): Promise<http.Server> {
  const { host, port } = guard;
  const sessions = new Map<string, { t: StreamableHTTPServerTransport; s?: Session }>();
  const server = http.createServer(async (req, res) => {
    try {
      const refused = guard.check(req);
      if (refused) {
        log('warn', 'http_refused', { status: refused.status, reason: refused.message.split(':')[0], remote: req.socket.remoteAddress });
        res.writeHead(refused.status, { 'content-type': 'application/json', ...(refused.headers ?? {}) })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: refused.message } }));
        return;
      }
      const sid = req.headers['mcp-session-id'];
      const existing = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (existing) { await existing.t.handleRequest(req, res); return; }
      if (req.method !== 'POST' || sid !== undefined) {
        res.writeHead(sid !== undefined ? 404 : 400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: sid ? 'unknown session' : 'send initialize first' } }));
        return;
      }
      const id = randomUUID();
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => id,
        onsessionclosed: (closed) => { sessions.delete(closed); },
      });
      const entry: { t: StreamableHTTPServerTransport; s?: Session } = { t };
      sessions.set(id, entry);
      t.onclose = () => { sessions.delete(id); };
      entry.s = await gw.open(t, id);
      const prevClose = t.onclose;
      t.onclose = () => { sessions.delete(id); prevClose?.(); };
      await t.handleRequest(req, res);
      if (!t.sessionId) { sessions.delete(id); await entry.s.close('not an initialize request'); }
    } catch (e) {
      log('error', 'http_request_failed', { error: (e as Error).message });
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(port, host, () => resolve()); });
  const addr = server.address();
  log('info', 'listening', {
    url: `http://${typeof addr === 'object' && addr ? `${host.includes(':') ? `[${host}]` : host}:${addr.port}` : `${host}:${port}`}/mcp`,
    hosts: guard.hostnames, token: guard.token,
  });
  return server;
}

async function runGateway(a: Args, cfg: GatewayConfig): Promise<void> {
  // Refuse an exposed --listen before anything starts.
  const guard = a.listen ? httpGuard({ listen: a.listen, tokenFile: a.tokenFile, allowHosts: a.allowHosts, allowOrigins: a.allowOrigins }) : undefined;
  const pool = makePool();
  const db = new LedgerDb(pool);
  const approverUrl = process.env.OPLEDGER_APPROVER_DATABASE_URL;
  const approverDb = approverUrl ? new LedgerDb(makePool('OPLEDGER_APPROVER_DATABASE_URL', 2)) : undefined;
  const reconcilerDb = process.env.OPLEDGER_RECONCILER_DATABASE_URL ? new LedgerDb(makePool('OPLEDGER_RECONCILER_DATABASE_URL', 2)) : undefined;
  const gw = new Gateway({ config: cfg, db, approverDb, reconcilerDb, serverName: serverName(a, cfg), connectDownstream: downstreamFactory(a) });
  // Fail fast when the ledger is not there, and warn about policies that differ from the registered ones.
  await checkRegistrations(db, cfg).catch((e) => { throw new Error(`cannot reach the ledger: ${(e as Error).message}`); });
  await pool.query("SELECT 1 FROM pg_extension WHERE extname = 'opledger'").then((r) => {
    if (r.rowCount === 0) throw new Error('the opledger extension is not installed in this database (CREATE EXTENSION opledger)');
  });

  let httpServer: http.Server | undefined;
  let done!: () => void;
  const finished = new Promise<void>((r) => { done = r; });
  const stop = async (reason: string) => {
    log('info', 'shutdown', { reason });
    httpServer?.close();
    await gw.shutdown(reason);
    await pool.end().catch(() => {});
    await approverDb?.pool.end().catch(() => {});
    await reconcilerDb?.pool.end().catch(() => {});
    done();
  };
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => { void stop(sig); });

  if (guard) {
    httpServer = await serveHttp(gw, guard);
  } else {
    const s = await gw.open(new StdioServerTransport());
    process.stdin.on('end', () => { void s.close('stdin closed').then(() => stop('host closed stdin')); });
    const check = setInterval(() => { if (gw.sessions.size === 0) { clearInterval(check); void stop('session closed'); } }, 200);
    check.unref();
  }
  await finished;
}

async function runRegister(a: Args, cfg: GatewayConfig): Promise<void> {
  const db = new LedgerDb(makePool());
  try {
    let tools: import('./policy.js').ToolInfo[] = [];
    if (a.command || a.url) {
      const { client, tools: listed } = await listServerTools(downstreamFactory(a)());
      tools = listed;
      await client.close();
    }
    const policies = policiesOf(cfg, tools);
    await registerPolicies(db, policies);
    for (const p of policies) {
      process.stdout.write(`${p.ledgerTool}\t${p.effect}\t(${p.effectSource})\n`);
    }
  } finally {
    await db.pool.end();
  }
}

async function runReconcile(a: Args, cfg: GatewayConfig): Promise<void> {
  const db = new LedgerDb(makePool());
  const { client, tools } = await listServerTools(downstreamFactory(a)());
  const worker = `opledger-mcp-reconciler@${os.hostname()}:${process.pid}`;
  const interval = parseDuration(a.interval, 5000, '--interval');
  let stopping = false;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => { stopping = true; });
  try {
    for (;;) {
      const r = await reconcileOnce(db, cfg, client, tools, worker, a.batch ?? 20, '1 minute');
      log('info', 'reconcile_batch', r);
      if (a.once) {
        process.stdout.write(`claimed ${r.claimed}, resolved ${r.resolved}\n`);
        break;
      }
      if (stopping) break;
      if (r.claimed === 0) await new Promise((res) => setTimeout(res, interval));
      if (stopping) break;
    }
  } finally {
    await client.close().catch(() => {});
    await db.pool.end();
  }
}

async function runApprove(a: Args): Promise<void> {
  if (!a.operationId) throw new ConfigError('approve: give the operation ID');
  const db = new LedgerDb(makePool(process.env.OPLEDGER_APPROVER_DATABASE_URL ? 'OPLEDGER_APPROVER_DATABASE_URL' : 'DATABASE_URL', 1));
  try {
    const row = await db.ledger.approve(a.operationId, a.approver ?? process.env.USER ?? 'admin-cli', a.note);
    process.stdout.write(`approved ${row.operationId} (${row.tool}); the next identical call runs it once\n`);
  } finally {
    await db.pool.end();
  }
}

export async function main(argv: string[]): Promise<number> {
  let a: Args;
  try {
    a = parseArgs(argv);
    if (a.logLevel) setLogLevel(a.logLevel);
    if (a.mode === 'help') { process.stdout.write(USAGE + '\n'); return 0; }
    const cfg = loadConfig(a.config);
    switch (a.mode) {
      case 'run': await runGateway(a, cfg); return 0;
      case 'register': await runRegister(a, cfg); return 0;
      case 'reconcile': await runReconcile(a, cfg); return 0;
      case 'approve': await runApprove(a); return 0;
    }
  } catch (e) {
    const msg = (e as Error).message;
    process.stderr.write(`opledger-mcp: ${msg}\n`);
    if (e instanceof ConfigError) process.stderr.write(USAGE + '\n');
    log('error', 'fatal', { error: msg });
    return e instanceof ConfigError ? 2 : 1;
  }
  return 0;
}
