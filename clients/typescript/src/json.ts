// Strict JSON text for what the ledger stores: a value JSON.stringify would throw on
// (BigInt, a cycle) or silently change (a Map or Set becomes {}, NaN becomes null)
// is a NotJsonSerializableError, raised before anything is sent. So is a string that
// PostgreSQL's jsonb cannot hold (a NUL character, an unpaired UTF-16 surrogate): the
// server would refuse the ::jsonb cast with the JSON text up to that character in the
// error's CONTEXT, and so in the server log, secrets included. The error names the
// JSON Pointer, never the value.

import { NotJsonSerializableError, UnstorableJsonError } from './errors.js';

// JSON.stringify writes U+0000 as \u0000 and an unpaired surrogate as \udXXX; valid
// pairs and every other character it writes as themselves. A hit may still be an
// escaped backslash followed by "u0000": the walk below decides.
const SUSPECT_TEXT = /\\u0000|\\ud[89a-f]/i;
const UNPAIRED = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function problemOf(s: string): string | undefined {
  if (s.includes('\u0000')) return 'a NUL character (\\u0000)';
  if (UNPAIRED.test(s)) return 'an unpaired UTF-16 surrogate';
  return undefined;
}

/** RFC 6901 token, with the characters a message must not carry raw written as \uXXXX. */
function pointerToken(name: string): string {
  return name.replace(/~/g, '~0').replace(/\//g, '~1')
    .replace(/[\u0000-\u001f\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function findUnstorable(v: unknown, at: string): { pointer: string; problem: string } | undefined {
  if (typeof v === 'string') {
    const problem = problemOf(v);
    return problem ? { pointer: at, problem } : undefined;
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const found = findUnstorable(v[i], `${at}/${i}`);
      if (found) return found;
    }
  } else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      const pointer = `${at}/${pointerToken(k)}`;
      const problem = problemOf(k);
      if (problem) return { pointer, problem: `${problem} in the member name` };
      const found = findUnstorable(x, pointer);
      if (found) return found;
    }
  }
  return undefined;
}

const UNSTORABLE_CHARS = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A description the client writes itself (an error's name and message) with every
 * character jsonb cannot hold replaced by U+FFFD. Such text describes a failure; losing
 * one character of it is better than leaving the operation unrecorded. Never used for
 * arguments or results, which are refused instead.
 */
export function storableText(s: string): string {
  return s.replace(UNSTORABLE_CHARS, '\ufffd');
}

/**
 * Throws UnstorableJsonError when JSON text (JSON.stringify output) holds a string or
 * member name that PostgreSQL's jsonb cannot hold; the error names its JSON Pointer.
 */
export function assertStorableJsonText(text: string, what = 'the value'): void {
  if (!SUSPECT_TEXT.test(text)) return;
  const found = findUnstorable(JSON.parse(text), '');
  if (found) throw new UnstorableJsonError(what, found.pointer, found.problem);
}

export function toJsonText(value: unknown, what = 'the value'): string | undefined {
  const complain = (key: string, why: string) =>
    new NotJsonSerializableError(what, `${why}${key === '' ? '' : ` (member "${key}")`}`);
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (key, v: unknown) => {
      if (typeof v === 'bigint') throw complain(key, 'a BigInt');
      if (typeof v === 'number' && !Number.isFinite(v)) throw complain(key, `the number ${String(v)}`);
      if (v instanceof Map) throw complain(key, 'a Map');
      if (v instanceof Set) throw complain(key, 'a Set');
      return v;
    });
  } catch (err) {
    if (err instanceof NotJsonSerializableError) throw err;
    throw new NotJsonSerializableError(what, err instanceof Error ? err.message : String(err), err);
  }
  if (text !== undefined) assertStorableJsonText(text, what);
  return text;
}

/** A JSON object (not an array, not a JSON string): what op_begin's args must be. */
export function assertArgsObject(args: unknown): void {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    const kind = args === null ? 'null' : Array.isArray(args) ? 'an array' : typeof args;
    const hint = typeof args === 'string' ? ' (a JSON string? pass the object itself, not JSON.stringify(...))' : '';
    throw new TypeError(`args must be a JSON object (the tool's named arguments), not ${kind}${hint}`);
  }
}
