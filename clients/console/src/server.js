// The console's web application: Express 5 routes rendering Eta templates (which
// escape every interpolated value unless a template asks for raw output, which only
// the page layout does for the already-rendered page body). Every database call runs
// on the logged-in person's own connection pool (see sessions.js).
import express from 'express';
import { Eta } from 'eta';
import cookie from 'cookie';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { Sessions, COOKIE } from './sessions.js';
import { allowedHosts, hostGuard, randomToken, sameOriginPost, sameSecret, securityHeaders } from './security.js';
import { argumentRows, barChart, fingerprint, formatInterval, formatTime } from './present.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const LOGIN_COOKIE = 'opledger_console_login';
const MAX_TEXT = 1024;

// Errors the person may see: the ledger's own messages never carry a caller's value
// (they name JSON Pointers), and permission errors come from PostgreSQL's grants.
function describe(err) {
    if (err && err.code === '42501') return { code: err.code, text: `Your role may not do this: ${err.message}` };
    if (err && typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code)) {
        return { code: err.code, text: err.message + (err.detail ? ` (${err.detail})` : '') };
    }
    if (err && err.code === 'console_input') return { code: '22023', text: err.message };
    return { code: 'error', text: 'The database could not be reached or answered with an error.' };
}

function text(value, name, { required = false, max = MAX_TEXT } = {}) {
    const v = typeof value === 'string' ? value.trim() : '';
    if (required && v === '') {
        const e = new Error(`${name} is required.`);
        e.code = 'console_input';
        throw e;
    }
    if (v.length > max) {
        const e = new Error(`${name} is longer than ${max} characters.`);
        e.code = 'console_input';
        throw e;
    }
    return v;
}

async function features(pool) {
    const { rows } = await pool.query(`
        SELECT pg_catalog.to_regprocedure('opledger.verify_chain(text)') IS NOT NULL AS verify_chain,
               pg_catalog.to_regclass('opledger.receipts') IS NOT NULL AS receipts,
               pg_catalog.to_regprocedure('opledger.receipt_public_keys()') IS NOT NULL AS public_keys,
               pg_catalog.has_column_privilege('opledger.operations', 'args', 'SELECT') AS can_read_args`);
    return rows[0];
}

