// Test helpers: spawn the gateway in front of a real MCP server and drive it with
// the SDK's real client; talk to the ledger with pg.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const PKG = path.resolve(here, '../..');           // clients/mcp (from dist/test)
export const MAIN = path.join(PKG, 'dist/src/main.js');
export const SERVERS = {
  memory: path.join(PKG, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js'),
  everything: path.join(PKG, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'),
  fault: path.join(PKG, 'dist/test/fixtures/fault-server.js'),
};

export const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'opledger-mcp-test-'));

export function writeConfig(name: string, cfg: unknown): string {
  const file = path.join(tmp, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** The agent's connection string (the gateway's), from the environment the suite sets. */
export function env(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const e: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) e[k] = v;
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) e[k] = v;
  return e;
}

/** Roles (when the installed extension ships them, the suite creates one login per role). */
export const ROLES = {
  agent: process.env.MCP_TEST_AGENT_USER,
  admin: process.env.MCP_TEST_ADMIN_USER,
  approver: process.env.MCP_TEST_APPROVER_USER,
  reconciler: process.env.MCP_TEST_RECONCILER_USER,
};

/** A connection string for one of the roles (or the suite's user when roles are not there). */
export function urlFor(user: string | undefined): string {
  const u = user ?? process.env.PGUSER ?? 'postgres';
  const host = process.env.PGHOST ?? '/tmp';
  const q = `host=${encodeURIComponent(host)}&port=${process.env.PGPORT ?? 5432}`;
  return `postgresql://${encodeURIComponent(u)}@/${encodeURIComponent(process.env.PGDATABASE ?? 'postgres')}?${q}`;
}

export interface Host {
  client: Client;
  stderr: string[];
  close(): Promise<void>;
  pid: number | null;
}

export interface HostOptions {
  config?: string;
  server: string[];
  env?: Record<string, string | undefined>;
  elicit?: (message: string) => { action: 'accept' | 'decline' | 'cancel'; content?: Record<string, unknown> };
  gatewayArgs?: string[];
}

/** An MCP host (the SDK's Client) connected to `opledger-mcp [--config] -- server...` over stdio. */
export async function connectHost(o: HostOptions): Promise<Host> {
  const args = [MAIN, ...(o.config ? ['--config', o.config] : []), ...(o.gatewayArgs ?? []), '--', ...o.server];
  const transport = new StdioClientTransport({
    command: process.execPath, args, stderr: 'pipe',
    env: env({
      PGUSER: ROLES.agent, OPLEDGER_APPROVER_DATABASE_URL: urlFor(ROLES.approver),
      OPLEDGER_RECONCILER_DATABASE_URL: urlFor(ROLES.reconciler), ...(o.env ?? {}),
    }),
  });
  const stderr: string[] = [];
  transport.stderr?.on('data', (d: Buffer) => stderr.push(...d.toString().split('\n').filter((l) => l)));
  const client = new Client({ name: 'test-host', version: '1.0.0' }, { capabilities: o.elicit ? { elicitation: {} } : {} });
  if (o.elicit) {
    const handler = o.elicit;
    client.setRequestHandler(ElicitRequestSchema, async (req) => handler(req.params.message));
  }
  await client.connect(transport);
  return { client, stderr, pid: transport.pid, close: () => client.close() };
}

/** The same server, without the gateway. */
export async function connectDirect(server: string[], extraEnv: Record<string, string | undefined> = {}): Promise<Client> {
  const transport = new StdioClientTransport({ command: server[0], args: server.slice(1), env: env(extraEnv), stderr: 'pipe' });
  const client = new Client({ name: 'test-direct', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return client;
}

export const pool = new pg.Pool({ max: 2 });
export async function sql<T = Record<string, any>>(text: string, values: unknown[] = []): Promise<T[]> {
  return (await pool.query(text, values)).rows as T[];
}

export function opOf(result: any): { operationId: string; decision: string; attempt?: number } {
  return result?._meta?.['opledger/operation'];
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
