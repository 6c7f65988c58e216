// End-to-end tests of the operator console in a real browser: Debian's Chromium,
// headless, driven by playwright-core (which never downloads a browser here). The
// console runs as a child process against the test database; each person logs in
// with their own database role, and the tests check the ledger's rows afterwards.
//
// Environment (set by tests/suites/68-console.sh):
//   CONSOLE_TEST_DB        database name on the test cluster (PGHOST socket dir, PGPORT)
//   CONSOLE_TEST_SUFFIX    suffix of the login roles the suite created:
//                          con_agent_S, con_approver_a_S (also an agent), con_approver_b_S,
//                          con_reconciler_S, con_dashboard_S (password 'pw-' + role name)
//   OPLEDGER_CONSOLE_SCREENSHOTS  where screenshots go (default: a temporary directory)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(here, '..', 'bin', 'opledger-console.js');
const DB = process.env.CONSOLE_TEST_DB;
const S = process.env.CONSOLE_TEST_SUFFIX;
const PGPORT = process.env.PGPORT;
const role = (r) => `con_${r}_${S}`;
const pw = (r) => `pw-${role(r)}`;
const SHOTS = process.env.OPLEDGER_CONSOLE_SCREENSHOTS || mkdtempSync(path.join(tmpdir(), 'console-shots-'));
const SECRET_ARG = 'DE89370400440532013000';

let admin, browser, page, consoleProc, base, consoleOutput = '', userData, attacker;

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
        s.on('error', reject);
    });
}

// Starts the console; resolves with its base URL once it prints where to open it.
function startConsole(args, env = {}) {
    return new Promise((resolve, reject) => {
        const proc = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        const onData = (d) => {
            out += d;
            consoleOutput += d;
            const m = /open (http:\/\/[^ ]+)\//.exec(out);
            if (m) resolve({ proc, url: m[1], output: () => out });
        };
        proc.stdout.on('data', onData);
        proc.stderr.on('data', onData);
        proc.on('exit', (code) => reject(new Error(`console exited ${code}: ${out}`)));
    });
}

function runConsoleToExit(args, env = {}) {
    return new Promise((resolve) => {
        const proc = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        proc.stdout.on('data', (d) => { out += d; });
        proc.stderr.on('data', (d) => { out += d; });
        const timer = setTimeout(() => proc.kill('SIGTERM'), 10000);
        proc.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); });
    });
}

async function asUser(r, sql, params = []) {
    const c = new pg.Client({ database: DB, user: role(r) });
    await c.connect();
    try { return await c.query(sql, params); } finally { await c.end(); }
}

async function opRow(id) {
    const { rows } = await admin.query(
        `SELECT status, approved_by, approved_login, provider_ref, resolved_by, resolution, claim_owner, error
           FROM opledger.operations WHERE operation_id = $1`, [id]);
    return rows[0];
}

