// The policy file: one JSON or YAML document that says, per MCP tool, how the
// gateway runs it through the ledger. See docs/mcp.md for the reference.

import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { ToolEffect } from '@opledger/client';
import { checkPointerList, hasWildcard, parsePointer, PointerError } from './json.js';

export type Guarantee = 'provider_key' | 'unique_constraint' | 'read_before_write' | 'none';

/** How the operation ID of a call is chosen. */
export type IdStrategy =
  /** derived from (scope, tool, canonical arguments); a caller key wins when given */
  | 'args'
  /** the caller must send a key (in _meta or keyArgument); calls without one are refused */
  | 'key'
  /** every call is its own operation (identical repeats are legitimate); a caller key still wins */
  | 'none';

export interface LookupConfig {
  /** A read-only tool of the same server that finds the effect of a call. */
  tool: string;
  /**
   * Its arguments. Strings may hold ${operation_id}, ${provider_ref} and ${arg:/json/pointer}
   * (a value of the original call's arguments); a string that is exactly one placeholder
   * takes the value's JSON type.
   */
  arguments?: Record<string, unknown>;
  /** JSON Pointer into the lookup's answer (structuredContent, or its text parsed as JSON); present and non-empty means applied. Default "" (the whole answer). */
  found?: string;
  /** JSON Pointer to the provider's reference inside the answer (stored as provider_ref). */
  providerRef?: string;
  /** JSON Pointer to what is stored as the call's structuredContent when applied (default: the found value, for tools without an outputSchema). */
  result?: string;
  /** What "not found" means: 'not_applied' (default: the call runs again) or 'undecided' (stays unknown, for eventually consistent searches). */
  missing?: 'not_applied' | 'undecided';
}

export interface ToolPolicyConfig {
  effect?: ToolEffect;
  guarantee?: Guarantee;
  maxAttempts?: number;
  /** PostgreSQL interval ('30 seconds'): how long an attempt holds the operation. */
  lease?: string;
  backoffBase?: string;
  backoffMax?: string;
  /** How long the gateway waits for the server's answer before recording unknown ('30s', '2 minutes', or ms). */
  timeout?: string | number;
  hashExclude?: string[];
  redact?: string[];
  /**
   * What of the tool's result is never stored (the caller still gets it whole): JSON Pointers
   * into structuredContent, or 'all'. See docs/mcp.md, "Results and secrets".
   */
  redactResult?: string[] | 'all';
  ids?: IdStrategy;
  /** An argument that carries the caller's key; the gateway strips it before forwarding. */
  keyArgument?: string;
  /** Where the server accepts an idempotency key: the gateway puts the operation ID there. */
  idempotencyKey?: { argument?: string; meta?: string };
  /** Is an isError result worth retrying (op_fail retryable => true)? Default false. */
  errorRetryable?: boolean;
  /** JSON Pointer into structuredContent whose value is the provider's reference (provider_ref). */
  providerRef?: string;
  lookup?: LookupConfig;
  /** read_only tools bypass the ledger; with recordReads each read is its own operation. */
  recordReads?: boolean;
  /** How long one tools/call may wait for in_progress / retry_later before answering (default '2s'). */
  wait?: string | number;
}

export interface GatewayConfig {
  /** A name for the wrapped server: part of every derived ID, and of the logs. */
  server?: string;
  /** 'session' (the MCP session, the default) or a fixed conversation scope, e.g. "${CONVERSATION_ID}". */
  scope?: string;
  /** Prefix of the ledger's tool names (ledger tool = toolPrefix + MCP tool name). Default "". */
  toolPrefix?: string;
  /** Use the server's annotations (untrusted hints) for tools without an effect in the config. Default true. */
  hints?: boolean;
  /** Policy of tools missing from `tools` (merged under each tool's own). */
  defaults?: ToolPolicyConfig;
  tools?: Record<string, ToolPolicyConfig>;
  /** The name recorded by op_approve for approvals given through elicitation. */
  approver?: string;
  /** How long to wait for the user's answer to an elicitation (default '5 minutes'). */
  approvalTimeout?: string | number;
}

