// An MCP server for the refund story: the payments provider's API as two MCP tools.
//   refund {charge, amount_cents, currency, reference}   POST /v1/refunds (no idempotency key)
//   find_refunds {reference}                             GET  /v1/refunds?reference=...
//   node dist/examples/payments-server.js --provider http://127.0.0.1:PORT
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const provider = process.argv[process.argv.indexOf('--provider') + 1];
if (!process.argv.includes('--provider') || !provider) {
  process.stderr.write('usage: payments-server --provider URL\n');
  process.exit(2);
}

const server = new Server({ name: 'payments', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: 'refund', description: 'Refund (part of) a charge',
      inputSchema: {
        type: 'object', required: ['charge', 'amount_cents'],
        properties: { charge: { type: 'string' }, amount_cents: { type: 'integer' }, currency: { type: 'string' }, reference: { type: 'string' } },
      },
      annotations: { destructiveHint: false, idempotentHint: false },
    },
    {
      name: 'find_refunds', description: 'Find refunds by the reference sent with them',
      inputSchema: { type: 'object', required: ['reference'], properties: { reference: { type: 'string' } } },
      annotations: { readOnlyHint: true },
    },
  ],
}));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const a = (req.params.arguments ?? {}) as Record<string, unknown>;
  let res: Response;
  if (req.params.name === 'refund') {
    res = await fetch(`${provider}/v1/refunds`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(a) });
  } else if (req.params.name === 'find_refunds') {
    res = await fetch(`${provider}/v1/refunds?reference=${encodeURIComponent(String(a.reference ?? ''))}`);
  } else {
    return { content: [{ type: 'text', text: `unknown tool ${req.params.name}` }], isError: true };
  }
  const body = await res.json() as Record<string, unknown>;
  return { content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body, isError: !res.ok };
});
await server.connect(new StdioServerTransport());
