// Checking an opledger receipt outside the database (docs/receipts.md): its Ed25519
// signature against a published public key, the operation it is expected to be of,
// and, given the operation's evidence (opledger.receipt_evidence), the history it
// stands on: every event's hash recomputed along the chain, the covered event's hash
// against the receipt's chain head, and the result or error against its outcome
// fingerprint. Node's own crypto only (Ed25519 and SHA-256).
import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';

export interface ReceiptVerdict {
  valid: boolean;
  reason: string;
}

export interface PublishedKey {
  key_id: string;
  public_key: string;  // base64url of the raw 32-byte Ed25519 key
}

export interface ReceiptEvidence {
  operation: {
    operation_id: string;
    tool: string;
    tenant: string;
    status: string;
    result: unknown;
    error: unknown;
    purged: boolean;
    chain_head: string | null;
  } | null;
  events: Array<Record<string, unknown>>;
}

export interface VerifyOptions {
  operationId?: string;
  evidence?: ReceiptEvidence;
}

// RFC 8785: object members sorted by their UTF-16 code units (JavaScript's default
// string order), numbers as ECMAScript prints them, strings as JSON.stringify escapes them.
export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new Error('a JSON number must be finite');
      return JSON.stringify(value);
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return '[' + value.map(canonicalJson).join(',') + ']';
      const object = value as Record<string, unknown>;
      const names = Object.keys(object).filter((k) => object[k] !== undefined).sort();
      return '{' + names.map((k) => JSON.stringify(k) + ':' + canonicalJson(object[k])).join(',') + '}';
    }
    default:
      throw new Error(`not a JSON value: ${typeof value}`);
  }
}

const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

// The hash of one event of the evidence (its members but "hash") chained to prev.
export function eventHash(event: Record<string, unknown>, prev: string | null): string {
  const hashed: Record<string, unknown> = { ...event, prev };
  delete hashed.hash;
  return sha256Hex(canonicalJson(hashed));
}

function publicKey(base64url: string): KeyObject | null {
  try {
    if (Buffer.from(base64url, 'base64url').length !== 32) return null;
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: base64url }, format: 'jwk' });
  } catch {
    return null;
  }
}

const invalid = (reason: string): ReceiptVerdict => ({ valid: false, reason });

// keys: the published keys (receipt_public_keys()), or one public key in base64url,
// which is then taken for whatever key_id the receipt names.
export function verifyReceipt(receipt: unknown, keys: PublishedKey[] | string,
                              options: VerifyOptions = {}): ReceiptVerdict {
  if (typeof receipt !== 'object' || receipt === null || Array.isArray(receipt)) return invalid('not a JSON object');
  const r = receipt as Record<string, unknown>;
  for (const name of ['kind', 'status', 'operation_id', 'chain_head', 'key_id', 'signature']) {
    if (typeof r[name] !== 'string') return invalid(`not a version 1 receipt: "${name}" is missing or not a string`);
  }
  if (r.v !== 1) return invalid('not a version 1 receipt');
  if (typeof r.seq !== 'number') return invalid('not a version 1 receipt: "seq" is missing or not a number');

  const keyText = typeof keys === 'string' ? keys : keys.find((k) => k.key_id === r.key_id)?.public_key;
  if (keyText === undefined) return invalid('signed with a key that is not among the published keys');
  const key = publicKey(keyText);
  if (!key) return invalid('the public key is not a base64url Ed25519 key');
  const unsigned: Record<string, unknown> = { ...r };
  delete unsigned.signature;
  const signature = Buffer.from(r.signature as string, 'base64url');
  let signed = false;
  try {
    signed = signature.length === 64 && verify(null, Buffer.from(canonicalJson(unsigned), 'utf8'), key, signature);
  } catch {
    signed = false;
  }
  if (!signed) {
    return invalid('the signature does not match the receipt and the public key (the receipt was altered, or signed with another key)');
  }
  if (options.operationId !== undefined && options.operationId !== r.operation_id) {
    return invalid('the receipt is of another operation');
  }
  if (!options.evidence) return { valid: true, reason: 'valid: the signature matches the public key' };
  return checkEvidence(r, options.evidence);
}

function checkEvidence(r: Record<string, unknown>, evidence: ReceiptEvidence): ReceiptVerdict {
  const op = evidence.operation;
  if (!op) return invalid('the evidence holds no operation');
  if (op.operation_id !== r.operation_id) return invalid('the evidence is of another operation than the receipt');
  if (op.tool !== r.tool || op.tenant !== r.tenant) {
    return invalid('the operation\'s tool or tenant is not the one the receipt states');
  }
  let prev: string | null = null;
  let chained = false;
  let covered: string | null | undefined;
  for (const event of evidence.events) {
    const seq = event.seq;
    const stored = event.hash as string | null;
    if (stored === null || stored === undefined) {
      if (chained) return invalid(`the chain is broken at seq ${seq}: the event has no hash but an event before it has one`);
      continue;
    }
    const expected = eventHash(event, prev);
    if (stored !== expected) {
      if (!chained && op.purged) {
        // Events after a purge chain to the purged ones: this first link cannot be recomputed.
        prev = stored;
        chained = true;
        if (seq === r.seq) covered = stored;
        continue;
      }
      return invalid(`the chain is broken at seq ${seq}: the event's hash does not match its contents and the hash of the event before it`);
    }
    chained = true;
    prev = stored;
    if (seq === r.seq) covered = stored;
  }
  if (covered === undefined) {
    if (op.purged) return { valid: true, reason: 'valid: the signature matches; the operation was purged, its events are gone' };
    return invalid('the event the receipt covers is missing (an event was deleted)');
  }
  if (covered !== r.chain_head) return invalid('the event the receipt covers has another hash (the history was changed)');
  if ((r.status === 'succeeded' || r.status === 'failed') && op.status === r.status) {
    const payload = op.status === 'succeeded' ? op.result : op.error;
    const outcome = payload === null || payload === undefined ? null : sha256Hex(canonicalJson(payload));
    if (outcome !== (r.outcome_fingerprint ?? null)) {
      return invalid('the operation\'s result or error is not the one the receipt states');
    }
  } else if (r.kind === 'succeeded' || r.kind === 'failed') {
    return invalid('the operation\'s status is not the one the receipt states');
  }
  return { valid: true, reason: 'valid: the signature matches, and the history in the evidence matches it' };
}
