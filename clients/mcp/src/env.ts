// The environment of a wrapped MCP server (spawned with -- COMMAND): the gateway's own,
// without the ledger's connection. The gateway reaches the ledger through DATABASE_URL,
// OPLEDGER_* variables and libpq's variables; a server that inherited them could open a
// connection to the ledger as the gateway's role, or read its password. So none of them
// is passed on; everything else (PATH, HOME, the server's own settings) is.

/**
 * Every environment variable libpq reads as a connection setting: the PostgreSQL 15 documentation's list
 * ("Environment Variables" of the libpq chapter, checked against the names in libpq 15's
 * library), then the ones later releases added, since a wrapped server may link a newer
 * libpq.
 */
export const LIBPQ_ENV: readonly string[] = [
  // connection parameters (PostgreSQL 15)
  'PGHOST', 'PGHOSTADDR', 'PGPORT', 'PGDATABASE', 'PGUSER', 'PGPASSWORD', 'PGPASSFILE', 'PGCHANNELBINDING',
  'PGSERVICE', 'PGSERVICEFILE', 'PGOPTIONS', 'PGAPPNAME', 'PGSSLMODE', 'PGREQUIRESSL', 'PGSSLCOMPRESSION',
  'PGSSLCERT', 'PGSSLKEY', 'PGSSLROOTCERT', 'PGSSLCRL', 'PGSSLCRLDIR', 'PGSSLSNI', 'PGREQUIREPEER',
  'PGSSLMINPROTOCOLVERSION', 'PGSSLMAXPROTOCOLVERSION', 'PGGSSENCMODE', 'PGKRBSRVNAME', 'PGGSSLIB',
  'PGCONNECT_TIMEOUT', 'PGCLIENTENCODING', 'PGTARGETSESSIONATTRS',
  // the session's defaults (PostgreSQL 15)
  'PGDATESTYLE', 'PGTZ', 'PGGEQO',
  // where libpq finds its files (PostgreSQL 15)
  'PGSYSCONFDIR', 'PGLOCALEDIR',
  // added by PostgreSQL 16 to 18
  'PGREQUIREAUTH', 'PGSSLCERTMODE', 'PGLOADBALANCEHOSTS', 'PGGSSDELEGATION', 'PGSSLNEGOTIATION',
  'PGMINPROTOCOLVERSION', 'PGMAXPROTOCOLVERSION', 'PGOAUTHDEBUG',
  // not libpq's, read by node-postgres (the gateway's own driver) as connection settings
  'PGCLIENT_ENCODING', 'PGBINARY', 'PGREPLICATION',
];

const STRIPPED = new Set<string>([...LIBPQ_ENV, 'DATABASE_URL']);

/** Is this variable kept from a wrapped server? (The gateway's own settings are OPLEDGER_*.) */
export function isLedgerVariable(name: string): boolean {
  return STRIPPED.has(name) || name.startsWith('OPLEDGER_');
}

/** The environment of a spawned server: the gateway's, without the ledger's connection and credentials. */
export function childEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || isLedgerVariable(k)) continue;
    out[k] = v;
  }
  return out;
}