async function shot(name) {
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

async function login(r) {
    await page.context().clearCookies();
    await page.goto(`${base}/login`);
    await page.fill('input[name=user]', role(r));
    await page.fill('input[name=password]', pw(r));
    await Promise.all([page.waitForURL(/\/approvals$/), page.click('button[type=submit]')]);
    assert.equal(await page.textContent('#login'), role(r));
}

async function logout() {
    await Promise.all([page.waitForURL(/\/login$/), page.click('header button[type=submit]')]);
}

function card(id) {
    return page.locator(`section.card[data-operation="${id}"]`);
}

// The receipt panel against what the ledger says, as the logged-in role may see it.
async function assertReceiptPanel(id) {
    const { rows: p } = await admin.query(
        `SELECT has_function_privilege($1, 'opledger.verify_chain(text)', 'EXECUTE') AS chain,
                has_table_privilege($1, 'opledger.receipts', 'SELECT') AS receipts`, [role('reconciler')]);
    const errors = (await page.locator('.receipt-error').allTextContents()).join('\n');
    if (p[0].chain) {
        const { rows: v } = await admin.query('SELECT valid, events, head, first_broken_seq FROM opledger.verify_chain($1)', [id]);
        const chain = await page.textContent('#chain');
        assert.match(chain, v[0].valid ? /Chain valid/ : /Chain BROKEN/);
        assert.match(chain, new RegExp(`over ${v[0].events} events`));
        if (v[0].head) assert.ok(chain.includes(v[0].head));
        if (!v[0].valid) assert.match(chain, new RegExp(`at seq ${v[0].first_broken_seq}:`));
    } else {
        assert.match(errors, /chain check could not be read \(42501\)/);
    }
    if (p[0].receipts) {
        const { rows: n } = await admin.query('SELECT receipt FROM opledger.receipts WHERE operation_id = $1 ORDER BY issued_at', [id]);
        const shown = await page.locator('pre.receipt').allTextContents();
        assert.deepEqual(shown.map((t) => JSON.parse(t)), n.map((r) => r.receipt));
    } else {
        assert.match(errors, /receipts could not be read \(42501\)/);
    }
}

before(async () => {
    admin = new pg.Client({ database: DB });
    await admin.connect();
    await admin.query(`SELECT opledger.register_tool('payments.wire', 'irreversible', redact => ARRAY['/account/number'])`);
    await admin.query(`SELECT opledger.register_tool('payments.refund', 'non_idempotent_write')`);
    const wire = (amount) => JSON.stringify({ amount_cents: amount, currency: 'EUR', account: { holder: 'ACME <b>GmbH</b>', number: SECRET_ARG } });
    for (const [id, amount] of [['wire-approve', 120000], ['wire-reject', 990000], ['wire-dash', 5000]]) {
        await asUser('agent', 'SELECT decision FROM opledger.op_begin($1, $2, $3::jsonb)', [id, 'payments.wire', wire(amount)]);
    }
    // Separation of duties: this approver's own login begins an operation.
    await asUser('approver_a', 'SELECT decision FROM opledger.op_begin($1, $2, $3::jsonb)', ['wire-self', 'payments.wire', wire(777)]);
    await asUser('agent', 'SELECT decision FROM opledger.op_begin($1, $2, $3::jsonb)', ['refund-1', 'payments.refund', '{"charge": "ch_1", "amount_cents": 900}']);
    await asUser('agent', `SELECT status FROM opledger.op_mark_unknown('refund-1', '{"reason": "connection reset"}')`);

    const port = await freePort();
    const c = await startConsole(['--database', `postgres://127.0.0.1:${PGPORT}/${DB}`, '--listen', `127.0.0.1:${port}`]);
    consoleProc = c.proc;
    base = c.url;
    userData = mkdtempSync(path.join(tmpdir(), 'console-chromium-'));
    browser = await chromium.launchPersistentContext(userData, {
        executablePath: '/usr/bin/chromium',
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
            '--disable-component-update', '--disable-sync'],
        viewport: { width: 1280, height: 900 },
    });
    page = browser.pages()[0] || await browser.newPage();
    page.setDefaultTimeout(10000);
});

after(async () => {
    if (browser) await browser.close();
    if (consoleProc) consoleProc.kill('SIGTERM');
    if (attacker) attacker.close();
    if (admin) await admin.end();
    if (userData) rmSync(userData, { recursive: true, force: true });
});

test('the login page, and a wrong login is refused without saying why', async () => {
    await page.goto(`${base}/`);
    assert.match(page.url(), /\/login$/);
    await shot('login');
    await page.fill('input[name=user]', 'nobody_at_all');
    await page.fill('input[name=password]', 'x');
    await page.click('button[type=submit]');
    assert.match(await page.textContent('#flash'), /Login failed/);
    const cookies = await page.context().cookies(`${base}/login`);
    const login = cookies.find((c) => c.name === 'opledger_console_login');
    assert.ok(login && login.httpOnly && login.sameSite === 'Strict');
});

test('a login without any operator role is refused', async () => {
    await page.goto(`${base}/login`);
    await page.fill('input[name=user]', role('agent'));
    await page.fill('input[name=password]', pw('agent'));
    await page.click('button[type=submit]');
    assert.match(await page.textContent('#flash'), /none of the operator roles/);
    assert.match(page.url(), /\/login$/);
});

test('the queue shows every argument, redacted values as redacted, and the fingerprint', async () => {
    await login('approver_a');
    const cookies = await page.context().cookies(base);
    const session = cookies.find((c) => c.name === 'opledger_console_session');
    assert.ok(session && session.httpOnly && session.sameSite === 'Strict', 'session cookie HttpOnly, SameSite=Strict');
    for (const id of ['wire-approve', 'wire-reject', 'wire-dash', 'wire-self']) assert.equal(await card(id).count(), 1, id);
    const c = card('wire-approve');
    const text = await c.textContent();
    assert.match(text, /\/amount_cents\s*120000/);
    assert.match(text, /\/currency\s*"EUR"/);
    // Markup in an argument is shown as text, never interpreted.
    assert.match(text, /"ACME <b>GmbH<\/b>"/);
    assert.equal(await c.locator('b').count(), 0);
    assert.match(text, /\/account\/number\s*redacted/);
    assert.ok(!text.includes(SECRET_ARG));
    const { rows } = await admin.query(
        `SELECT fingerprint_alg || ':' || encode(args_hash, 'hex') AS fp FROM opledger.operations WHERE operation_id = 'wire-approve'`);
    assert.equal((await c.locator('code.fp').textContent()).trim(), rows[0].fp);
    assert.match(rows[0].fp, /^jcs-hmac-sha256\/1:[0-9a-f]{64}$/);
    await shot('approvals');
});

