// Imports from clients/mcp/node_modules (this folder has no package of its own).
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MCP = path.join(ROOT, 'clients/mcp');
const mod = (p) => import(pathToFileURL(path.join(MCP, 'node_modules', p)).href);
export const sdk = {
  client: () => mod('@modelcontextprotocol/sdk/dist/esm/client/index.js'),
  clientStdio: () => mod('@modelcontextprotocol/sdk/dist/esm/client/stdio.js'),
  server: () => mod('@modelcontextprotocol/sdk/dist/esm/server/index.js'),
  serverStdio: () => mod('@modelcontextprotocol/sdk/dist/esm/server/stdio.js'),
  types: () => mod('@modelcontextprotocol/sdk/dist/esm/types.js'),
  pg: () => mod('pg/esm/index.mjs'),
  ledger: () => mod('@opledger/client/dist/src/index.js'),
};
