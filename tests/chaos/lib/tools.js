'use strict';
// The four tools of the chaos world and how a worker / reconciler talks to
// their providers.  Shared by worker.js, reconciler.js and chaos.js.

const { httpJson } = require('./common');

const TOOLS = {
  'payments.charge': { provider: 'payments', effect: 'idempotent_write', guarantee: 'provider_key' },
  'payouts.send': { provider: 'payments', effect: 'irreversible', guarantee: 'provider_key' },
  'crm.create_ticket': { provider: 'tickets', effect: 'non_idempotent_write', guarantee: 'read_before_write' },
  'accounts.balance': { provider: 'readonly', effect: 'read_only', guarantee: 'none' },
};

// The body the provider sees: the ledger args minus per-delivery noise
// (trace_id is hash_excluded in the ledger) - stable per logical operation.
function providerBody(tool, args) {
  const b = Object.assign({}, args); delete b.trace_id; return b;
}

// Perform the real call.  Returns {status, body} or throws (err.kind).
async function callTool(ports, tool, opId, args, { fault, deadline, timeoutMs }) {
  const headers = { 'x-chaos-fault': fault || 'none', 'x-deadline': String(deadline) };
  switch (tool) {
    case 'payments.charge':
      return httpJson(ports.payments, 'POST', '/charges', { body: providerBody(tool, args), headers: Object.assign({ 'idempotency-key': opId }, headers), timeoutMs });
    case 'payouts.send':
      return httpJson(ports.payments, 'POST', '/payouts', { body: providerBody(tool, args), headers: Object.assign({ 'idempotency-key': opId }, headers), timeoutMs });
    case 'crm.create_ticket':
      // this provider has no idempotency keys; we still send ours (it is ignored)
      return httpJson(ports.tickets, 'POST', '/tickets', { body: providerBody(tool, args), headers: Object.assign({ 'idempotency-key': opId }, headers), timeoutMs });
    case 'accounts.balance':
      return httpJson(ports.readonly, 'GET', `/accounts/${encodeURIComponent(args.account)}/balance`, { headers, timeoutMs });
    default: throw new Error('unknown tool ' + tool);
  }
}

// Ask the provider whether the effect of opId happened.  Returns
// {found: bool, result, providerRef, count} or throws.
async function lookup(ports, tool, opId, args, timeoutMs = 2000) {
  if (tool === 'payments.charge' || tool === 'payouts.send') {
    const path = (tool === 'payments.charge' ? '/charges/' : '/payouts/') + encodeURIComponent(opId);
    const r = await httpJson(ports.payments, 'GET', path, { timeoutMs });
    if (r.status === 404) return { found: false, count: 0 };
    if (r.status === 200) return { found: true, count: 1, result: r.body, providerRef: r.body.id };
    const e = new Error('lookup http ' + r.status); e.kind = 'http'; throw e;
  }
  if (tool === 'crm.create_ticket') {
    const r = await httpJson(ports.tickets, 'GET', '/tickets?reference=' + encodeURIComponent(args.reference), { timeoutMs });
    if (r.status !== 200) { const e = new Error('lookup http ' + r.status); e.kind = 'http'; throw e; }
    const list = r.body.data || [];
    if (!list.length) return { found: false, count: 0 };
    return { found: true, count: list.length, result: list[0], providerRef: list[0].ticket_id };
  }
  // a read has no effect to look up
  return { found: false, count: 0 };
}

function refOf(tool, body) {
  if (!body) return null;
  return body.id || body.ticket_id || null;
}

module.exports = { TOOLS, callTool, lookup, refOf, providerBody };