test('separation of duties: the approver who began an operation cannot approve it', async () => {
    const c = card('wire-self');
    await c.locator('input[name=note]').fill('my own');
    await Promise.all([page.waitForURL(/\/approvals$/), c.locator('button.approve').click()]);
    assert.match(await page.textContent('#flash'), /approve failed \(42501\)/);
    const row = await opRow('wire-self');
    assert.equal(row.status, 'awaiting_approval');
    assert.equal(row.approved_by, null);
});

test('CSRF: a POST without the token, from another origin, or from another site is refused', async () => {
    const csrf = await page.locator('section.card[data-operation="wire-approve"] input[name=_csrf]').getAttribute('value');
    assert.ok(csrf && csrf.length >= 40);
    const req = page.context().request;
    const noToken = await req.post(`${base}/approvals/wire-approve/approve`, { form: { note: 'x' }, headers: { Origin: base } });
    assert.equal(noToken.status(), 403);
    assert.match(await noToken.text(), /CSRF token/);
    const otherOrigin = await req.post(`${base}/approvals/wire-approve/approve`,
        { form: { _csrf: csrf, note: 'x' }, headers: { Origin: 'http://evil.example' } });
    assert.equal(otherOrigin.status(), 403);
    assert.match(await otherOrigin.text(), /Cross-origin/);

    // A real cross-site page in the same browser, posting a form to the console.
    const port = await freePort();
    attacker = http.createServer((q, r) => {
        r.setHeader('Content-Type', 'text/html');
        r.end(`<form id=f method=post action="${base}/approvals/wire-approve/approve">
            <input name=_csrf value="${csrf}"><input name=note value=forged></form>
            <script>document.getElementById('f').submit()</script>`);
    });
    await new Promise((resolve) => attacker.listen(port, '127.0.0.1', resolve));
    const resp = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${base}/approvals/wire-approve/approve`)),
        page.goto(`http://localhost:${port}/`),
    ]).then(([r]) => r);
    assert.equal(resp.status(), 403);
    const row = await opRow('wire-approve');
    assert.equal(row.approved_by, null, 'no forged approval');
    attacker.close();
    attacker = null;
    await page.goto(`${base}/approvals`);
    await logout();
});

test('approve and reject as a second approver', async () => {
    await login('approver_b');
    let c = card('wire-approve');
    await c.locator('input[name=note]').fill('called the customer');
    await Promise.all([page.waitForURL(/\/approvals$/), c.locator('button.approve').click()]);
    assert.match(await page.textContent('#flash'), /Approved wire-approve/);
    let row = await opRow('wire-approve');
    assert.equal(row.approved_by, role('approver_b'));
    assert.equal(row.approved_login, role('approver_b'));
    // The agent's next call now executes.
    const { rows } = await asUser('agent', `SELECT decision FROM opledger.op_begin('wire-approve', 'payments.wire', $1::jsonb)`,
        [JSON.stringify({ amount_cents: 120000, currency: 'EUR', account: { holder: 'ACME <b>GmbH</b>', number: SECRET_ARG } })]);
    assert.equal(rows[0].decision, 'execute');

    c = card('wire-reject');
    await c.locator('input[name=note]').fill('amount too large');
    await Promise.all([page.waitForURL(/\/approvals$/), c.locator('button.reject').click()]);
    assert.match(await page.textContent('#flash'), /Rejected wire-reject: now failed/);
    row = await opRow('wire-reject');
    assert.equal(row.status, 'failed');
    assert.deepEqual(row.error, { reason: 'approval_rejected' });
    assert.equal(await card('wire-reject').count(), 0);
    await logout();
});

test('a dashboard role sees the queue without arguments and cannot approve', async () => {
    await login('dashboard');
    const c = card('wire-dash');
    assert.match(await c.textContent(), /arguments not readable by your role/);
    await Promise.all([page.waitForURL(/\/approvals$/), c.locator('button.approve').click()]);
    assert.match(await page.textContent('#flash'), /approve failed \(42501\): Your role may not do this/);
    const row = await opRow('wire-dash');
    assert.equal(row.approved_by, null);
    assert.equal(row.status, 'awaiting_approval');
});

