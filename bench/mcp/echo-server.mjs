// The benchmark's MCP server (stdio, the SDK's low-level Server): one tool, `write`,
// that answers at once with a small result.
import { sdk } from './sdk.mjs';
const { Server } = await sdk.server();
const { StdioServerTransport } = await sdk.serverStdio();
const { CallToolRequestSchema, ListToolsRequestSchema } = await sdk.types();
const server = new Server({ name: 'bench-echo', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{ name: 'write', inputSchema: { type: 'object', properties: { n: { type: 'number' }, text: { type: 'string' } } } }],
}));
server.setRequestHandler(CallToolRequestSchema, async (req) => ({
  content: [{ type: 'text', text: `wrote ${JSON.stringify(req.params.arguments)}` }],
}));
await server.connect(new StdioServerTransport());
