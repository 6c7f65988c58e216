// Logged-in people. Each session owns a small pg.Pool that connects as that person's
// own database role (the credentials typed into the login form, kept in this process's
// memory only and never written anywhere), so the ledger's grants, tenant mapping and
// separation of duties decide what the person may see and do, exactly as in psql.
import pg from 'pg';
import { randomToken } from './security.js';

const IDLE_MS = 30 * 60 * 1000;
const MAX_AGE_MS = 12 * 60 * 60 * 1000;

export const COOKIE = 'opledger_console_session';

export class Sessions {
    constructor(baseConfig) {
        this.baseConfig = baseConfig;
        this.byId = new Map();
        this.timer = setInterval(() => this.expire(), 60 * 1000);
        this.timer.unref();
    }

    // Opens a pool as `user` and checks it by asking who the server thinks we are and
    // which operator roles that login holds. Throws the server's error on bad credentials.
    async login(user, password, accessVerified) {
        const pool = new pg.Pool({
            ...this.baseConfig,
            user,
            password,
            max: 2,
            idleTimeoutMillis: 60 * 1000,
            application_name: 'opledger-console',
        });
        // A failed connection of an idle client must not crash the process.
        pool.on('error', () => {});
        let who;
        try {
            const { rows } = await pool.query(`
                SELECT session_user::text AS login,
                       r.rolsuper AS superuser,
                       ARRAY(SELECT g.rolname::text FROM pg_catalog.pg_roles g
                              WHERE g.rolname OPERATOR(pg_catalog.=) ANY (ARRAY['opledger_approver','opledger_reconciler',
                                                                              'opledger_admin','opledger_dashboard'])
                                AND pg_catalog.pg_has_role(session_user, g.oid, 'MEMBER')
                              ORDER BY g.rolname) AS roles
                  FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) session_user`);
            who = rows[0];
        } catch (err) {
            await pool.end().catch(() => {});
            throw err;
        }
        if (!who.superuser && who.roles.length === 0) {
            await pool.end().catch(() => {});
            const err = new Error('This login holds none of the operator roles (opledger_approver, opledger_reconciler, opledger_admin, opledger_dashboard).');
            err.code = 'console_no_role';
            throw err;
        }
        const id = randomToken();
        const now = Date.now();
        const session = {
            id,
            login: who.login,
            roles: who.roles,
            superuser: who.superuser,
            pool,
            csrf: randomToken(),
            accessVerified,
            created: now,
            seen: now,
            flash: null,
        };
        this.byId.set(id, session);
        return session;
    }

    get(id) {
        if (!id) return null;
        const s = this.byId.get(id);
        if (!s) return null;
        const now = Date.now();
        if (now - s.seen > IDLE_MS || now - s.created > MAX_AGE_MS) {
            this.end(id);
            return null;
        }
        s.seen = now;
        return s;
    }

    end(id) {
        const s = this.byId.get(id);
        if (!s) return;
        this.byId.delete(id);
        s.pool.end().catch(() => {});
    }

    expire() {
        const now = Date.now();
        for (const [id, s] of this.byId) {
            if (now - s.seen > IDLE_MS || now - s.created > MAX_AGE_MS) this.end(id);
        }
    }

    async close() {
        clearInterval(this.timer);
        for (const id of [...this.byId.keys()]) this.end(id);
    }
}