test('metrics over time as server-rendered SVG charts', async () => {
    await page.goto(`${base}/metrics`);
    const summary = await page.textContent('#summary');
    assert.match(summary, /begin_calls\s*\d+/);
    const { rows } = await admin.query(`SELECT begin_calls FROM opledger.metrics_since('24 hours')`);
    assert.match(summary, new RegExp(`begin_calls\\s*${rows[0].begin_calls}(?!\\d)`));
    assert.equal(await page.locator('figure.chart svg').count(), 4);
    // A bar of op_begin calls for each of the 24 hours (UTC), its count in the tooltip.
    // The set-up's calls may straddle an hour boundary: each hour that counted calls has
    // its bar with metrics_hourly's count, and the bars add up to the summary's total.
    const titles = await page.locator('figure.chart').first().locator('rect title').allTextContents();
    const bars = new Map(titles.map((t) => /^(.*): (\d+) op_begin calls$/.exec(t)).filter(Boolean)
        .map((m) => [m[1], Number(m[2])]));
    assert.equal(bars.size, 24, titles.join('|'));
    const { rows: hourly } = await admin.query(`
        SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:"00Z"') AS label, sum(begin_calls)::bigint AS n
          FROM opledger.metrics_hourly GROUP BY 1 HAVING sum(begin_calls) > 0`);
    assert.ok(hourly.length >= 1);
    for (const h of hourly) assert.equal(bars.get(h.label), Number(h.n), `${h.label}: ${[...bars].join('|')}`);
    assert.equal([...bars.values()].reduce((a, b) => a + b, 0), Number(rows[0].begin_calls), [...bars].join('|'));
    await shot('metrics');
    await logout();
});

test('claim and resolve an unknown operation with a provider reference', async () => {
    await login('reconciler');
    await page.goto(`${base}/unknown`);
    const tr = page.locator('tr[data-operation="refund-1"]');
    assert.match(await tr.locator('td.claim').textContent(), /unclaimed/);
    await page.fill('#claim input[name=max_rows]', '5');
    await Promise.all([page.waitForURL(/\/unknown$/), page.click('#claim button')]);
    assert.match(await page.textContent('#flash'), /Claimed 1 .*refund-1/);
    assert.match(await tr.locator('td.claim').textContent(), new RegExp(role('reconciler')));
    assert.equal((await opRow('refund-1')).claim_owner, role('reconciler'));
    await shot('unknown');
    await tr.locator('select[name=outcome]').selectOption('applied');
    await tr.locator('input[name=provider_ref]').fill('re_0042');
    await tr.locator('input[name=result]').fill('{"refund_id": "re_0042"}');
    await Promise.all([page.waitForURL(/\/unknown$/), tr.locator('button').click()]);
    assert.match(await page.textContent('#flash'), /Resolved refund-1 as applied: now succeeded/);
    const row = await opRow('refund-1');
    assert.equal(row.status, 'succeeded');
    assert.equal(row.provider_ref, 're_0042');
    assert.equal(row.resolved_by, role('reconciler'));
});

test('one operation\'s history: events in seq order, with the receipt and chain check', async () => {
    await page.goto(`${base}/operations`);
    await page.fill('input[name=id]', 'refund-1');
    await Promise.all([page.waitForURL(/\/operations\/refund-1$/), page.click('main button[type=submit]')]);
    assert.equal(await page.textContent('#status'), 'succeeded');
    const seqs = (await page.locator('#events td.seq').allTextContents()).map(Number);
    const kinds = await page.locator('#events td.kind').allTextContents();
    const { rows } = await admin.query(`SELECT seq, kind FROM opledger.events WHERE operation_id = 'refund-1' ORDER BY seq`);
    assert.deepEqual(seqs, rows.map((r) => Number(r.seq)));
    assert.deepEqual(kinds, rows.map((r) => r.kind));
    assert.deepEqual(kinds.slice(0, 2), ['begin', 'mark_unknown']);
    assert.ok(kinds.includes('claim') && kinds.at(-1) === 'resolve', kinds.join(','));
    const { rows: f } = await admin.query(`SELECT to_regprocedure('opledger.verify_chain(text)') IS NOT NULL AS chain,
                                                  to_regclass('opledger.receipts') IS NOT NULL AS receipts`);
    if (f[0].chain && f[0].receipts) {
        await assertReceiptPanel('refund-1');
    } else {
        assert.match(await page.textContent('#receipts-missing'), /not available in this version/);
    }
    await shot('history');
    await logout();
});

