// The question a person answers before an irreversible call runs (elicitation). It shows
// every argument that will be sent, one line per value, named by its JSON Pointer, so no
// value can hide another: a long value (or member name) is cut in the middle and the line
// says how much was cut; a value at a `redact` path shows as [REDACTED]. When the list
// would not fit (too many values, or a question too long), no question is asked at all
// and the approval is left to SQL or the admin CLI. The question also shows the
// arguments' fingerprint (the ledger's args_hash of the operation), which is what the
// approval is bound to: a call with other arguments is another operation, or OL001.

/** At most this many values are listed. */
export const APPROVAL_MAX_VALUES = 40;
/** A value or a pointer longer than this many characters is cut in the middle. */
export const APPROVAL_MAX_CHARS = 80;
/** The whole question is at most this many characters, or it is not asked. */
export const APPROVAL_MAX_MESSAGE = 4000;

import { matchesPattern } from './json.js';

const KEEP = 36;

/** `s` itself, or its first and last characters with the number of characters cut between them. */
export function cutMiddle(s: string): string {
  const chars = Array.from(s);
  if (chars.length <= APPROVAL_MAX_CHARS) return s;
  const cut = chars.length - 2 * KEEP;
  return `${chars.slice(0, KEEP).join('')}…[${cut} of ${chars.length} characters cut]…${chars.slice(-KEEP).join('')}`;
}

const token = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');
// A pointer is shown with control characters escaped, so a member name cannot start a line of its own.
const shown = (pointer: string) => cutMiddle(JSON.stringify(pointer).slice(1, -1));

/** One "pointer = value" line per leaf of `args` (values at `redact` paths shown as [REDACTED]). */
export function argumentLines(args: unknown, redact: string[]): string[] {
  const lines: string[] = [];
  const walk = (v: unknown, ptr: string, toks: string[]) => {
    if (lines.length > APPROVAL_MAX_VALUES) return;
    if (toks.length > 0 && matchesPattern(toks, redact)) { lines.push(`${shown(ptr)} = [REDACTED]`); return; }
    if (Array.isArray(v) && v.length > 0) { v.forEach((x, i) => walk(x, `${ptr}/${i}`, [...toks, String(i)])); return; }
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0) {
      for (const [k, x] of Object.entries(v)) walk(x, `${ptr}/${token(k)}`, [...toks, k]);
      return;
    }
    lines.push(`${ptr === '' ? '(the arguments)' : shown(ptr)} = ${cutMiddle(JSON.stringify(v) ?? 'null')}`);
  };
  walk(args ?? {}, '', []);
  return lines;
}

export type ApprovalQuestion = { message: string } | { tooLarge: string };

/** The elicitation message, or why none can be asked. */
export function approvalQuestion(tool: string, operationId: string, fingerprint: string, args: unknown, redact: string[]):
  ApprovalQuestion {
  const lines = argumentLines(args, redact);
  if (lines.length > APPROVAL_MAX_VALUES) {
    return { tooLarge: `This call has too many argument values to show whole in an approval question (more than ${APPROVAL_MAX_VALUES}).` };
  }
  const message = `Approve the irreversible action "${cutMiddle(tool)}" (operation ${operationId})? It runs once, ` +
    `with exactly these ${lines.length} argument value${lines.length === 1 ? '' : 's'}:\n` +
    lines.map((l) => `  ${l}`).join('\n') +
    `\nArguments fingerprint (the ledger's args_hash): ${fingerprint}. The approval holds for these arguments only.`;
  if (message.length > APPROVAL_MAX_MESSAGE) {
    return { tooLarge: `This call has too many or too long arguments to show whole in an approval question (${message.length} characters, at most ${APPROVAL_MAX_MESSAGE}).` };
  }
  return { message };
}