const EFFECTS: readonly string[] = ['read_only', 'idempotent_write', 'non_idempotent_write', 'irreversible'];
const GUARANTEES: readonly string[] = ['provider_key', 'unique_constraint', 'read_before_write', 'none'];
const IDS: readonly string[] = ['args', 'key', 'none'];
const TOOL_KEYS = new Set(['effect', 'guarantee', 'maxAttempts', 'lease', 'backoffBase', 'backoffMax', 'timeout',
  'hashExclude', 'redact', 'redactResult', 'ids', 'keyArgument', 'idempotencyKey', 'errorRetryable', 'providerRef', 'lookup',
  'recordReads', 'wait']);
const TOP_KEYS = new Set(['server', 'scope', 'toolPrefix', 'hints', 'defaults', 'tools', 'approver', 'approvalTimeout']);

export class ConfigError extends Error {}

/** '250ms', '30s', '2 minutes', '1h', or a number of milliseconds. */
export function parseDuration(v: string | number | undefined, fallbackMs: number, what = 'duration'): number {
  if (v === undefined || v === null) return fallbackMs;
  if (typeof v === 'number') {
    if (!Number.isFinite(v) || v < 0) throw new ConfigError(`${what}: ${v} is not a duration`);
    return v;
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|msec|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?\s*$/i.exec(v);
  if (!m) throw new ConfigError(`${what}: '${v}' is not a duration (try '30s' or '2 minutes')`);
  const n = Number(m[1]);
  const unit = (m[2] ?? 'ms').toLowerCase();
  if (unit.startsWith('ms') || unit.startsWith('milli')) return n;
  if (unit.startsWith('s')) return n * 1000;
  if (unit.startsWith('m')) return n * 60_000;
  return n * 3_600_000;
}

function expandEnv(v: unknown): unknown {
  if (typeof v === 'string') {
    return v.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}/g, (_all, name: string, dflt?: string) => {
      const got = process.env[name];
      if (got !== undefined && got !== '') return got;
      if (dflt !== undefined) return dflt;
      throw new ConfigError(`the config refers to \${${name}}, which is not set`);
    });
  }
  if (Array.isArray(v)) return v.map(expandEnv);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = expandEnv(x);
    return out;
  }
  return v;
}

/** A list of JSON Pointers, checked as the ledger's register_tool compiles one ("*" tokens included). */
function checkPointers(list: unknown, where: string): void {
  if (list === undefined) return;
  if (!Array.isArray(list) || list.some((p) => typeof p !== 'string' || (p !== '' && !p.startsWith('/')))) {
    throw new ConfigError(`${where}: must be a list of JSON Pointers ("/a/b")`);
  }
  try {
    checkPointerList(list as string[]);
  } catch (e) {
    if (e instanceof PointerError) throw new ConfigError(`${where}: ${e.message}`);
    throw e;
  }
}

/** A pointer that names one value: well formed, and no "*" (which would name many). */
function checkSinglePointer(p: unknown, where: string): void {
  if (p === undefined) return;
  if (typeof p !== 'string') throw new ConfigError(`${where}: must be a JSON Pointer ("/a/b")`);
  try {
    parsePointer(p);
  } catch (e) {
    if (e instanceof PointerError) throw new ConfigError(`${where}: ${e.message}`);
    throw e;
  }
  if (hasWildcard(p)) {
    throw new ConfigError(`${where}: "${p}" has a '*' token, which matches many values; this setting names one value ` +
      '(a "*" token is for hashExclude and redact only)');
  }
}

/** The ${arg:/pointer} placeholders of a lookup's arguments: each names one value of the call's arguments. */
function checkArgPlaceholders(v: unknown, where: string): void {
  if (typeof v === 'string') {
    for (const m of v.matchAll(/\$\{arg:([^}]*)\}/g)) checkSinglePointer(m[1], `${where}: \${arg:${m[1]}}`);
  } else if (Array.isArray(v)) {
    v.forEach((x, i) => checkArgPlaceholders(x, `${where}[${i}]`));
  } else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) checkArgPlaceholders(x, `${where}.${k}`);
  }
}

