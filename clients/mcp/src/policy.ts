// The effective policy of one MCP tool: the config first, then the server's
// annotations (untrusted hints, which can never make a tool irreversible), then
// the conservative default (non_idempotent_write).

import type { ToolEffect } from '@opledger/client';
import { parseDuration, type GatewayConfig, type IdStrategy, type LookupConfig, type ToolPolicyConfig } from './config.js';

export interface ToolInfo {
  name: string;
  annotations?: { readOnlyHint?: boolean; idempotentHint?: boolean; destructiveHint?: boolean };
  outputSchema?: unknown;
}

export interface Policy {
  /** The MCP tool name. */
  tool: string;
  /** Its name in the ledger (toolPrefix + tool). */
  ledgerTool: string;
  effect: ToolEffect;
  /** Where the effect came from: the config, a hint, or the default. */
  effectSource: 'config' | 'hint' | 'default';
  config: ToolPolicyConfig;
  timeoutMs: number;
  waitMs: number;
  hashExclude: string[];
  redact: string[];
  /** What of a result is not stored: pointers into structuredContent, or 'all' (see redact.ts). */
  redactResult: string[] | 'all';
  ids: IdStrategy;
  keyArgument?: string;
  idempotencyKey?: { argument?: string; meta?: string };
  errorRetryable: boolean;
  providerRef?: string;
  lookup?: LookupConfig;
  recordReads: boolean;
  /** Does the tool declare an outputSchema (then decision results carry no structuredContent)? */
  hasOutputSchema: boolean;
}

export function effectFromHints(info: ToolInfo | undefined): ToolEffect | undefined {
  const a = info?.annotations;
  if (!a) return undefined;
  if (a.readOnlyHint === true) return 'read_only';
  if (a.idempotentHint === true) return 'idempotent_write';
  return undefined;
}

export function resolvePolicy(cfg: GatewayConfig, tool: string, info: ToolInfo | undefined): Policy {
  const own = cfg.tools?.[tool];
  const merged: ToolPolicyConfig = { ...(cfg.defaults ?? {}), ...(own ?? {}) };
  let effect: ToolEffect;
  let effectSource: Policy['effectSource'];
  if (own?.effect) {
    effect = own.effect;
    effectSource = 'config';
  } else if (cfg.hints !== false && effectFromHints(info)) {
    effect = effectFromHints(info)!;
    effectSource = 'hint';
  } else if (cfg.defaults?.effect) {
    effect = cfg.defaults.effect;
    effectSource = 'config';
  } else {
    effect = 'non_idempotent_write';
    effectSource = 'default';
  }
  return {
    tool,
    ledgerTool: (cfg.toolPrefix ?? '') + tool,
    effect,
    effectSource,
    config: merged,
    timeoutMs: parseDuration(merged.timeout, 60_000),
    waitMs: parseDuration(merged.wait, 2_000),
    hashExclude: merged.hashExclude ?? [],
    redact: merged.redact ?? [],
    redactResult: merged.redactResult ?? [],
    ids: merged.ids ?? 'args',
    keyArgument: merged.keyArgument,
    idempotencyKey: merged.idempotencyKey,
    errorRetryable: merged.errorRetryable ?? false,
    providerRef: merged.providerRef,
    lookup: own?.lookup,
    recordReads: merged.recordReads ?? false,
    hasOutputSchema: info?.outputSchema !== undefined && info?.outputSchema !== null,
  };
}

/** What register_tool is given for a policy (see register.ts). */
export function registrationOf(p: Policy): {
  effect: ToolEffect; guarantee?: ToolPolicyConfig['guarantee']; maxAttempts?: number; lease?: string;
  backoffBase?: string; backoffMax?: string; hashExclude: string[]; redact: string[];
} {
  const c = p.config;
  return {
    effect: p.effect,
    guarantee: c.guarantee,
    maxAttempts: c.maxAttempts,
    lease: c.lease,
    backoffBase: c.backoffBase,
    backoffMax: c.backoffMax,
    hashExclude: p.hashExclude,
    redact: p.redact,
  };
}
