// Who may talk to the gateway over Streamable HTTP (--listen): the address it binds,
// the Host and Origin headers a request may carry (DNS-rebinding protection: a web page
// whose name was rebound to this address sends its own Host and Origin), and the bearer
// token every request must carry when one is configured (always, off loopback).
//
// The SDK's own DNS-rebinding options on its transport are deprecated in favour of
// middleware (hostHeaderValidation, for Express); this is that check, port-agnostic as
// the SDK's is, run on every request before the gateway looks at it.

import { createHash, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import net from 'node:net';
import { ConfigError } from './config.js';

/** The variable that may hold the bearer token (never a command-line argument: ps shows those). */
export const TOKEN_VARIABLE = 'OPLEDGER_MCP_TOKEN';
const MIN_TOKEN_LENGTH = 16;

export interface ListenOptions {
  /** [HOST:]PORT; HOST defaults to 127.0.0.1. */
  listen: string;
  tokenFile?: string;
  allowHosts?: string[];
  allowOrigins?: string[];
}

export interface HttpGuard {
  host: string;
  port: number;
  /** The status and message for a request that may not pass, or undefined. */
  check(req: http.IncomingMessage): { status: number; message: string; headers?: Record<string, string> } | undefined;
  /** Host names (lower case, IPv6 in brackets) a request's Host header may name. */
  hostnames: string[];
  token: boolean;
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  return net.isIPv4(h) && h.startsWith('127.');
}

const isWildcard = (host: string) => host === '0.0.0.0' || host === '::';

/** A Host header's (or a name's) host name as the URL parser writes it: lower case, IPv6 in brackets. */
function hostnameOf(hostHeader: string): string | undefined {
  try {
    return new URL(`http://${hostHeader}`).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

function readToken(file: string | undefined): string | undefined {
  let token: string | undefined;
  let from: string;
  if (file !== undefined) {
    try {
      token = fs.readFileSync(file, 'utf8').trim();
    } catch (e) {
      throw new ConfigError(`--token-file: cannot read ${file}: ${(e as Error).message}`);
    }
    from = `the file ${file}`;
  } else {
    token = process.env[TOKEN_VARIABLE];
    if (token === undefined || token === '') return undefined;
    token = token.trim();
    from = TOKEN_VARIABLE;
  }
  if (token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
    throw new ConfigError(`the bearer token in ${from} must be at least ${MIN_TOKEN_LENGTH} characters without spaces ` +
      '(e.g. the output of: openssl rand -hex 32)');
  }
  return token;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Parses --listen and the token, and refuses a configuration that would expose the gateway. */
export function httpGuard(o: ListenOptions): HttpGuard {
  const m = /^(?:(.*):)?(\d+)$/.exec(o.listen);
  if (!m) throw new ConfigError('--listen wants [HOST:]PORT, e.g. 8808 or 127.0.0.1:8808 (HOST defaults to 127.0.0.1)');
  const host = m[1] ? m[1].replace(/^\[|\]$/g, '') : '127.0.0.1';
  const port = Number(m[2]);
  if (port > 65535) throw new ConfigError(`--listen: ${port} is not a port`);
  const token = readToken(o.tokenFile);
  const loopback = isLoopback(host);
  if (!loopback && token === undefined) {
    throw new ConfigError(`--listen ${o.listen}: ${isWildcard(host) ? `${host} (every address)` : host} is not a loopback address, and the gateway ` +
      `serves tools with the ledger's authority: give a bearer token (--token-file FILE or ${TOKEN_VARIABLE}); ` +
      'clients send it as "Authorization: Bearer TOKEN". Put TLS in front of it (a reverse proxy) off this machine.');
  }
  const names = new Set<string>();
  if (loopback || isWildcard(host)) for (const n of LOOPBACK_NAMES) names.add(n);
  if (!isWildcard(host)) { const n = hostnameOf(net.isIPv6(host) ? `[${host}]` : host); if (n) names.add(n); }
  for (const h of o.allowHosts ?? []) {
    const n = hostnameOf(net.isIPv6(h) ? `[${h}]` : h);
    if (!n) throw new ConfigError(`--allow-host: '${h}' is not a host name`);
    names.add(n);
  }
  const origins = new Set<string>();
  for (const x of o.allowOrigins ?? []) {
    let origin: string;
    try { origin = new URL(x).origin; } catch { throw new ConfigError(`--allow-origin: '${x}' is not an origin (e.g. https://app.example)`); }
    if (origin === 'null') throw new ConfigError(`--allow-origin: '${x}' is not an origin (e.g. https://app.example)`);
    origins.add(origin);
  }
  const expected = token === undefined ? undefined : digest(token);
  const hostnames = [...names];

  const check: HttpGuard['check'] = (req) => {
    const hostHeader = req.headers.host;
    const hostname = typeof hostHeader === 'string' ? hostnameOf(hostHeader) : undefined;
    if (!hostname || !names.has(hostname)) {
      return { status: 403, message: 'Host not allowed: the gateway answers only requests addressed to ' + hostnames.join(', ') + ' (--allow-host adds a name)' };
    }
    const origin = req.headers.origin;
    if (origin !== undefined) {
      let ok = false;
      try {
        const u = new URL(String(origin));
        ok = origins.has(u.origin) || ((u.protocol === 'http:' || u.protocol === 'https:') && names.has(u.hostname.toLowerCase()));
      } catch { ok = false; }
      if (!ok) return { status: 403, message: 'Origin not allowed (--allow-origin adds one)' };
    }
    if (expected !== undefined) {
      const auth = req.headers.authorization;
      const m2 = typeof auth === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(auth) : null;
      // Digests of equal length, compared in constant time: neither the token's length
      // nor its first differing character shows in the timing.
      if (!m2 || !timingSafeEqual(digest(m2[1]), expected)) {
        return { status: 401, message: 'a bearer token is required (Authorization: Bearer TOKEN)', headers: { 'www-authenticate': 'Bearer' } };
      }
    }
    return undefined;
  };
  return { host, port, check, hostnames, token: expected !== undefined };
}
