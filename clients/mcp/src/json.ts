// RFC 6901 JSON Pointers over plain JSON values, and a deep copy.
//
// Pointer lists (hashExclude, redact) follow the ledger's register_tool exactly: a
// reference token written "*" matches every member of an object and every element of
// an array at its level, and one list may not have a "*" and a named token at the same
// level (the ledger matches a list in one pass, without backtracking, and refuses such a
// list). A single pointer (providerRef, lookup.found...) names one value: no "*".

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export class PointerError extends Error {}

/** The unescaped reference tokens of a pointer ("~0" -> "~", "~1" -> "/"; any other "~" is invalid). */
export function parsePointer(p: string): string[] {
  if (p === '') return [];
  if (!p.startsWith('/')) throw new PointerError(`invalid JSON Pointer "${p}": must be empty or start with '/'`);
  return p.slice(1).split('/').map((raw) => {
    if (/~(?![01])/.test(raw)) throw new PointerError(`invalid JSON Pointer "${p}": '~' must be followed by '0' or '1'`);
    return raw.replace(/~1/g, '/').replace(/~0/g, '~');
  });
}

/** A reference token that matches every member or element: the raw token "*". */
export const WILDCARD = Symbol('*');
type Token = string | typeof WILDCARD;

function parsePattern(p: string): Token[] {
  const toks = parsePointer(p);
  const raw = p === '' ? [] : p.slice(1).split('/');
  return toks.map((t, i) => (raw[i] === '*' ? WILDCARD : t));
}

/** Does the pointer have a "*" token? */
export function hasWildcard(p: string): boolean {
  return p !== '' && p.slice(1).split('/').includes('*');
}

/**
 * Checks a pointer list as the ledger compiles one: every pointer well formed, and no
 * level where one pointer has "*" and another a named token. Throws PointerError.
 */
export function checkPointerList(pointers: string[]): void {
  interface Node { named: Map<string, Node>; any?: Node }
  const root: Node = { named: new Map() };
  for (const p of pointers) {
    let node = root;
    for (const tok of parsePattern(p)) {
      if (tok === WILDCARD) {
        if (node.named.size > 0) throw new PointerError(`invalid JSON Pointer "${p}": a '*' token cannot share its level with named tokens of other pointers`);
        node = node.any ??= { named: new Map() };
      } else {
        if (node.any) throw new PointerError(`invalid JSON Pointer "${p}": a named token cannot share its level with another pointer's '*'`);
        let next = node.named.get(tok);
        if (!next) { next = { named: new Map() }; node.named.set(tok, next); }
        node = next;
      }
    }
  }
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

const INDEX = /^(0|[1-9][0-9]*)$/;

/** A member of an object or an element of an array: where a pointer's last token lands. */
export type Place = [Record<string, unknown> | unknown[], string | number];

/**
 * Every place a pattern names in `doc`, as [parent, key]; a "*" token stands for every
 * member or element of its level. The empty pointer (the whole document) has no parent:
 * no places. The one matcher for the gateway's pointer lists (hashExclude, redact,
 * redactResult), so the derived ID, the stored arguments and the stored result agree.
 */
export function placesOf(doc: unknown, pattern: string): Place[] {
  const toks = parsePattern(pattern);
  if (toks.length === 0) return [];
  let level: unknown[] = [doc];
  for (const tok of toks.slice(0, -1)) {
    const next: unknown[] = [];
    for (const cur of level) {
      if (Array.isArray(cur)) {
        if (tok === WILDCARD) next.push(...cur);
        else if (INDEX.test(tok) && Number(tok) < cur.length) next.push(cur[Number(tok)]);
      } else if (cur && typeof cur === 'object') {
        if (tok === WILDCARD) next.push(...Object.values(cur));
        else if (Object.prototype.hasOwnProperty.call(cur, tok)) next.push((cur as Record<string, unknown>)[tok]);
      }
    }
    level = next;
  }
  const last = toks[toks.length - 1];
  const out: Place[] = [];
  for (const cur of level) {
    if (Array.isArray(cur)) {
      if (last === WILDCARD) cur.forEach((_x, i) => out.push([cur, i]));
      else if (INDEX.test(last) && Number(last) < cur.length) out.push([cur, Number(last)]);
    } else if (cur && typeof cur === 'object') {
      const o = cur as Record<string, unknown>;
      if (last === WILDCARD) for (const k of Object.keys(o)) out.push([o, k]);
      else if (Object.prototype.hasOwnProperty.call(o, last)) out.push([o, last]);
    }
  }
  return out;
}

/** Does a concrete pointer's token list fall under one of the patterns ("*" matches any one token)? */
export function matchesPattern(tokens: string[], patterns: string[]): boolean {
  return patterns.some((p) => {
    let pt: Token[];
    try { pt = parsePattern(p); } catch { return false; }
    return pt.length === tokens.length && pt.every((t, i) => t === WILDCARD || t === tokens[i]);
  });
}

/**
 * A copy of `doc` without the members at the given pointers (array elements become
 * null); a "*" token removes at every member or element of its level.
 */
export function withoutPointers(doc: unknown, pointers: string[]): unknown {
  if (pointers.length === 0) return doc;
  if (pointers.includes('')) return null;
  const copy = structuredClone(doc);
  for (const p of pointers) {
    // Arrays keep their length (an element becomes null); members are removed.
    for (const [parent, key] of placesOf(copy, p)) {
      if (Array.isArray(parent)) parent[key as number] = null;
      else delete parent[key as string];
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