// Until the extension ships receipts, the panel is checked against stand-in objects of
// the same shape made in this test database only (never when the real ones exist):
// a broken chain, and a receipt whose text holds markup that must stay text.
test('the receipt panel shows a broken chain and a receipt as text (stand-in objects when the extension has none)', async () => {
    const { rows: f } = await admin.query(`SELECT to_regprocedure('opledger.verify_chain(text)') IS NOT NULL AS chain,
                                                  to_regclass('opledger.receipts') IS NOT NULL AS receipts`);
    if (!f[0].chain && !f[0].receipts) {
        await admin.query(`CREATE FUNCTION opledger.verify_chain(operation_id text)
            RETURNS TABLE (valid boolean, events bigint, head text, first_broken_seq bigint, reason text)
            LANGUAGE sql AS $$ SELECT false, count(*), 'sha256:' || md5(string_agg(kind, ',' ORDER BY seq)), 2::bigint,
                                      'hash mismatch' FROM opledger.events e WHERE e.operation_id = $1 $$`);
        await admin.query(`CREATE TABLE opledger.receipts (operation_id text, kind text, receipt jsonb, issued_at timestamptz DEFAULT now())`);
        await admin.query(`INSERT INTO opledger.receipts (operation_id, kind, receipt) VALUES
            ('refund-1', 'resolved', '{"v": 1, "operation_id": "refund-1", "note": "<script>alert(1)</script>"}')`);
        await admin.query(`GRANT EXECUTE ON FUNCTION opledger.verify_chain(text) TO ${role('reconciler')}`);
        await admin.query(`GRANT SELECT ON opledger.receipts TO ${role('reconciler')}`);
    }
    await login('reconciler');
    await page.goto(`${base}/operations/refund-1`);
    await assertReceiptPanel('refund-1');
    assert.equal(await page.locator('#receipts script').count(), 0);
    if (!f[0].chain && !f[0].receipts) {
        assert.match(await page.textContent('#chain'), /Chain BROKEN over 4 events.*at seq 2: hash mismatch/s);
        assert.match(await page.textContent('pre.receipt'), /"<script>alert\(1\)<\/script>"/);
        await admin.query('DROP TABLE opledger.receipts');
        await admin.query('DROP FUNCTION opledger.verify_chain(text)');
    }
    await logout();
});

test('Host header validation refuses other names (DNS rebinding)', async () => {
    const { port } = new URL(base);
    const status = await new Promise((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path: '/login', headers: { Host: `rebind.example:${port}` } }, (r) => {
            r.resume();
            resolve(r.statusCode);
        }).on('error', reject);
    });
    assert.equal(status, 421);
});

test('a non-loopback listener needs an access token; with one, the login asks for it', async () => {
    const refused = await runConsoleToExit(['--database', `postgres://127.0.0.1:${PGPORT}/${DB}`, '--listen', '0.0.0.0:0']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.out, /without an access token/);

    const token = 'tok-' + 'x'.repeat(40);
    const dir = mkdtempSync(path.join(tmpdir(), 'console-token-'));
    writeFileSync(path.join(dir, 'token'), token + '\n');
    const port = await freePort();
    const c = await startConsole(['--database', `postgres://127.0.0.1:${PGPORT}/${DB}`, '--listen', `127.0.0.1:${port}`,
        '--access-token-file', path.join(dir, 'token')]);
    try {
        await page.context().clearCookies();
        await page.goto(`${c.url}/login`);
        await page.fill('input[name=user]', role('approver_b'));
        await page.fill('input[name=password]', pw('approver_b'));
        await page.fill('input[name=access_token]', 'wrong-token');
        await page.click('button[type=submit]');
        assert.match(await page.textContent('#flash'), /access token is wrong/);
        await page.fill('input[name=user]', role('approver_b'));
        await page.fill('input[name=password]', pw('approver_b'));
        await page.fill('input[name=access_token]', token);
        await Promise.all([page.waitForURL(/\/approvals$/), page.click('button[type=submit]')]);
        assert.equal(await page.textContent('#login'), role('approver_b'));
        // Without a session, the bearer token alone is not a login.
        const r = await fetch(`${c.url}/approvals`, { headers: { Authorization: `Bearer ${token}` }, redirect: 'manual' });
        assert.equal(r.status, 303);
    } finally {
        c.proc.kill('SIGTERM');
        rmSync(dir, { recursive: true, force: true });
    }
});

test('the console logs neither passwords nor argument values', () => {
    for (const r of ['approver_a', 'approver_b', 'reconciler', 'dashboard']) assert.ok(!consoleOutput.includes(pw(r)));
    assert.ok(!consoleOutput.includes(SECRET_ARG));
    assert.ok(!consoleOutput.includes('re_0042'));
});
