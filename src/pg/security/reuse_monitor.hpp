// The rejected-reuse monitor (docs/security.md, "Secrets"): counts every OL001 (an
// operation ID reused with other arguments or another tool) in shared memory, so the
// count survives the caller's rollback. An agent that guesses a redacted secret (a
// CVV, a PIN) by looping op_begin and catching OL001 leaves no event, since the error
// rolls back, but it does leave a row in opledger.rejected_reuses and one LOG line per
// guess. The same for a redacted result (kind result_mismatch): every success report
// whose result differs from the stored one of a tool with redact paths (compared by
// their keyed fingerprints) is counted and logged, so guessing the stored value by
// reporting successes in savepoints that roll back leaves the same trace.
//
// The table exists only when opledger is in shared_preload_libraries; its counts are
// since the server last started (a restart, or the reinitialisation after a crash,
// empties it). The LOG line is written either way and is the lasting history.
//
// Shared state: one fixed-size hash table keyed by exact, zero-padded copies of
// (tenant, tool, operation_id), bounded as the ledger bounds them (256, 256 and 1024
// bytes), under one LWLock of the tranche "opledger_reuse_monitor". Its capacity is
// the setting opledger.reuse_monitor_entries (postmaster, default 4096, about 1.7 kB
// an entry). When it is full, the entry with the fewest rejections (of those, the one
// rejected longest ago) is evicted and its counts are added to its tenant's overflow
// row (tool and operation_id NULL), so a flood of one-off rejections cannot push a
// guessing loop's row out, and no rejection is lost from the totals.
#pragma once

#include "pg/pg_headers.hpp"

namespace opledger::pg {

// From _PG_init. When opledger is being preloaded: defines the setting
// opledger.reuse_monitor_entries and installs the shared-memory request and startup
// hooks. Otherwise does nothing (the monitor then only logs).
void reuse_monitor_init();

// What a monitor entry counts: rejected reuses (OL001), or success reports whose
// result differs from a redacted stored one. One entry per kind and operation.
enum class MonitorKind : char { reuse = 'r', result_mismatch = 'm' };

// Called by the ledger right before it raises OL001 (kind reuse), or when a success
// report's result differs from the redacted stored one (kind result_mismatch), inside
// the caller's transaction. Counts it (when preloaded) and writes one LOG line
// (always) with the tenant and role, never an argument value or a fingerprint.
// role is the calling role (the one outside opledger's SECURITY DEFINER functions).
// tool is best the operation's stored tool, so that one operation has one row
// whichever tool a caller claims. Null pointers count as empty strings; texts longer
// than the bounds are cut at a character boundary of the database encoding.
//
// Never throws, never raises a PostgreSQL error and never fails the caller: nothing
// under the monitor's lock allocates or can ereport; the role name lookup and the
// LOG line run under the boundary's guard, and an error there (out of memory) is
// dropped, since the caller is about to raise OL001, whose abort cleans up after it.
void reuse_monitor_record(MonitorKind kind, const char* tenant, const char* tool, const char* operation_id,
                          Oid role) noexcept;

}  // namespace opledger::pg
