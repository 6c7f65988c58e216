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
import { differences, mustMatch, readRegistrations, REGISTER_FIX, unreadable, type Registration } from './registration.js';

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

export interface Mismatch { tool: string; problem: string; refused: boolean }

/**
 * Start-up check: compares the configured policies with opledger.tools. The running
 * gateway never registers (it connects as the agent role). A tool that must match
 * (irreversible, or with redact paths) and doesn't is refused until it does: said here
 * at start-up (tool_refused) and in each call's result; any other difference is a warning.
 */
export async function checkRegistrations(db: LedgerDb, cfg: GatewayConfig): Promise<Mismatch[]> {
  const policies = policiesOf(cfg).filter((p) => p.effectSource === 'config' || mustMatch(p));
  if (policies.length === 0) return [];
  const out: Mismatch[] = [];
  let got: Map<string, Registration>;
  try {
    got = await readRegistrations(db, policies.map((p) => p.ledgerTool));
  } catch (e) {
    log('warn', 'policy_check_skipped', { error: (e as Error).message });
    for (const p of policies.filter(mustMatch)) out.push({ tool: p.ledgerTool, problem: unreadable(e), refused: true });
    got = new Map();
  }
  if (out.length === 0) {
    for (const p of policies) {
      const { safety, other } = differences(p, got.get(p.ledgerTool));
      const refused = mustMatch(p) && safety.length > 0;
      for (const problem of [...safety, ...other]) out.push({ tool: p.ledgerTool, problem, refused });
    }
  }
  for (const m of out) {
    if (m.refused) {
      log('error', 'tool_refused', {
        tool: m.tool, problem: m.problem, fix: REGISTER_FIX,
        message: `the gateway refuses to call ${m.tool} until its registration in the ledger matches the config: ${m.problem}`,
      });
    } else {
      log('warn', 'policy_mismatch', { tool: m.tool, problem: m.problem, fix: 'run: opledger-mcp register --config FILE (as an opledger_admin)' });
    }
  }
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
