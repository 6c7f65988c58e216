#!/usr/bin/env node
// opledger-verify-receipt RECEIPT.json (--key BASE64URL | --keys KEYS.json)
//     [--operation-id ID] [--evidence EVIDENCE.json]
// Prints "valid: ..." (exit 0) or "invalid: ..." (exit 1); a usage or input error
// exits 2. RECEIPT.json is one receipt (a row's `receipt`); KEYS.json the published
// keys (a JSON array of {key_id, public_key}, as opledger.receipt_public_keys()
// returns them); EVIDENCE.json what opledger.receipt_evidence(operation_id) returns.
import { readFileSync } from 'node:fs';

import { verifyReceipt, type PublishedKey, type ReceiptEvidence } from '../receipt.js';

const usage = 'usage: opledger-verify-receipt RECEIPT.json (--key BASE64URL | --keys KEYS.json) '
  + '[--operation-id ID] [--evidence EVIDENCE.json]';

function fail(message: string): never {
  process.stderr.write(`${message}\n${usage}\n`);
  process.exit(2);
}

function readJson(path: string, what: string): unknown {
  let text: string;
  try {
    text = path === '-' ? readFileSync(0, 'utf8') : readFileSync(path, 'utf8');
  } catch (e) {
    fail(`cannot read the ${what}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    fail(`the ${what} is not JSON`);
  }
}

const args = process.argv.slice(2);
let receiptPath: string | undefined;
let key: string | undefined;
let keysPath: string | undefined;
let operationId: string | undefined;
let evidencePath: string | undefined;
for (let i = 0; i < args.length; i++) {
  // An option's value is the next word whatever it begins with (a base64url key may
  // begin with "-"), or follows "=" in the same word.
  const [a, inline] = args[i].startsWith('--') && args[i].includes('=')
    ? [args[i].slice(0, args[i].indexOf('=')), args[i].slice(args[i].indexOf('=') + 1)]
    : [args[i], undefined];
  const value = () => inline ?? args[++i] ?? fail(`${a} needs a value`);
  if (a === '--key') key = value();
  else if (a === '--keys') keysPath = value();
  else if (a === '--operation-id') operationId = value();
  else if (a === '--evidence') evidencePath = value();
  else if (a === '--help' || a === '-h') { process.stdout.write(`${usage}\n`); process.exit(0); }
  else if (a.startsWith('--')) fail(`unknown option ${a}`);
  else if (receiptPath === undefined) receiptPath = a;
  else fail('one receipt at a time');
}
if (receiptPath === undefined) fail('no receipt given');
if ((key === undefined) === (keysPath === undefined)) fail('give the public key with --key or the published keys with --keys');

const keys = key ?? (readJson(keysPath!, 'keys') as PublishedKey[]);
const evidence = evidencePath === undefined ? undefined : (readJson(evidencePath, 'evidence') as ReceiptEvidence);
const verdict = verifyReceipt(readJson(receiptPath, 'receipt'), keys, { operationId, evidence });
process.stdout.write(`${verdict.valid ? verdict.reason : `invalid: ${verdict.reason}`}\n`);
process.exit(verdict.valid ? 0 : 1);
