// The ledger's NOTICEs (such as "the tool of this call is not registered") reach psql
// but a driver drops them unless someone listens: the Ledger listens while its own
// statements run and hands each one to `onNotice` (default: console.warn), so a
// mistyped tool name does not run silently.

import type { Queryable } from './ledger.js';

/** A NOTICE (or WARNING) the database sent while a Ledger call ran. */
export interface LedgerNotice {
  /** NOTICE, WARNING, ... */
  severity: string;
  /** The SQLSTATE (00000 for a plain notice). */
  code: string | undefined;
  message: string;
  detail: string | undefined;
  hint: string | undefined;
  /** The call it came with: the SQL function, and the tool and operation ID given to it, if any. */
  call: { fn: string; tool?: string; operationId?: string };
}

export type NoticeHandler = (notice: LedgerNotice) => void;

/** The message of a notice as one text: what happened (with the call), DETAIL and HINT. */
export function formatNotice(n: LedgerNotice): string {
  const about = [n.call.tool !== undefined ? `tool ${JSON.stringify(n.call.tool)}` : '',
    n.call.operationId !== undefined ? `operation ${n.call.operationId}` : ''].filter(Boolean).join(', ');
  return `${n.message} (${n.call.fn}${about ? `: ${about}` : ''})` +
    `${n.detail ? `\nDETAIL: ${n.detail}` : ''}${n.hint ? `\nHINT: ${n.hint}` : ''}`;
}

export const warnNotice: NoticeHandler = (n) => console.warn(formatNotice(n));

interface NoticeEmitter {
  on(event: 'notice' | 'error', listener: (msg: any) => void): unknown;
  removeListener(event: 'notice' | 'error', listener: (msg: any) => void): unknown;
}
interface PoolLike extends Queryable {
  connect(): Promise<Queryable & NoticeEmitter & { release(err?: unknown): void }>;
  totalCount: number;
}

const isPool = (db: Queryable): db is PoolLike =>
  typeof (db as Partial<PoolLike>).connect === 'function' && typeof (db as Partial<PoolLike>).totalCount === 'number';
const isEmitter = (db: unknown): db is NoticeEmitter =>
  typeof (db as Partial<NoticeEmitter>).on === 'function' &&
  typeof (db as Partial<NoticeEmitter>).removeListener === 'function';

// A client shared by concurrent Ledger calls gets one listener, which reports each
// notice once (to the handler of the call that registered first).
const listening = new WeakMap<object, { count: number; listener: (msg: any) => void }>();

async function withListener<T>(client: NoticeEmitter, report: (msg: any) => void, run: () => Promise<T>): Promise<T> {
  let entry = listening.get(client);
  if (entry) entry.count += 1;
  else {
    entry = { count: 1, listener: report };
    listening.set(client, entry);
    client.on('notice', report);
  }
  try {
    return await run();
  } finally {
    entry.count -= 1;
    if (entry.count === 0) {
      client.removeListener('notice', entry.listener);
      listening.delete(client);
    }
  }
}

/**
 * Runs one statement on `db` and reports the notices it raised. A pg.Pool: on a client
 * of its own for the statement (as pool.query does); a pg.Client or PoolClient: on it;
 * anything else with query(): without notices.
 */
export async function queryReportingNotices(db: Queryable, text: string, values: unknown[],
  call: LedgerNotice['call'], onNotice: NoticeHandler): Promise<Record<string, any>[]> {
  const report = (msg: any) => {
    try {
      onNotice({
        severity: String(msg?.severity ?? 'NOTICE'), code: msg?.code, message: String(msg?.message ?? msg),
        detail: msg?.detail || undefined, hint: msg?.hint || undefined, call,
      });
    } catch { /* a failing handler must not fail the ledger call */ }
  };
  if (isPool(db)) {
    // What pool.query does, with the notice listener on the client it borrows: a
    // connection error during the statement is the statement's error, and a client
    // that saw an error is not reused.
    const client = await db.connect();
    let failure: unknown;
    const onError = (err: unknown) => { failure ??= err; };
    client.on('error', onError);
    try {
      return await withListener(client, report, async () => (await client.query(text, values)).rows);
    } catch (err) {
      failure ??= err;
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(failure === undefined ? undefined : failure instanceof Error ? failure : new Error(String(failure)));
    }
  }
  if (isEmitter(db)) return withListener(db, report, async () => (await db.query(text, values)).rows);
  return (await db.query(text, values)).rows;
}
