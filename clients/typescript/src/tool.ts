// idempotentTool: one line to make a framework's tool object safe to repeat. Works on
// any object with an `execute(input, ...rest)` method, such as the Vercel AI SDK's
// `tool({ description, inputSchema | parameters, execute(input, { toolCallId, ... }) })`
// and the OpenAI Agents SDK's `tool({ name, description, parameters,
// execute(input, runContext, details) })` options. No dependency on either.

import { AsyncLocalStorage } from 'node:async_hooks';

import { executeOnce, type ExecuteOptions, type ToolCallContext } from './execute.js';
import { Ledger, type Queryable } from './ledger.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyExecute = (input: any, ...rest: any[]) => unknown;
type ExecuteOf<D> = D extends { execute?: infer F } ? Extract<F, AnyExecute> : never;
/** The input type of a tool object's `execute`. */
export type ToolInput<D> = ExecuteOf<D> extends (input: infer I, ...rest: any[]) => unknown ? I : never;
/** The arguments of `execute` after the input (the framework's call options). */
export type ToolRest<D> = ExecuteOf<D> extends (input: any, ...rest: infer R) => unknown ? R : never;
/** What a tool object's `execute` resolves to. */
export type ToolOutput<D> = ExecuteOf<D> extends (...args: any[]) => infer O ? Awaited<O> : never;

export interface IdempotentToolOptions<I, R extends unknown[], T> extends ExecuteOptions<T, I> {
  /**
   * The stable ID of the intent, from the conversation and plan step (e.g. with
   * ledger.deriveOperationId): never a fresh UUID, or every retry is a new operation.
   * Receives the same arguments as `execute`.
   */
  operationId: (input: I, ...rest: R) => string | Promise<string>;
  /** The conversation the call belongs to (stored with the operation). */
  conversationId?: (input: I, ...rest: R) => string | undefined;
  /** Who runs the attempts (shown in the audit trail). */
  worker?: string;
  /** Lease for each attempt, as a PostgreSQL interval; default: the tool's. */
  lease?: string;
}

const current = new AsyncLocalStorage<ToolCallContext<unknown>>();

/**
 * Inside a tool wrapped by idempotentTool: the operation being executed, whose
 * `operationId` is to be passed to the provider as its idempotency key.
 */
export function currentOperation(): { operationId: string; attempt: number } | undefined {
  const ctx = current.getStore();
  return ctx && { operationId: ctx.operationId, attempt: ctx.attempt };
}

/**
 * Returns a copy of `definition` whose `execute` runs through executeOnce under the
 * ledger tool name `tool`: the input is the fingerprinted args, a repeat replays the
 * stored result, an unknown outcome is reconciled (options.reconcile) or thrown. Inside
 * `execute`, `currentOperation()` gives the operation ID for the provider.
 *
 *     const refund = tool(idempotentTool(pool, 'payments.refund', {
 *       description: 'Refund a charge', inputSchema: schema,
 *       execute: async (input) => payments.refund({ ...input, reference: currentOperation()!.operationId }),
 *     }, { operationId: (input) => ledger.deriveOperationId('support', { conversation, step }) }));
 */
export function idempotentTool<D extends { execute?: AnyExecute }>(
  db: Queryable | Ledger,
  tool: string,
  definition: D,
  options: IdempotentToolOptions<ToolInput<D>, ToolRest<D>, ToolOutput<D>>,
): D {
  const original = definition.execute;
  if (typeof original !== 'function') {
    throw new TypeError(`idempotentTool(${JSON.stringify(tool)}): the tool object has no execute function`);
  }
  const ledger = db instanceof Ledger ? db : new Ledger(db);
  const execute = async (input: ToolInput<D>, ...rest: ToolRest<D>): Promise<ToolOutput<D>> => {
    const operationId = await options.operationId(input, ...rest);
    return executeOnce<ToolOutput<D>, ToolInput<D>>(ledger, {
      operationId, tool, args: input, conversationId: options.conversationId?.(input, ...rest),
      worker: options.worker, lease: options.lease,
    }, (ctx) => current.run(ctx, async () => (await original.call(definition, input, ...rest)) as ToolOutput<D>),
    options);
  };
  return { ...definition, execute } as D;
}
