// What the model sees for each ledger decision: a CallToolResult that says, in
// words and (for tools without an outputSchema) in structuredContent, what happened
// and what to do. Every result also carries _meta["opledger/operation"].

import type { Policy } from './policy.js';

export type CallToolResult = {
  content: Array<Record<string, unknown>>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [k: string]: unknown;
};

export const META_OPERATION = 'opledger/operation';
export const META_KEY = 'opledger/idempotency-key';
export const META_CONVERSATION = 'opledger/conversation-id';
export const META_OPERATION_ID = 'opledger/operation-id';

export interface DecisionInfo {
  decision: string;
  /** What the ledger says a client must do with the decision (op_begin's next_action). */
  nextAction?: string;
  operationId: string;
  status?: string;
  attempt?: number;
  retryAfter?: Date | null;
  [k: string]: unknown;
}

function metaOf(info: DecisionInfo): Record<string, unknown> {
  const m: Record<string, unknown> = { ...info };
  if (info.retryAfter instanceof Date) m.retryAfter = info.retryAfter.toISOString();
  for (const k of Object.keys(m)) if (m[k] === undefined || m[k] === null) delete m[k];
  return m;
}

/** Adds the gateway's _meta entry to a result (a copy; the stored result is not changed). */
export function withOperationMeta(result: CallToolResult, info: DecisionInfo): CallToolResult {
  return { ...result, _meta: { ...(result._meta ?? {}), [META_OPERATION]: metaOf(info) } };
}

/** An isError result the model can act on. structuredContent only when the tool has no outputSchema. */
export function decisionResult(p: Policy | undefined, info: DecisionInfo, text: string): CallToolResult {
  const r: CallToolResult = { content: [{ type: 'text', text }], isError: true };
  if (!p?.hasOutputSchema) r.structuredContent = { opledger: metaOf(info) };
  return withOperationMeta(r, info);
}

const when = (d: Date | null | undefined) => (d ? d.toISOString() : 'a moment');

export function inProgressText(info: DecisionInfo): string {
  return `This exact call is already running (operation ${info.operationId}, attempt ${info.attempt ?? '?'}). ` +
    `It was not started again. Do not re-issue it with other arguments: send the same call again after ` +
    `${when(info.retryAfter)} to get its result.`;
}

export function retryLaterText(info: DecisionInfo): string {
  return `An earlier attempt of this exact call (operation ${info.operationId}) did not succeed, and it may be ` +
    `retried only after ${when(info.retryAfter)}. Send the same call again then; do not re-issue it with other arguments.`;
}

export function unknownText(info: DecisionInfo, reason: string, idempotent: boolean): string {
  if (idempotent) {
    return `The outcome of this call is unknown (${reason}; operation ${info.operationId}). The tool is idempotent: ` +
      `sending the same call again later retries it with the same idempotency key, so it takes effect at most once.`;
  }
  return `The outcome of this call is unknown (${reason}; operation ${info.operationId}): it may or may not have taken ` +
    `effect. It is under reconciliation. Do NOT repeat it or re-issue it with other arguments; sending the same call ` +
    `again later returns its outcome once it is known.`;
}

export function reconcileText(info: DecisionInfo): string {
  return `An earlier attempt of this exact call (operation ${info.operationId}) has an unknown outcome and is under ` +
    `reconciliation. It was not run again. Do NOT repeat it or re-issue it with other arguments; send the same call ` +
    `later to get its outcome.`;
}

export function approvalText(info: DecisionInfo, approverHint: string): string {
  return `This call (operation ${info.operationId}) is irreversible and waits for a person's approval; it was not run. ` +
    `${approverHint} After the approval, send the same call again.`;
}

export function approvalHowTo(operationId: string): string {
  return `An approver (a member of the opledger_approver role, not the role the gateway runs as) approves it with ` +
    `SQL: SELECT opledger.op_approve('${operationId}', 'your name'); or with the admin CLI: ` +
    `opledger-mcp approve ${operationId}.`;
}

export function mismatchText(operationId: string, pointers: string[]): string {
  const where = pointers.length ? pointers.map((p) => (p === '' ? '(the whole arguments)' : p)).join(', ') : '(unknown members)';
  return `This call reuses the idempotency key of operation ${operationId} with different arguments: they differ at ` +
    `${where}. A key names one action with one set of arguments. If this is the same action, send exactly the ` +
    `arguments of the first call; if it is a new action, use a new key.`;
}
