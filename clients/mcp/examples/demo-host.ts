// A minimal MCP host for the refund story: connects to a server command over stdio
// (the SDK's real client), calls one tool with a request timeout, and re-sends the
// same call after a timeout or an isError answer, as hosts do. One JSON line per answer.
// A re-send waits --resend-timeout-ms (default: --timeout-ms): it may have to wait for the
// first call's outcome and reconcile it, which on a loaded machine takes longer.
//   node dist/examples/demo-host.js --tool NAME --args JSON [--timeout-ms 1000] [--resend-timeout-ms MS] [--sends 2]
//                                   -- COMMAND [ARGS...]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const opt = (k: string, d?: string) => { const i = argv.indexOf(k); return i >= 0 && i < sep ? argv[i + 1] : d; };
const cmd = argv.slice(sep + 1);
const env: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
const client = new Client({ name: 'demo-host', version: '1.0.0' }, { capabilities: {} });
await client.connect(new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), env, stderr: 'inherit' }));
const sends = Number(opt('--sends', '2'));
for (let i = 1; i <= sends; i++) {
  try {
    const r: any = await client.callTool({ name: opt('--tool')!, arguments: JSON.parse(opt('--args', '{}')!) }, undefined,
      { timeout: Number(i === 1 ? opt('--timeout-ms', '1000') : opt('--resend-timeout-ms', opt('--timeout-ms', '1000'))) });
    const op = r._meta?.['opledger/operation'] ?? {};
    console.log(JSON.stringify({ send: i, isError: r.isError === true, decision: op.decision, operation_id: op.operationId, text: r.content?.[0]?.text }));
  } catch (e) {
    console.log(JSON.stringify({ send: i, timeout: true, error: (e as Error).message }));
  }
}
await client.close();
