// What the ledger stores of a tool's result: a copy without the secrets. The caller of
// the call that ran gets the server's result unchanged; the operation's result or error
// (and so its events) holds this copy, and a replay returns it.
//
// Secrets are
//   - the values at the tool's `redact` paths of the arguments (a server that echoes a
//     PIN or a card number back must not put it in the ledger through the result), and
//   - the values at its `redactResult` pointers into structuredContent (or, for a result
//     without structuredContent, into each text block that is JSON), e.g. an issued API key.
// Those pointers become "[REDACTED]", and every occurrence of a secret's text anywhere in
// the result (text blocks, structuredContent, resources, _meta) is replaced with it, so the
// JSON text a tool with an outputSchema puts next to its structuredContent is covered too.
// `redactResult: all` stores no part of the result.

import { placesOf, type Place } from './json.js';
import type { Policy } from './policy.js';
import type { CallToolResult, DecisionInfo } from './results.js';
import { withOperationMeta } from './results.js';

export const REDACTED = '[REDACTED]';
/** _meta entry of a stored result that was redacted: 'values' or 'all'. */
export const META_REDACTED = 'opledger/redacted';

type Json = unknown;

/** Does anything of this tool's results need redacting before it is stored? */
export function redactsResults(p: Policy): boolean {
  return p.redactResult === 'all' || p.redactResult.length > 0 || p.redact.length > 0;
}

/** Every non-empty string and every number under `v`, as text. */
function leaves(v: Json, out: Set<string>): void {
  if (typeof v === 'string') { if (v !== '') out.add(v); }
  else if (typeof v === 'number' && Number.isFinite(v)) out.add(String(v));
  else if (Array.isArray(v)) for (const x of v) leaves(x, out);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) leaves(x, out);
}

/** Every place a pointer names in `doc`; a pointer config validation would refuse names none. */
function places(doc: Json, pointer: string): Place[] {
  try { return placesOf(doc, pointer); } catch { return []; }
}

const at = (parent: Record<string, unknown> | unknown[], key: string | number) =>
  (parent as Record<string | number, unknown>)[key];

function valuesAt(doc: Json, pointers: string[], out: Set<string>): void {
  for (const p of pointers) for (const [parent, key] of places(doc, p)) leaves(at(parent, key), out);
}

/** Replaces the values at `pointers` with REDACTED, in place; says whether one was there. */
function replaceAt(doc: Json, pointers: string[]): boolean {
  let changed = false;
  for (const p of pointers) {
    for (const [parent, key] of places(doc, p)) {
      (parent as Record<string | number, unknown>)[key] = REDACTED;
      changed = true;
    }
  }
  return changed;
}

/**
 * The forms a secret takes in text: itself, and as JSON encoders escape it inside a string
 * (JavaScript's; with non-ASCII as \uXXXX, as Python's by default; with "/" as "\/").
 */
function textForms(secrets: Set<string>): string[] {
  const forms = new Set<string>();
  for (const s of secrets) {
    const json = JSON.stringify(s).slice(1, -1);
    const ascii = json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    for (const f of [s, json, ascii, ascii.replace(/\//g, '\\/')]) forms.add(f);
  }
  return [...forms].filter((f) => f !== '').sort((a, b) => b.length - a.length);
}

/** A copy of `v` with every occurrence of a secret replaced (strings, member names, equal numbers). */
function scrub(v: Json, forms: string[], secrets: Set<string>, hit: { changed: boolean }): Json {
  if (typeof v === 'string') {
    let s = v;
    for (const f of forms) if (s.includes(f)) { s = s.split(f).join(REDACTED); hit.changed = true; }
    return s;
  }
  if (typeof v === 'number') {
    if (secrets.has(String(v))) { hit.changed = true; return REDACTED; }
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => scrub(x, forms, secrets, hit));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[scrub(k, forms, secrets, hit) as string] = scrub(x, forms, secrets, hit);
    return out;
  }
  return v;
}

/** Any stored payload that is not a tool's result (an error message, a reason): without the argument secrets. */
export function scrubArgSecrets<T>(payload: T, p: Policy | undefined, args: Json): T {
  if (!p || p.redact.length === 0 || payload === null || payload === undefined) return payload;
  const secrets = new Set<string>();
  valuesAt(args, p.redact, secrets);
  if (secrets.size === 0) return payload;
  return scrub(payload, textForms(secrets), secrets, { changed: false }) as T;
}

/** The copy of a tool's result that the ledger stores (the result itself when there is nothing to redact). */
export function redactResultForStorage(result: CallToolResult, p: Policy | undefined, args: Json, operationId: string): CallToolResult {
  if (!p || !result || typeof result !== 'object' || !redactsResults(p)) return result;
  if (p.redactResult === 'all') {
    const stored: CallToolResult = {
      content: [{ type: 'text', text: `${REDACTED} This call (operation ${operationId}) ran; its result is not stored ` +
        `(the gateway's policy for "${p.tool}" says redactResult: all), so it cannot be shown again.` }],
      _meta: { [META_REDACTED]: 'all' },
    };
    if (result.isError) stored.isError = true;
    return stored;
  }
  const copy = structuredClone(result);
  const secrets = new Set<string>();
  valuesAt(args, p.redact, secrets);
  let changed = false;
  const pointers = p.redactResult;
  if (pointers.length > 0) {
    if (copy.structuredContent !== undefined) {
      valuesAt(copy.structuredContent, pointers, secrets);
      changed = replaceAt(copy.structuredContent, pointers) || changed;
    } else {
      for (const block of copy.content ?? []) {
        if (block?.type !== 'text' || typeof block.text !== 'string') continue;
        let doc: Json;
        try { doc = JSON.parse(block.text); } catch { continue; }
        if (!doc || typeof doc !== 'object') continue;
        valuesAt(doc, pointers, secrets);
        if (replaceAt(doc, pointers)) { block.text = JSON.stringify(doc); changed = true; }
      }
    }
  }
  const hit = { changed };
  const out = secrets.size > 0 ? (scrub(copy, textForms(secrets), secrets, hit) as CallToolResult) : copy;
  if (!hit.changed) return result;
  out._meta = { ...(out._meta ?? {}), [META_REDACTED]: 'values' };
  return out;
}

/**
 * What a replay (or a stored failure) answers from a stored result. A redacted result is
 * returned as stored; for a tool with an outputSchema its structuredContent (which no longer
 * matches the schema, and which the SDK's client would reject) is left out, and it is marked
 * isError with a text that says the call ran and what is shown is the stored, redacted copy.
 */
export function storedResult(stored: CallToolResult, p: Policy | undefined, info: DecisionInfo): CallToolResult {
  const mark = stored?._meta?.[META_REDACTED];
  if (!mark || !p?.hasOutputSchema) return withOperationMeta(stored, info);
  const texts = (stored.content ?? []).filter((b) => b?.type === 'text').map((b) => String(b.text));
  const { structuredContent: _dropped, ...rest } = stored;
  const intro = stored.isError
    ? `This call (operation ${info.operationId}) ran and failed earlier; its stored, redacted result follows.`
    : `This call (operation ${info.operationId}) already ran and succeeded; it was not run again. Its result was stored ` +
      `with secrets removed, and only that copy can be shown: ${texts.join(' ')}`;
  return withOperationMeta({
    ...rest,
    content: stored.isError ? [{ type: 'text', text: intro }, ...(stored.content ?? [])] : [{ type: 'text', text: intro }],
    isError: true,
  }, info);
}
