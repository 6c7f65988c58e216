// The admin step (register the policies), the start-up check (do the registered
// policies match the config?), the reconciler mode and the approve command.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { LedgerSqlError, type JsonValue } from '@opledger/client';
import type { GatewayConfig } from './config.js';
import type { LedgerDb } from './db.js';
import { runLookup } from './gateway.js';
import { log } from './log.js';
import { registrationOf, resolvePolicy, type Policy, type ToolInfo } from './policy.js';

/** Lists the tools of a server with the SDK's client (all pages). */
export async function listServerTools(transport: Transport): Promise<{ client: Client; tools: ToolInfo[] }> {
  const client = new Client({ name: 'opledger-mcp', version: '0.1.0' }, { capabilities: {} });
  await client.connect(transport);
  const tools: ToolInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...(page.tools as ToolInfo[]));
    cursor = page.nextCursor;
  } while (cursor);
  return { client, tools };
}

/**
 * The policies to register: every tool of the config, and (when the server's tool list
 * is given) every other tool of the server with its hint-derived effect.
 */
export function policiesOf(cfg: GatewayConfig, tools: ToolInfo[] = []): Policy[] {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const names = new Set([...Object.keys(cfg.tools ?? {}), ...byName.keys()]);
  return [...names].sort().map((n) => resolvePolicy(cfg, n, byName.get(n)));
}

/** register_tool for each policy (an admin's job: needs opledger_admin or the owner). */
export async function registerPolicies(db: LedgerDb, policies: Policy[]): Promise<void> {
  for (const p of policies) {
    const r = registrationOf(p);
    await db.ledger.registerTool(p.ledgerTool, r.effect, {
      guarantee: r.guarantee, maxAttempts: r.maxAttempts, lease: r.lease, backoffBase: r.backoffBase,
      backoffMax: r.backoffMax, hashExclude: r.hashExclude, redact: r.redact,
    });
    log('info', 'registered', { tool: p.ledgerTool, effect: r.effect, source: p.effectSource });
  }
}

export interface Mismatch { tool: string; problem: string }

/**
 * Start-up check: compares the configured policies with opledger.tools. The running
 * gateway never registers (it connects as the agent role); it warns instead.
 */
export async function checkRegistrations(db: LedgerDb, cfg: GatewayConfig): Promise<Mismatch[]> {
  const policies = policiesOf(cfg).filter((p) => p.effectSource === 'config');
  if (policies.length === 0) return [];
  let rows: Record<string, any>[];
  try {
    rows = (await db.pool.query(
      `SELECT tool, effect::text AS effect, max_attempts, hash_exclude, redact, lease::text AS lease
         FROM opledger.tools WHERE tool = ANY($1::text[])`, [policies.map((p) => p.ledgerTool)])).rows;
  } catch (e) {
    log('warn', 'policy_check_skipped', { error: (e as Error).message });
    return [];
  }
  const got = new Map(rows.map((r) => [r.tool, r]));
  const out: Mismatch[] = [];
  const same = (a: string[] = [], b: string[] = []) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());
  for (const p of policies) {
    const r = got.get(p.ledgerTool);
    if (!r) { out.push({ tool: p.ledgerTool, problem: `not registered (the ledger treats it as non_idempotent_write); configured ${p.effect}` }); continue; }
    if (r.effect !== p.effect) out.push({ tool: p.ledgerTool, problem: `registered as ${r.effect}, configured ${p.effect}` });
    if (!same(r.hash_exclude, p.hashExclude)) out.push({ tool: p.ledgerTool, problem: 'hash_exclude differs from the config' });
    if (!same(r.redact, p.redact)) out.push({ tool: p.ledgerTool, problem: 'redact differs from the config' });
    if (p.config.maxAttempts !== undefined && Number(r.max_attempts) !== p.config.maxAttempts) {
      out.push({ tool: p.ledgerTool, problem: `max_attempts is ${r.max_attempts}, configured ${p.config.maxAttempts}` });
    }
  }
  for (const m of out) log('warn', 'policy_mismatch', { ...m, fix: 'run: opledger-mcp register --config FILE (as an opledger_admin)' });
  return out;
}

/**
 * The reconciler: claims unknown operations of this server's tools and runs each
 * tool's lookup; the answer feeds op_resolve. Ops without a lookup stay unknown for a person.
 */
export async function reconcileOnce(db: LedgerDb, cfg: GatewayConfig, client: Client, tools: ToolInfo[],
  worker: string, batch: number, lease: string): Promise<{ claimed: number; resolved: number }> {
  const prefix = cfg.toolPrefix ?? '';
  const byName = new Map(tools.map((t) => [t.name, t]));
  const ops = await db.ledger.claimReconciliation(worker, batch, lease);
  let resolved = 0;
  for (const op of ops) {
    if (!op.tool.startsWith(prefix)) continue;
    const name = op.tool.slice(prefix.length);
    const p = resolvePolicy(cfg, name, byName.get(name));
    if (!p.lookup) { log('info', 'reconcile_skipped', { operationId: op.operationId, tool: op.tool, why: 'no lookup configured' }); continue; }
    const outcome = await runLookup(p, op.operationId, op.providerRef, op.args, async (n, a) => {
      try {
        return { result: await client.callTool({ name: n, arguments: a as Record<string, unknown> }) };
      } catch (e) {
        return { error: { code: -32000, message: (e as Error).message } };
      }
    });
    log('info', 'lookup', { tool: op.tool, operationId: op.operationId, outcome: outcome?.outcome ?? 'undecided' });
    if (!outcome) continue;
    try {
      await db.ledger.resolve(op.operationId, outcome.outcome, {
        result: outcome.result as JsonValue, providerRef: outcome.providerRef, resolver: `${worker} lookup:${p.lookup.tool}`,
      });
      resolved++;
    } catch (e) {
      if (!(e instanceof LedgerSqlError && e.sqlstate === 'OL002')) throw e;
    }
  }
  return { claimed: ops.length, resolved };
}
