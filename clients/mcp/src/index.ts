// @opledger/mcp: the opledger MCP gateway as a library (the CLI is src/cli.ts).
export { Gateway, Session, runLookup } from './gateway.js';
export type { GatewayOptions, LookupOutcome } from './gateway.js';
export { loadConfig, validateConfig, parseDuration, ConfigError } from './config.js';
export type { GatewayConfig, ToolPolicyConfig, LookupConfig, IdStrategy, Guarantee } from './config.js';
export { resolvePolicy, effectFromHints } from './policy.js';
export type { Policy, ToolInfo } from './policy.js';
export { LedgerDb, makePool, ID_NAMESPACE } from './db.js';
export { checkRegistrations, registerPolicies, policiesOf, reconcileOnce, listServerTools } from './admin.js';
export { META_KEY, META_CONVERSATION, META_OPERATION, META_OPERATION_ID } from './results.js';
export { main } from './cli.js';
