// The console's request guards: which Host headers are served (DNS rebinding), the
// access token a non-loopback listener requires, and the CSRF checks of every POST
// (same-origin Origin / Sec-Fetch-Site, plus a per-session synchronizer token).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function isLoopback(host) {
    return host === '127.0.0.1' || host === '::1' || host === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function randomToken() {
    return randomBytes(32).toString('base64url');
}

// Constant-time comparison of two strings of any length (both are hashed first, so
// neither the length nor a common prefix shows in the time taken).
export function sameSecret(a, b) {
    if (typeof a !== 'string' || typeof b !== 'string' || a.length === 0 || b.length === 0) return false;
    const ha = createHash('sha256').update(a).digest();
    const hb = createHash('sha256').update(b).digest();
    return timingSafeEqual(ha, hb);
}

function hostWithPort(host, port) {
    return (host.includes(':') ? `[${host}]` : host) + ':' + port;
}

// The Host header values this console answers: loopback names on its port, the
// address it listens on, and what the operator names with --allowed-host. Anything
// else (a rebinding attacker's name pointing at 127.0.0.1) gets 421.
export function allowedHosts(listenHost, port, extra) {
    const hosts = new Set();
    for (const h of ['127.0.0.1', 'localhost', '::1']) hosts.add(hostWithPort(h, port).toLowerCase());
    if (listenHost && listenHost !== '0.0.0.0' && listenHost !== '::') hosts.add(hostWithPort(listenHost, port).toLowerCase());
    for (const h of extra) hosts.add(h.toLowerCase());
    return hosts;
}

export function hostGuard(hosts) {
    return (req, res, next) => {
        const host = (req.headers.host || '').toLowerCase();
        if (!hosts.has(host)) {
            res.status(421).type('text/plain').send('This console does not answer for that Host name (see --allowed-host).\n');
            return;
        }
        next();
    };
}

// A POST is accepted only from this console's own pages: a browser sends Origin with
// every cross-origin POST and Sec-Fetch-Site on every request, so either one naming
// another site is refused before the token is even looked at.
export function sameOriginPost(req) {
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${req.headers.host}` && origin !== `https://${req.headers.host}`) {
        return false;
    }
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
    return true;
}

export function securityHeaders(req, res, next) {
    res.set({
        'Content-Security-Policy':
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        'X-Content-Type-Options': 'nosniff',
        // Not no-referrer: with it, browsers send "Origin: null" on same-origin form posts,
        // which the CSRF check rightly refuses.
        'Referrer-Policy': 'same-origin',
        'X-Frame-Options': 'DENY',
        'Cache-Control': 'no-store',
        'Cross-Origin-Opener-Policy': 'same-origin',
        'Cross-Origin-Resource-Policy': 'same-origin',
    });
    next();
}
