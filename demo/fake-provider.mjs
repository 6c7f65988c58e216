#!/usr/bin/env node
// A fake payment provider for the refund story: a real HTTP server on loopback,
// in memory, no dependencies (Node 20 standard library only).
//
//   node demo/fake-provider.mjs --port-file FILE     listen on 127.0.0.1:<free port>,
//                                                    write the port to FILE
//
// Like many real payment APIs it has NO idempotency key: every POST /v1/refunds
// creates a new refund. It does store the caller's `reference`, and can be searched
// by it, which is what a read-before-write reconciler needs.
//
//   POST /v1/refunds            {"charge", "amount_cents", "currency", "reference"}
//                               -> 201 {"id": "re_0001", ...}
//   GET  /v1/refunds?reference=R   -> {"data": [refunds whose reference is R]}
//   GET  /v1/refunds?charge=C      -> {"data": [refunds of charge C]}
//   POST /_control/drop-next-ack {"delay_ms": 3000}
//                               -> the next refund is committed at once, but its
//                                  response is held back delay_ms (the client times out)
//   GET  /_control/stats        -> {"refunds_total": n, "by_charge": {...}}

import http from 'node:http';
import fs from 'node:fs';

const args = process.argv.slice(2);
const portFile = args[args.indexOf('--port-file') + 1];
if (!args.includes('--port-file') || !portFile) {
  process.stderr.write('usage: fake-provider.mjs --port-file FILE\n');
  process.exit(2);
}

const refunds = [];
let holdNextAckMs = 0;

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { data += c; });
    req.on('end', () => {
      try { resolve(data === '' ? {} : JSON.parse(data)); } catch (e) { reject(e); }
    });
    req.on('error', reject);
  });
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://provider.invalid');
  try {
    if (req.method === 'POST' && url.pathname === '/v1/refunds') {
      const body = await readBody(req);
      if (typeof body.charge !== 'string' || !Number.isInteger(body.amount_cents)) {
        return send(res, 400, { error: 'charge (string) and amount_cents (integer) are required' });
      }
      const refund = {
        id: 're_' + String(refunds.length + 1).padStart(4, '0'),
        charge: body.charge,
        amount_cents: body.amount_cents,
        currency: body.currency ?? 'eur',
        reference: body.reference ?? null,
        status: 'succeeded',
      };
      refunds.push(refund);            // the money has moved: committed before we answer
      const delay = holdNextAckMs;
      holdNextAckMs = 0;
      if (delay > 0) {
        setTimeout(() => { if (!res.destroyed) send(res, 201, refund); }, delay);
        return;
      }
      return send(res, 201, refund);
    }
    if (req.method === 'GET' && url.pathname === '/v1/refunds') {
      const ref = url.searchParams.get('reference');
      const charge = url.searchParams.get('charge');
      const data = refunds.filter((r) => (ref === null || r.reference === ref) &&
                                         (charge === null || r.charge === charge));
      return send(res, 200, { data });
    }
    if (req.method === 'POST' && url.pathname === '/_control/drop-next-ack') {
      const body = await readBody(req);
      holdNextAckMs = Number.isInteger(body.delay_ms) ? body.delay_ms : 3000;
      return send(res, 200, { hold_next_ack_ms: holdNextAckMs });
    }
    if (req.method === 'GET' && url.pathname === '/_control/stats') {
      const byCharge = {};
      for (const r of refunds) byCharge[r.charge] = (byCharge[r.charge] ?? 0) + 1;
      return send(res, 200, { refunds_total: refunds.length, by_charge: byCharge });
    }
    return send(res, 404, { error: 'not found' });
  } catch (e) {
    return send(res, 400, { error: String(e.message ?? e) });
  }
});

server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(portFile, String(server.address().port));
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => { server.close(); process.exit(0); });
}
