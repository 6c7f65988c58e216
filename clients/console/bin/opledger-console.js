#!/usr/bin/env node
// opledger-console: serves the operator console against one database.
//   opledger-console --database postgres://host:5432/db [--listen 127.0.0.1:8377]
//                    [--access-token-file FILE] [--allowed-host name:port]...
import { main } from '../src/main.js';

main(process.argv.slice(2)).catch((err) => {
    console.error(`opledger-console: ${err.message}`);
    process.exit(2);
});