export function createConsole(options) {
    const { baseConfig, listenHost, port, extraHosts = [], accessToken = null } = options;
    const sessions = new Sessions(baseConfig);
    const eta = new Eta({ views: path.join(here, '..', 'views'), autoEscape: true, cache: true });
    const app = express();
    app.disable('x-powered-by');
    app.set('trust proxy', false);
    app.use(hostGuard(allowedHosts(listenHost, port, extraHosts)));
    app.use(securityHeaders);
    app.get('/favicon.ico', (req, res) => res.status(204).end());
    app.use('/static', express.static(path.join(here, '..', 'static'), { fallthrough: false, index: false }));
    app.use(express.urlencoded({ extended: false, limit: '64kb', parameterLimit: 50 }));

    // Session lookup, the access token, and CSRF checks for every POST.
    app.use((req, res, next) => {
        const cookies = cookie.parse(req.headers.cookie || '');
        req.cookies = cookies;
        req.session = sessions.get(cookies[COOKIE]);
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization || '');
        req.accessOk = accessToken === null || (bearer && sameSecret(bearer[1], accessToken))
            || (req.session && req.session.accessVerified);
        if (req.method === 'POST' && !sameOriginPost(req)) {
            res.status(403).type('text/plain').send('Cross-origin request refused.\n');
            return;
        }
        next();
    });

    const render = (res, view, data, status = 200) => {
        const session = res.req.session;
        const body = eta.render(view, { ...data, session, csrf: session ? session.csrf : null });
        res.status(status).type('html').send(body);
    };

    const requireSession = (req, res, next) => {
        if (!req.session) {
            if (req.method === 'GET') return res.redirect(303, '/login');
            return res.status(403).type('text/plain').send('Not logged in (or the session expired).\n');
        }
        if (!req.accessOk) return res.status(401).type('text/plain').send('Access token required.\n');
        if (req.method === 'POST' && !sameSecret(req.body && req.body._csrf, req.session.csrf)) {
            return res.status(403).type('text/plain').send('Invalid or missing CSRF token.\n');
        }
        next();
    };

    const flashThenRedirect = (req, res, to, kind, message) => {
        req.session.flash = { kind, message };
        res.redirect(303, to);
    };
    const takeFlash = (req) => {
        const f = req.session && req.session.flash;
        if (req.session) req.session.flash = null;
        return f;
    };

    // --- login / logout
    app.get('/login', (req, res) => {
        if (req.session) return res.redirect(303, '/approvals');
        const token = randomToken();
        res.append('Set-Cookie', cookie.serialize(LOGIN_COOKIE, token, { httpOnly: true, sameSite: 'strict', path: '/login' }));
        render(res, 'login', { loginCsrf: token, needToken: accessToken !== null, error: null });
    });

    app.post('/login', async (req, res) => {
        const token = req.cookies[LOGIN_COOKIE];
        if (!sameSecret(req.body && req.body._csrf, token)) {
            return res.status(403).type('text/plain').send('Invalid or missing CSRF token.\n');
        }
        const again = (status, error) => {
            const fresh = randomToken();
            res.append('Set-Cookie', cookie.serialize(LOGIN_COOKIE, fresh, { httpOnly: true, sameSite: 'strict', path: '/login' }));
            render(res, 'login', { loginCsrf: fresh, needToken: accessToken !== null, error }, status);
        };
        const accessVerified = accessToken === null || sameSecret(req.body.access_token, accessToken)
            || Boolean(req.accessOk);
        if (!accessVerified) return again(401, 'The access token is wrong.');
        let user, password;
        try {
            user = text(req.body.user, 'User', { required: true, max: 63 });
            password = typeof req.body.password === 'string' ? req.body.password : '';
            // An empty password would let the driver fall back to other credentials.
            if (password === '') throw Object.assign(new Error('Password is required.'), { code: 'console_input' });
            if (password.length > MAX_TEXT) throw Object.assign(new Error('Password too long.'), { code: 'console_input' });
        } catch (err) {
            return again(400, err.message);
        }
        try {
            const s = await sessions.login(user, password, accessVerified);
            res.append('Set-Cookie', cookie.serialize(COOKIE, s.id, { httpOnly: true, sameSite: 'strict', path: '/' }));
            res.append('Set-Cookie', cookie.serialize(LOGIN_COOKIE, '', { httpOnly: true, sameSite: 'strict', path: '/login', maxAge: 0 }));
            res.redirect(303, '/approvals');
        } catch (err) {
            // Never echo which part was wrong, and never log the password.
            if (err.code === 'console_no_role') return again(403, err.message);
            return again(401, 'Login failed: the database refused these credentials or could not be reached.');
        }
    });

    app.post('/logout', requireSession, (req, res) => {
        sessions.end(req.session.id);
        res.append('Set-Cookie', cookie.serialize(COOKIE, '', { httpOnly: true, sameSite: 'strict', path: '/', maxAge: 0 }));
        res.redirect(303, '/login');
    });

    app.get('/', requireSession, (req, res) => res.redirect(303, '/approvals'));

    // --- approvals
    app.get('/approvals', requireSession, async (req, res) => {
        const pool = req.session.pool;
        let rows = [], error = null, canReadArgs = false;
        try {
            canReadArgs = (await features(pool)).can_read_args;
            const { rows: r } = await pool.query(`
                SELECT operation_id, tool, tenant, attempt, created_at, created_role, created_login, conversation_id,
                       approved_by, approved_at, fingerprint_alg, pg_catalog.encode(args_hash, 'hex') AS args_hash_hex
                       ${canReadArgs ? ', args' : ''}
                  FROM opledger.operations
                 WHERE status OPERATOR(pg_catalog.=) 'awaiting_approval'
                 ORDER BY created_at, operation_id LIMIT 200`);
            rows = r.map((o) => ({
                ...o,
                created_at: formatTime(o.created_at),
                approved_at: formatTime(o.approved_at),
                fingerprint: fingerprint(o.fingerprint_alg, o.args_hash_hex),
                argRows: canReadArgs ? argumentRows(o.args) : null,
            }));
        } catch (err) {
            error = describe(err);
        }
        render(res, 'approvals', { page: 'approvals', rows, error, canReadArgs, flash: takeFlash(req) });
    });

    for (const action of ['approve', 'reject']) {
        app.post(`/approvals/:id/${action}`, requireSession, async (req, res) => {
            try {
                const id = text(req.params.id, 'Operation ID', { required: true });
                const note = text(req.body.note, 'Note');
                const fn = action === 'approve' ? 'opledger.op_approve' : 'opledger.op_reject';
                const { rows } = await req.session.pool.query(
                    `SELECT status FROM ${fn}($1, $2, $3)`, [id, req.session.login, note === '' ? null : note]);
                flashThenRedirect(req, res, '/approvals', 'ok',
                    `${action === 'approve' ? 'Approved' : 'Rejected'} ${id}: now ${rows[0].status}.`);
            } catch (err) {
                const d = describe(err);
                flashThenRedirect(req, res, '/approvals', 'error', `${action} failed (${d.code}): ${d.text}`);
            }
        });
    }

    // --- unknown operations: claim and resolve
    app.get('/unknown', requireSession, async (req, res) => {
        let rows = [], error = null;
        try {
            const { rows: r } = await req.session.pool.query(
                'SELECT * FROM opledger.unknown_operations ORDER BY unknown_since, operation_id LIMIT 200');
            rows = r.map((o) => ({
                ...o,
                unknown_since: formatTime(o.unknown_since),
                claim_expires_at: formatTime(o.claim_expires_at),
                age: formatInterval(o.age),
                last_error: o.last_error === null || o.last_error === undefined ? '' : JSON.stringify(o.last_error),
                claimed_by_me: o.claim_owner === req.session.login,
            }));
        } catch (err) {
            error = describe(err);
        }
        render(res, 'unknown', { page: 'unknown', rows, error, flash: takeFlash(req) });
    });

    app.post('/unknown/claim', requireSession, async (req, res) => {
        try {
            const n = Number.parseInt(text(req.body.max_rows, 'Number', { max: 4 }) || '10', 10);
            if (!Number.isInteger(n) || n < 1 || n > 1000) {
                throw Object.assign(new Error('Claim between 1 and 1000 operations.'), { code: 'console_input' });
            }
            const { rows } = await req.session.pool.query(
                "SELECT operation_id FROM opledger.op_claim_reconciliation($1, $2, interval '15 minutes')",
                [req.session.login, n]);
            flashThenRedirect(req, res, '/unknown', 'ok',
                rows.length ? `Claimed ${rows.length} for 15 minutes: ${rows.map((r) => r.operation_id).join(', ')}.`
                    : 'Nothing to claim: every unknown operation is claimed already, or there are none.');
        } catch (err) {
            const d = describe(err);
            flashThenRedirect(req, res, '/unknown', 'error', `claim failed (${d.code}): ${d.text}`);
        }
    });

    app.post('/unknown/:id/resolve', requireSession, async (req, res) => {
        try {
            const id = text(req.params.id, 'Operation ID', { required: true });
            const outcome = text(req.body.outcome, 'Outcome', { required: true, max: 16 });
            if (!['applied', 'not_applied', 'failed'].includes(outcome)) {
                throw Object.assign(new Error('Outcome must be applied, not_applied or failed.'), { code: 'console_input' });
            }
            const providerRef = text(req.body.provider_ref, 'Provider reference');
            const resultText = text(req.body.result, 'Result', { max: 16384 });
            let result = null;
            if (resultText !== '') {
                try {
                    result = JSON.parse(resultText);
                } catch {
                    throw Object.assign(new Error('Result must be JSON (or empty).'), { code: 'console_input' });
                }
            }
            const attemptText = text(req.body.attempt, 'Attempt', { max: 10 });
            const attempt = attemptText === '' ? null : Number.parseInt(attemptText, 10);
            const { rows } = await req.session.pool.query(
                `SELECT status FROM opledger.op_resolve($1, $2, $3::jsonb, $4, $5, $6, true)`,
                [id, outcome, result === null ? null : JSON.stringify(result), attempt,
                    providerRef === '' ? null : providerRef, req.session.login]);
            flashThenRedirect(req, res, '/unknown', 'ok', `Resolved ${id} as ${outcome}: now ${rows[0].status}.`);
        } catch (err) {
            const d = describe(err);
            flashThenRedirect(req, res, '/unknown', 'error', `resolve failed (${d.code}): ${d.text}`);
        }
    });

    // --- one operation's history, receipt and chain check
    app.get('/operations', requireSession, (req, res) => {
        const id = typeof req.query.id === 'string' ? req.query.id.trim() : '';
        if (id) return res.redirect(303, `/operations/${encodeURIComponent(id)}`);
        render(res, 'find', { page: 'history' });
    });

    app.get('/operations/:id', requireSession, async (req, res) => {
        const pool = req.session.pool;
        const data = { page: 'history', op: null, events: [], error: null, chain: null, receipts: null, keys: null,
            receiptsAvailable: false, receiptErrors: [], argRows: null };
        try {
            const id = text(req.params.id, 'Operation ID', { required: true });
            data.id = id;
            const f = await features(pool);
            data.receiptsAvailable = f.verify_chain && f.receipts;
            const { rows } = await pool.query(`
                SELECT operation_id, tool, tenant, status, attempt, conversation_id, provider_ref, created_at, updated_at,
                       finished_at, created_role, created_login, approved_by, approved_at, approved_role, unknown_since,
                       resolved_at, resolved_by, resolution, resolved_role, claim_owner, claim_expires_at, purged,
                       fingerprint_alg, pg_catalog.encode(args_hash, 'hex') AS args_hash_hex
                       ${f.can_read_args ? ', args' : ''}
                  FROM opledger.operations WHERE operation_id OPERATOR(pg_catalog.=) $1`, [id]);
            if (rows.length) {
                const o = rows[0];
                data.op = { ...o, fingerprint: fingerprint(o.fingerprint_alg, o.args_hash_hex) };
                for (const k of ['created_at', 'updated_at', 'finished_at', 'approved_at', 'unknown_since', 'resolved_at', 'claim_expires_at']) {
                    data.op[k] = formatTime(o[k]);
                }
                data.argRows = f.can_read_args ? argumentRows(o.args) : null;
                const { rows: ev } = await pool.query(`
                    SELECT seq, at, kind, decision, status_before, status_after, attempt, worker, provider_ref, role, login
                      FROM opledger.events WHERE operation_id OPERATOR(pg_catalog.=) $1 ORDER BY seq`, [id]);
                data.events = ev.map((e) => ({ ...e, at: formatTime(e.at) }));
                if (data.receiptsAvailable) {
                    // Three separate reads: a role granted the chain check but not the
                    // receipts (or the reverse) still sees what it may.
                    data.receiptErrors = [];
                    try {
                        const { rows: c } = await pool.query(
                            'SELECT valid, events, head, first_broken_seq, reason FROM opledger.verify_chain($1)', [id]);
                        data.chain = c[0] || null;
                    } catch (err) {
                        data.receiptErrors.push({ what: 'chain check', ...describe(err) });
                    }
                    try {
                        const { rows: rc } = await pool.query(`
                            SELECT kind, issued_at, receipt FROM opledger.receipts
                             WHERE operation_id OPERATOR(pg_catalog.=) $1 ORDER BY issued_at`, [id]);
                        data.receipts = rc.map((r) => ({ kind: r.kind, issued_at: formatTime(r.issued_at),
                            json: JSON.stringify(r.receipt, null, 2) }));
                    } catch (err) {
                        data.receiptErrors.push({ what: 'receipts', ...describe(err) });
                    }
                    if (f.public_keys) {
                        try {
                            const { rows: k } = await pool.query(
                                'SELECT key_id, public_key, created_at, retired_at FROM opledger.receipt_public_keys() ORDER BY created_at');
                            data.keys = k.map((x) => ({ ...x, created_at: formatTime(x.created_at), retired_at: formatTime(x.retired_at) }));
                        } catch (err) {
                            data.receiptErrors.push({ what: 'public keys', ...describe(err) });
                        }
                    }
                }
            }
        } catch (err) {
            data.error = describe(err);
        }
        render(res, 'operation', { ...data, flash: takeFlash(req) });
    });

    // --- metrics over time
    app.get('/metrics', requireSession, async (req, res) => {
        const pool = req.session.pool;
        const data = { page: 'metrics', summary: null, charts: [], error: null, hoursShown: 24 };
        try {
            const { rows: s } = await pool.query("SELECT * FROM opledger.metrics_since(interval '24 hours')");
            data.summary = s[0] ? Object.entries(s[0]).map(([k, v]) => ({ name: k, value: k === 'since' ? formatTime(v) : String(v) })) : [];
            const { rows: h } = await pool.query(`
                SELECT g.hour,
                       COALESCE(sum(m.begin_calls), 0)::bigint AS begin_calls,
                       COALESCE(sum(m.attempts), 0)::bigint AS attempts,
                       COALESCE(sum(m.duplicates_prevented), 0)::bigint AS duplicates_prevented,
                       COALESCE(sum(m.successes), 0)::bigint AS successes,
                       COALESCE(sum(m.failures), 0)::bigint AS failures,
                       COALESCE(sum(m.unknowns), 0)::bigint AS unknowns,
                       COALESCE(sum(m.resolutions), 0)::bigint AS resolutions,
                       COALESCE(sum(m.manual_interventions), 0)::bigint AS manual_interventions
                  FROM pg_catalog.generate_series(
                           pg_catalog.date_trunc('hour', pg_catalog.now(), 'UTC') OPERATOR(pg_catalog.-) interval '23 hours',
                           pg_catalog.date_trunc('hour', pg_catalog.now(), 'UTC'), interval '1 hour') AS g(hour)
                  LEFT JOIN opledger.metrics_hourly m ON m.hour OPERATOR(pg_catalog.=) g.hour
                 GROUP BY g.hour ORDER BY g.hour`);
            const hours = h.map((r) => {
                const iso = new Date(r.hour).toISOString();
                return { label: iso.slice(0, 13).replace('T', ' ') + ':00Z', short: iso.slice(11, 13) + 'h' };
            });
            const col = (name) => h.map((r) => Number(r[name]));
            data.charts = [
                barChart({ title: 'Calls and executions per hour (UTC)', hours, series: [
                    { name: 'op_begin calls', cls: 's1', values: col('begin_calls') },
                    { name: 'executions', cls: 's2', values: col('attempts') }] }),
                barChart({ title: 'Outcomes per hour', hours, series: [
                    { name: 'successes', cls: 's2', values: col('successes') },
                    { name: 'failures', cls: 's3', values: col('failures') }] }),
                barChart({ title: 'Unknown outcomes and resolutions per hour', hours, series: [
                    { name: 'unknowns', cls: 's3', values: col('unknowns') },
                    { name: 'resolutions', cls: 's1', values: col('resolutions') }] }),
                barChart({ title: 'Duplicates prevented and manual interventions per hour', hours, series: [
                    { name: 'duplicates prevented', cls: 's2', values: col('duplicates_prevented') },
                    { name: 'manual interventions', cls: 's4', values: col('manual_interventions') }] }),
            ];
        } catch (err) {
            data.error = describe(err);
        }
        render(res, 'metrics', { ...data, flash: takeFlash(req) });
    });

    app.use((req, res) => res.status(404).type('text/plain').send('Not found.\n'));
    // Errors never reach the response or the log with their text: it could hold a value.
    // eslint-disable-next-line no-unused-vars
    app.use((err, req, res, next) => {
        const status = err && (err.status || err.statusCode);
        if (status === 404) return res.status(404).type('text/plain').send('Not found.\n');
        if (status && status >= 400 && status < 500) return res.status(status).type('text/plain').send('Bad request.\n');
        console.error(`opledger-console: ${req.method} ${req.path.split('/')[1] || '/'} failed (${err && err.code ? err.code : 'error'})`);
        res.status(500).type('text/plain').send('Internal error.\n');
    });

    return { app, sessions };
}
