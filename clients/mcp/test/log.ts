// The test cluster's server log: where to find it, and what was written to it during a
// test. scripts/cluster.sh starts the server with its log in $PGHOST/server.log (the
// cluster's directory); with logging_collector on, pg_current_logfile() names it instead.

import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function logFile(db: pg.Pool): Promise<string> {
  const r = await db.query(`SELECT pg_catalog.pg_current_logfile() AS f,
                                   pg_catalog.current_setting('data_directory') AS d`);
  const { f, d } = r.rows[0] as { f: string | null; d: string };
  const candidates = [f ? path.resolve(d, f) : '', path.join(process.env.PGHOST ?? '', 'server.log'), path.join(path.dirname(d), 'server.log')];
  const found = candidates.find((c) => c && fs.existsSync(c));
  if (!found) throw new Error(`the server log is not where the test cluster writes it (${candidates.filter((c) => c).join(', ')})`);
  return found;
}

/**
 * Starts watching the server log (as a superuser pool: it reads data_directory and
 * writes a marker). `text()` writes a WARNING marker, waits until the marker is in the
 * log (so every line logged before it is there too) and returns what was logged since.
 */
export async function watchServerLog(db: pg.Pool): Promise<{ text(): Promise<string> }> {
  const file = await logFile(db);
  const start = fs.statSync(file).size;
  return {
    async text() {
      const marker = `opledger-test-log-marker ${randomUUID()}`;
      await db.query(`DO $$ BEGIN RAISE WARNING '%', '${marker}'; END $$`);
      for (let i = 0; i < 100; i++) {
        const fd = fs.openSync(file, 'r');
        try {
          const size = fs.fstatSync(fd).size;
          const buf = Buffer.alloc(Math.max(0, size - start));
          fs.readSync(fd, buf, 0, buf.length, start);
          const text = buf.toString('utf8');
          if (text.includes(marker)) return text;
        } finally {
          fs.closeSync(fd);
        }
        await sleep(50);
      }
      throw new Error(`the marker never reached ${file}: not the server's log?`);
    },
  };
}
