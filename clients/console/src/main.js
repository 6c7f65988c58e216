// Command line of opledger-console: reads the options, refuses unsafe listeners, and
// serves the console until SIGINT/SIGTERM.
import { readFileSync } from 'node:fs';
import { parse as parseConnectionString } from 'pg-connection-string';
import { createConsole } from './server.js';
import { isLoopback } from './security.js';

const USAGE = `usage: opledger-console --database URL [options]

Serves the opledger operator console (approvals, unknown operations, an operation's
history, metrics). Each person logs in with their own database user and password;
every query runs as that role, so the ledger's grants and separation of duties apply.

  --database URL           postgres://host:port/dbname (user and password in the URL are
                           ignored: the login form supplies them). Or OPLEDGER_CONSOLE_DATABASE.
  --listen HOST:PORT       where to listen (default 127.0.0.1:8377). Any address that is not
                           loopback needs an access token.
  --access-token-file FILE a file holding the access token (at least 32 characters); or set
                           OPLEDGER_CONSOLE_TOKEN. Requests then need "Authorization: Bearer
                           TOKEN", or the token typed into the login form.
  --allowed-host NAME:PORT another Host header to answer (a reverse proxy's name, or the
                           machine's name when listening on 0.0.0.0); repeatable. Requests
                           naming any other host get 421.
  --help                   this text
`;

function parseArgs(argv) {
    const opts = { database: process.env.OPLEDGER_CONSOLE_DATABASE || null, listen: '127.0.0.1:8377',
        tokenFile: null, allowedHosts: [], help: false };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
            return argv[++i];
        };
        switch (a) {
            case '--database': opts.database = value(); break;
            case '--listen': opts.listen = value(); break;
            case '--access-token-file': opts.tokenFile = value(); break;
            case '--allowed-host': opts.allowedHosts.push(value()); break;
            case '--help': case '-h': opts.help = true; break;
            default: throw new Error(`unknown option ${a} (see --help)`);
        }
    }
    return opts;
}

function parseListen(listen) {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:]+)):(\d{1,5})$/.exec(listen);
    if (!m) throw new Error('--listen must be HOST:PORT');
    const port = Number(m[3]);
    if (port > 65535) throw new Error('--listen port out of range');
    return { host: m[1] || m[2], port };
}

// The database's address from the URL, without its credentials.
export function baseConfigFrom(url) {
    const c = parseConnectionString(url);
    const base = {};
    for (const k of ['host', 'port', 'database', 'ssl', 'options']) {
        if (c[k] !== undefined && c[k] !== null && c[k] !== '') base[k] = c[k];
    }
    if (base.port) base.port = Number(base.port);
    return base;
}

export async function main(argv) {
    const opts = parseArgs(argv);
    if (opts.help) {
        process.stdout.write(USAGE);
        return;
    }
    if (!opts.database) throw new Error('--database URL is required (see --help)');
    // The server process's own libpq settings must never stand in for a person's
    // credentials (pg reads PGPASSWORD and ~/.pgpass when a password is missing).
    for (const k of Object.keys(process.env)) {
        if (/^PG[A-Z]+$/.test(k)) delete process.env[k];
    }
    process.env.PGPASSFILE = '/dev/null';
    const baseConfig = baseConfigFrom(opts.database);
    const { host, port } = parseListen(opts.listen);

    let accessToken = process.env.OPLEDGER_CONSOLE_TOKEN || null;
    if (opts.tokenFile) accessToken = readFileSync(opts.tokenFile, 'utf8').trim();
    delete process.env.OPLEDGER_CONSOLE_TOKEN;
    if (accessToken !== null && accessToken.length < 32) {
        throw new Error('the access token must be at least 32 characters');
    }
    if (!isLoopback(host) && accessToken === null) {
        throw new Error(`refusing to listen on ${host}, which is not loopback, without an access token (--access-token-file or OPLEDGER_CONSOLE_TOKEN)`);
    }

    const { app, sessions } = createConsole({ baseConfig, listenHost: host, port, extraHosts: opts.allowedHosts, accessToken });
    const server = await new Promise((resolve, reject) => {
        const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)));
        s.on('error', reject);
    });
    const addr = server.address();
    const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    console.log(`opledger-console: open http://${isLoopback(host) ? '127.0.0.1' : shown}:${addr.port}/ `
        + `(database ${baseConfig.host || 'localhost'}:${baseConfig.port || 5432}/${baseConfig.database || ''}; log in with your own database user)`);
    const stop = () => {
        sessions.close().finally(() => server.close(() => process.exit(0)));
        setTimeout(() => process.exit(0), 3000).unref();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
}