function checkTool(name: string, t: unknown): ToolPolicyConfig {
  const where = `tools.${name}`;
  if (!t || typeof t !== 'object' || Array.isArray(t)) throw new ConfigError(`${where}: must be an object`);
  const p = t as ToolPolicyConfig & Record<string, unknown>;
  for (const k of Object.keys(p)) if (!TOOL_KEYS.has(k)) throw new ConfigError(`${where}: unknown setting '${k}'`);
  if (p.effect !== undefined && !EFFECTS.includes(p.effect)) {
    throw new ConfigError(`${where}.effect: '${p.effect}' is not one of ${EFFECTS.join(', ')}`);
  }
  if (p.guarantee !== undefined && !GUARANTEES.includes(p.guarantee)) {
    throw new ConfigError(`${where}.guarantee: '${p.guarantee}' is not one of ${GUARANTEES.join(', ')}`);
  }
  if (p.ids !== undefined && !IDS.includes(p.ids)) throw new ConfigError(`${where}.ids: '${p.ids}' is not one of ${IDS.join(', ')}`);
  if (p.maxAttempts !== undefined && !(Number.isInteger(p.maxAttempts) && p.maxAttempts > 0)) {
    throw new ConfigError(`${where}.maxAttempts: must be a positive integer`);
  }
  checkPointers(p.hashExclude, `${where}.hashExclude`);
  checkPointers(p.redact, `${where}.redact`);
  if (p.redactResult !== 'all') checkPointers(p.redactResult, `${where}.redactResult`);
  checkSinglePointer(p.providerRef, `${where}.providerRef`);
  parseDuration(p.timeout, 0, `${where}.timeout`);
  parseDuration(p.wait, 0, `${where}.wait`);
  if (p.lookup !== undefined) {
    if (!p.lookup || typeof p.lookup.tool !== 'string') throw new ConfigError(`${where}.lookup.tool: the name of a read-only tool is required`);
    if (p.lookup.missing !== undefined && !['not_applied', 'undecided'].includes(p.lookup.missing)) {
      throw new ConfigError(`${where}.lookup.missing: must be not_applied or undecided`);
    }
    checkSinglePointer(p.lookup.found, `${where}.lookup.found`);
    checkSinglePointer(p.lookup.providerRef, `${where}.lookup.providerRef`);
    checkSinglePointer(p.lookup.result, `${where}.lookup.result`);
    checkArgPlaceholders(p.lookup.arguments, `${where}.lookup.arguments`);
  }
  return p;
}

/** Validates a parsed config document (after ${ENV} expansion). */
export function validateConfig(doc: unknown): GatewayConfig {
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError('the config must be an object');
  const c = expandEnv(doc) as GatewayConfig & Record<string, unknown>;
  for (const k of Object.keys(c)) if (!TOP_KEYS.has(k)) throw new ConfigError(`unknown top-level setting '${k}'`);
  if (c.defaults !== undefined) {
    const d = checkTool('defaults', c.defaults);
    if (d.effect === 'irreversible' || d.lookup) throw new ConfigError('defaults: effect irreversible and lookup belong to single tools');
  }
  const tools: Record<string, ToolPolicyConfig> = {};
  for (const [name, t] of Object.entries(c.tools ?? {})) tools[name] = checkTool(name, t);
  c.tools = tools;
  parseDuration(c.approvalTimeout, 0, 'approvalTimeout');
  return c;
}

export function loadConfig(file: string | undefined): GatewayConfig {
  if (!file) return {};
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read the config ${file}: ${(e as Error).message}`);
  }
  const ext = path.extname(file).toLowerCase();
  let doc: unknown;
  try {
    doc = ext === '.json' ? JSON.parse(text) : YAML.parse(text);
  } catch (e) {
    throw new ConfigError(`${file}: ${(e as Error).message}`);
  }
  return validateConfig(doc);
}
