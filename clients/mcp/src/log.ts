// Structured logs: one JSON object per line on stderr (stdout belongs to MCP).
//
// Lines are queued and written together in the check phase of the same event-loop turn
// (setImmediate), so a log call on the hot path of a tools/call costs a push, and the
// formatting and the write to stderr (synchronous for pipes and files) happen after the
// message the call was waiting for has been sent on. Still one line per event, in order;
// anything queued is written synchronously at process exit (flushLogs()).

export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

let threshold: number = ORDER[(process.env.OPLEDGER_MCP_LOG_LEVEL as Level) ?? 'info'] ?? ORDER.info;

export function setLogLevel(l: Level): void {
  threshold = ORDER[l];
}

interface Entry { ts: number; level: Level; event: string; fields: Record<string, unknown> }
let queue: Entry[] = [];
let scheduled = false;

function format(e: Entry): string {
  try {
    return JSON.stringify({ ts: new Date(e.ts).toISOString(), level: e.level, event: e.event, ...e.fields }) + '\n';
  } catch (err) {
    return JSON.stringify({ ts: new Date(e.ts).toISOString(), level: e.level, event: e.event, log_error: String(err) }) + '\n';
  }
}

/** Writes every queued line now (synchronously). */
export function flushLogs(): void {
  scheduled = false;
  if (queue.length === 0) return;
  const q = queue;
  queue = [];
  let text = '';
  for (const e of q) text += format(e);
  try {
    process.stderr.write(text);
  } catch {
    // stderr gone: nothing to do
  }
}

export function log(level: Level, event: string, fields: Record<string, unknown> = {}): void {
  if (ORDER[level] < threshold) return;
  queue.push({ ts: Date.now(), level, event, fields });
  if (!scheduled) {
    scheduled = true;
    setImmediate(flushLogs);
  }
}

process.on('exit', flushLogs);
