// RFC 6901 JSON Pointers over plain JSON values, and a deep copy.

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function parsePointer(p: string): string[] {
  if (p === '') return [];
  if (!p.startsWith('/')) throw new Error(`not a JSON Pointer: ${p}`);
  return p.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function getPointer(doc: unknown, p: string): unknown {
  return getTokens(doc, parsePointer(p));
}

function getTokens(doc: unknown, toks: string[]): unknown {
  let cur: unknown = doc;
  for (const tok of toks) {
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(tok)) return undefined;
      cur = cur[Number(tok)];
    } else if (cur && typeof cur === 'object') {
      if (!Object.prototype.hasOwnProperty.call(cur, tok)) return undefined;
      cur = (cur as Record<string, unknown>)[tok];
    } else {
      return undefined;
    }
  }
  return cur;
}

/** A copy of `doc` without the members at the given pointers (array elements become null). */
export function withoutPointers(doc: unknown, pointers: string[]): unknown {
  if (pointers.length === 0) return doc;
  const copy = structuredClone(doc);
  for (const p of pointers) {
    const toks = parsePointer(p);
    if (toks.length === 0) return null;
    const parent = getTokens(copy, toks.slice(0, -1));
    const last = toks[toks.length - 1];
    if (Array.isArray(parent)) {
      if (/^(0|[1-9][0-9]*)$/.test(last) && Number(last) < parent.length) parent[Number(last)] = null;
    } else if (parent && typeof parent === 'object') {
      delete (parent as Record<string, unknown>)[last];
    }
  }
  return copy;
}

/** "Present and non-empty": not undefined, null, false, '', [] or {}. */
export function isPresent(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v as object).length > 0;
  return true;
}
