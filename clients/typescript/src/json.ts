// Strict JSON text for what the ledger stores: a value JSON.stringify would throw on
// (BigInt, a cycle) or silently change (a Map or Set becomes {}, NaN becomes null)
// is a NotJsonSerializableError, raised before anything is sent.

import { NotJsonSerializableError } from './errors.js';

export function toJsonText(value: unknown, what = 'the value'): string | undefined {
  const complain = (key: string, why: string) =>
    new NotJsonSerializableError(what, `${why}${key === '' ? '' : ` (member "${key}")`}`);
  try {
    return JSON.stringify(value, (key, v: unknown) => {
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
}

/** A JSON object (not an array, not a JSON string): what op_begin's args must be. */
export function assertArgsObject(args: unknown): void {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    const kind = args === null ? 'null' : Array.isArray(args) ? 'an array' : typeof args;
    const hint = typeof args === 'string' ? ' (a JSON string? pass the object itself, not JSON.stringify(...))' : '';
    throw new TypeError(`args must be a JSON object (the tool's named arguments), not ${kind}${hint}`);
  }
}
