// @opledger/client: orchestrator client for the opledger PostgreSQL extension.
export * from './types.js';
export * from './errors.js';
export { Ledger, parseBeginRow, parseOperationRow } from './ledger.js';
export type { Queryable, ToolOptions, ReportOptions } from './ledger.js';
export { executeOnce, reconcileBatch, EXECUTE_DEFAULTS } from './execute.js';
export type { ExecuteOptions, ToolCallContext, ReconcileContext } from './execute.js';
export { assertStorableJsonText, toJsonText } from './json.js';
export { idempotentTool, currentOperation } from './tool.js';
export type { IdempotentToolOptions, ToolInput, ToolRest, ToolOutput } from './tool.js';
