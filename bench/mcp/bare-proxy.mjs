// A bare forwarding proxy on the same SDK transports as the gateway, without a ledger:
// what one stdio hop costs. Every JSON-RPC message is passed on unchanged.
//   node bare-proxy.mjs -- COMMAND [ARGS...]
import { sdk } from './sdk.mjs';
const { StdioServerTransport } = await sdk.serverStdio();
const { StdioClientTransport } = await sdk.clientStdio();
const cmd = process.argv.slice(process.argv.indexOf('--') + 1);
const up = new StdioServerTransport();
const down = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), stderr: 'inherit' });
up.onmessage = (m) => { down.send(m).catch(() => {}); };
down.onmessage = (m) => { up.send(m).catch(() => {}); };
down.onclose = () => process.exit(0);
up.onclose = () => process.exit(0);
process.stdin.on('end', () => process.exit(0));
await down.start();
await up.start();
