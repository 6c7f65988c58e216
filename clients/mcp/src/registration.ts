// Does the ledger's registration of a tool (opledger.tools) match the gateway's policy?
// The ledger, not the gateway, decides approval (effect) and what is stored (redact,
// hash_exclude). So for a tool whose safety rests on the registration (an irreversible
// tool, a tool with redact paths) the gateway fails closed: until the registration
// matches, it refuses to call the tool. For other tools a difference is a warning.

import type { LedgerDb } from './db.js';
import type { Policy } from './policy.js';

export interface Registration { effect: string; hash_exclude: string[]; redact: string[]; max_attempts: number }

export const REGISTER_FIX = 'an administrator runs: opledger-mcp register --config FILE (as an opledger_admin, with the gateway\'s config)';

/** The registrations of these ledger tools (throws when the role may not read opledger.tools). */
export async function readRegistrations(db: LedgerDb, tools: string[]): Promise<Map<string, Registration>> {
  const rows = (await db.pool.query(
    `SELECT tool, effect::text AS effect, max_attempts, hash_exclude, redact
       FROM opledger.tools WHERE tool = ANY($1::text[])`, [tools])).rows;
  return new Map(rows.map((r) => [r.tool as string, r as Registration]));
}

/** A tool the gateway serves only when its registration matches. */
export function mustMatch(p: Policy): boolean {
  return p.effect === 'irreversible' || p.redact.length > 0;
}

const same = (a: string[] = [], b: string[] = []) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

/** Differences that matter for safety (effect, redact, hash_exclude), then the others (max_attempts). */
export function differences(p: Policy, r: Registration | undefined): { safety: string[]; other: string[] } {
  if (!r) return { safety: [`not registered (the ledger treats it as non_idempotent_write); configured ${p.effect}`], other: [] };
  const safety: string[] = [];
  const other: string[] = [];
  if (r.effect !== p.effect) safety.push(`registered as ${r.effect}, configured ${p.effect}`);
  if (!same(r.redact, p.redact)) safety.push('redact differs from the config');
  if (!same(r.hash_exclude, p.hashExclude)) safety.push('hash_exclude differs from the config');
  if (p.config.maxAttempts !== undefined && Number(r.max_attempts) !== p.config.maxAttempts) {
    other.push(`max_attempts is ${r.max_attempts}, configured ${p.config.maxAttempts}`);
  }
  return { safety, other };
}

/** Why the ledger tool's registration cannot be checked. */
export const unreadable = (e: unknown) =>
  `its registration cannot be read (${e instanceof Error ? e.message : String(e)}); the gateway's role needs SELECT on opledger.tools`;

/**
 * The running gateway's check before it calls a tool that must match: a match is trusted
 * for OK_TTL_MS (a registration changed later is seen within that time); a problem is
 * checked again on every call, so a tool is served as soon as an admin registers it.
 */
export class RegistrationGuard {
  static readonly OK_TTL_MS = 30_000;
  private okUntil = new Map<string, number>();

  constructor(private readonly db: LedgerDb) {}

  /** undefined when the tool may be called; else what is wrong. */
  async problem(p: Policy): Promise<string | undefined> {
    const until = this.okUntil.get(p.ledgerTool);
    if (until !== undefined && until > Date.now()) return undefined;
    let reg: Registration | undefined;
    try {
      reg = (await readRegistrations(this.db, [p.ledgerTool])).get(p.ledgerTool);
    } catch (e) {
      this.okUntil.delete(p.ledgerTool);
      return unreadable(e);
    }
    const { safety } = differences(p, reg);
    if (safety.length > 0) { this.okUntil.delete(p.ledgerTool); return safety.join('; '); }
    if (this.okUntil.size > 10_000) this.okUntil.clear();
    this.okUntil.set(p.ledgerTool, Date.now() + RegistrationGuard.OK_TTL_MS);
    return undefined;
  }
}
