// @opledger/client: orchestrator client for the opledger PostgreSQL extension.
export * from './types.js';
export * from './errors.js';
export { Ledger, parseBeginRow, parseOperationRow } from './ledger.js';
export type { Queryable, ToolOptions, ReportOptions } from './ledger.js';
export { executeOnce, reconcileBatch } from './execute.js';
export type { ExecuteOptions, ToolCallContext, ReconcileContext } from './execute.js';
