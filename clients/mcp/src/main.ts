// Entry point of the opledger-mcp command.
import { main } from './cli.js';

main(process.argv.slice(2)).then((code) => process.exit(code), (e) => {
  process.stderr.write(`opledger-mcp: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
