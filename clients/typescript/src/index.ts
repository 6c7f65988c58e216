// @opledger/client: orchestrator client for the opledger PostgreSQL extension.
export * from './types.js';
export * from './errors.js';
export { Ledger, parseBeginRow, parseOperationRow } from './ledger.js';
export type { Queryable, ToolOptions, ReportOptions, LedgerOptions } from './ledger.js';
export { formatNotice } from './notices.js';
export type { LedgerNotice, NoticeHandler } from './notices.js';
export { executeOnce, reconcileBatch, EXECUTE_DEFAULTS, LEASE_MARGIN_MS } from './execute.js';
export type { ExecuteOptions, ToolCallContext, ReconcileContext } from './execute.js';
export { assertStorableJsonText, toJsonText } from './json.js';
export { idempotentTool, currentOperation } from './tool.js';
export type { IdempotentToolOptions, ToolInput, ToolRest, ToolOutput } from './tool.js';
export { verifyReceipt, canonicalJson, eventHash } from './receipt.js';
export type { ReceiptVerdict, PublishedKey, ReceiptEvidence, VerifyOptions } from './receipt.js';
