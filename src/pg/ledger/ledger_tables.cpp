// The column lists of the ledger's tables and the statement texts built from them.
#include "pg/ledger/ledger_tables.hpp"

#include <array>
#include <string_view>
#include <unordered_map>

extern "C" {
#include "catalog/pg_type_d.h"
}

namespace opledger::pg::ledger {
namespace {

// How an operations column is written.
enum class Written {
    on_insert,  // set when the operation is created, never changed by a transition
    always,     // set on insert and by every transition
    payload,    // set on insert; a transition sets it when its flag parameter says so
};

struct OperationColumnSpec {
    const char* name;
    Oid type;
    Written written;
    const char* cast;  // appended to the parameter ("::opledger.op_status"), or ""
};

// In OperationColumn order, which is also the table's order.
const std::array<OperationColumnSpec, kOperationColumns> kOperations = {{
    {"operation_id", TEXTOID, Written::on_insert, ""},
    {"conversation_id", TEXTOID, Written::on_insert, ""},
    {"tool", TEXTOID, Written::on_insert, ""},
    {"args", JSONBOID, Written::payload, ""},  // a purge clears it
    {"args_hash", BYTEAOID, Written::on_insert, ""},
    {"fingerprint_alg", TEXTOID, Written::on_insert, ""},
    {"status", TEXTOID, Written::always, "::opledger.op_status"},
    {"attempt", INT4OID, Written::always, ""},
    {"lease_owner", TEXTOID, Written::always, ""},
    {"lease_expires_at", TIMESTAMPTZOID, Written::always, ""},
    {"retry_after", TIMESTAMPTZOID, Written::always, ""},
    {"result", JSONBOID, Written::payload, ""},
    {"error", JSONBOID, Written::payload, ""},
    {"provider_ref", TEXTOID, Written::always, ""},
    {"finished_at", TIMESTAMPTZOID, Written::always, ""},
    {"approved_by", TEXTOID, Written::always, ""},
    {"approved_at", TIMESTAMPTZOID, Written::always, ""},
    {"approval_note", TEXTOID, Written::always, ""},
    {"unknown_since", TIMESTAMPTZOID, Written::always, ""},
    {"resolved_at", TIMESTAMPTZOID, Written::always, ""},
    {"resolved_by", TEXTOID, Written::always, ""},
    {"resolution", TEXTOID, Written::always, ""},
    {"claim_owner", TEXTOID, Written::always, ""},
    {"claim_expires_at", TIMESTAMPTZOID, Written::always, ""},
    {"late_successes", INT4OID, Written::always, ""},
    {"duplicate_effects", INT4OID, Written::always, ""},
    {"manual_interventions", INT4OID, Written::always, ""},
    {"purged", BOOLOID, Written::always, ""},  // with purged_at (update_operation)
    {"tenant", TEXTOID, Written::on_insert, ""},
    {"created_role", TEXTOID, Written::on_insert, ""},
    {"approval_attempt", INT4OID, Written::always, ""},
    {"event_seq", INT4OID, Written::always, ""},
    {"approved_role", TEXTOID, Written::always, ""},
    {"resolved_role", TEXTOID, Written::always, ""},
    {"result_fingerprint", BYTEAOID, Written::payload, ""},
    {"created_login", TEXTOID, Written::on_insert, ""},
    {"approved_login", TEXTOID, Written::always, ""},
    {"resolved_login", TEXTOID, Written::always, ""},
    {"chain_head", TEXTOID, Written::always, ""},
    {"chain_seq", INT4OID, Written::always, ""},
    {"receipts", BOOLOID, Written::on_insert, ""},
}};

struct EventColumnSpec {
    const char* name;
    Oid type;
    const char* cast;
};

// In EventColumn order.
const std::array<EventColumnSpec, kEventColumns> kEvents = {{
    {"operation_id", TEXTOID, ""},
    {"at", TIMESTAMPTZOID, ""},
    {"kind", TEXTOID, ""},
    {"decision", TEXTOID, ""},
    {"status_before", TEXTOID, "::opledger.op_status"},
    {"status_after", TEXTOID, "::opledger.op_status"},
    {"attempt", INT4OID, ""},
    {"worker", TEXTOID, ""},
    {"provider_ref", TEXTOID, ""},
    {"detail", JSONBOID, ""},
    {"seq", INT4OID, ""},
    {"role", TEXTOID, ""},
    {"tenant", TEXTOID, ""},
    {"login", TEXTOID, ""},
    {"hash", TEXTOID, ""},
    {"receipt", TEXTOID, ""},
}};

// A count's column (all bigint), by its position in OPLEDGER_METRICS.
std::string counter(int i) { return std::string(core::ledger::kMetricNames[i]); }

std::string param(int position) { return "$" + std::to_string(position + 1); }

// "o.operation_id, o.conversation_id, ..., o.created_at, o.purged_at" (status as the
// enum itself: it is mapped to the state machine's Status by its OID, see
// ledger_store.cpp).
// With `times`, also the columns a report's answer needs that no parameter holds
// (kSelectCreatedAt, kSelectPurgedAt); op_begin's reads go without them.
std::string operation_select_list(bool times) {
    std::string out;
    for (const auto& c : kOperations) {
        if (!out.empty()) out += ", ";
        out += "o.";
        out += c.name;
    }
    return times ? out + ", o.created_at, o.purged_at" : out;
}

std::string operation_select(const char* where_and_after) {
    return "SELECT " + operation_select_list(true) + " FROM opledger.operations AS o " + where_and_after;
}

std::vector<Oid> operation_param_types() {
    std::vector<Oid> types;
    for (const auto& c : kOperations) types.push_back(c.type);
    types.push_back(TIMESTAMPTZOID);  // op_now
    return types;
}

StatementText insert_operation(bool returning) {
    std::string columns, values;
    for (int i = 0; i < kOperationColumns; ++i) {
        columns += kOperations[i].name;
        columns += ", ";
        values += param(i) + kOperations[i].cast + ", ";
    }
    columns += "created_at, updated_at";
    values += param(op_now) + ", " + param(op_now);
    // Without RETURNING the row is what the parameters say (SPI_processed tells whether
    // it was written): a returned row costs a projection of every column per call, and
    // is asked for only when a trigger may change the row (ledger_store.cpp).
    return {"INSERT INTO opledger.operations AS o (" + columns + ") VALUES (" + values +
                ") ON CONFLICT (operation_id) DO NOTHING" + (returning ? " RETURNING " + operation_select_list(false) : ""),
            operation_param_types()};
}

}  // namespace

StatementText update_operation(ColumnSet columns, bool returning) {
    std::string set;
    for (int i = 0; i < kOperationColumns; ++i) {
        const OperationColumnSpec& c = kOperations[i];
        if (c.written == Written::on_insert || !columns.has(i)) continue;
        set += c.name;
        set += " = ";
        set += param(i) + c.cast;
        set += ", ";
        // purged_at is the time of the purge: the call's time when the row becomes a
        // tombstone, kept as it was once it is one (a tombstone is never purged again).
        if (i == oc_purged)
            set += "purged_at = CASE WHEN " + param(i) + " THEN COALESCE(o.purged_at, " + param(op_now) + ") END, ";
    }
    set += "updated_at = " + param(op_now);
    return {"UPDATE opledger.operations AS o SET " + set + " WHERE o.operation_id OPERATOR(pg_catalog.=) " +
                param(oc_operation_id) + (returning ? " RETURNING o.*" : ""),
            operation_param_types()};
}

ColumnSet transition_columns() {
    ColumnSet out;
    for (int i = 0; i < kOperationColumns; ++i)
        if (kOperations[i].written != Written::on_insert) out.add(i);
    return out;
}

ColumnSet payload_columns() {
    ColumnSet out;
    for (int i = 0; i < kOperationColumns; ++i)
        if (kOperations[i].written == Written::payload) out.add(i);
    return out;
}

Oid operation_column_type(int column) { return kOperations[column].type; }

int written_column_index(const char* name) {
    static const std::unordered_map<std::string_view, int> positions = [] {
        std::unordered_map<std::string_view, int> out;
        for (int i = 0; i < kOperationColumns; ++i) out.emplace(kOperations[i].name, i);
        out.emplace("created_at", wc_created_at);
        out.emplace("updated_at", wc_updated_at);
        out.emplace("purged_at", wc_purged_at);
        return out;
    }();
    const auto found = positions.find(name);
    return found == positions.end() ? -1 : found->second;
}

namespace {

// An event's INSERT; the receipt column only in the statement of an event that carries
// one (insert_event_with_receipt), so the others pass no parameter for it. It is the
// last column, so leaving it out keeps every other parameter's number.
static_assert(ec_receipt == kEventColumns - 1, "the receipt is the events' last parameter");
StatementText insert_event(const char* on_conflict = "", bool with_receipt = false) {
    std::string columns, values;
    std::vector<Oid> types;
    for (int i = 0; i < kEventColumns; ++i) {
        if (i == ec_receipt && !with_receipt) continue;
        if (i > 0) {
            columns += ", ";
            values += ", ";
        }
        columns += kEvents[i].name;
        values += param(i) + kEvents[i].cast;
        types.push_back(kEvents[i].type);
    }
    return {"INSERT INTO opledger.events (" + columns + ") VALUES (" + values + ")" + on_conflict, types};
}

std::vector<Oid> counter_param_types() {
    std::vector<Oid> types = {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID};
    for (int i = 0; i < kCounterColumns; ++i) types.push_back(INT8OID);
    return types;
}

// One call's counts, appended as one row ($4, an int8 array in the order of the
// metric list). No unique key, no lock: this never waits on or conflicts with another
// transaction at any isolation level.
StatementText insert_deltas() {
    return {"INSERT INTO opledger.counter_deltas AS d (tool, tenant, hour, counts) VALUES ($1, $2, $3, $4) "
            "RETURNING d.delta_id",
            {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8ARRAYOID}};
}

// Rows of the deltas or of the totals removed and summed per tool, tenant and hour:
// those of `which` this statement can see and no other transaction holds. Rows of
// transactions still running are not visible, and rows another transaction holds (a
// concurrent fold, a maintenance or prepared transaction) are skipped: both wait for
// a later fold, and a fold never waits. hour: the hour the sums are for (m.hour: each
// row's own).
enum class CountsTable { deltas, totals };
StatementText fold(CountsTable from, const std::string& which, const std::string& hour, std::vector<Oid> types) {
    const bool deltas = from == CountsTable::deltas;
    const char* remove = deltas ? "WITH m AS (DELETE FROM opledger.counter_deltas AS d "
                                : "WITH m AS (DELETE FROM opledger.counters AS d ";
    const char* pick = deltas ? "SELECT l.ctid FROM opledger.counter_deltas AS l "
                              : "SELECT l.ctid FROM opledger.counters AS l ";
    // A delta's counts are the elements of its array (1-based); a totals row's, its columns.
    std::string sums;
    for (int i = 0; i < kCounterColumns; ++i)
        sums += ", pg_catalog.sum(m." + (deltas ? "counts[" + std::to_string(i + 1) + "]" : counter(i)) +
                ")::pg_catalog.int8";
    return {std::string(remove) + "WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(" + pick + which +
                " FOR UPDATE OF l SKIP LOCKED)) RETURNING d.*) "
                "SELECT m.tool, m.tenant, " + hour + sums + " FROM m GROUP BY m.tool, m.tenant, " + hour,
            std::move(types)};
}

// Adds a tool's sums to a totals row of the tool that no other transaction holds:
// the preferred slot when it is free, else any free one. SKIP LOCKED keeps a sweep
// from waiting on another session's transaction on the totals (a maintenance
// transaction, or a prepared one that swept); a row this transaction already holds
// is not skipped.
StatementText count_in_slot() {
    std::string set;
    for (int i = 0; i < kCounterColumns; ++i) {
        if (i > 0) set += ", ";
        set += counter(i) + " = c." + counter(i) + " OPERATOR(pg_catalog.+) " +
               param(kCounterParamsBefore + i);
    }
    return {"UPDATE opledger.counters AS c SET " + set +
                " WHERE c.tool OPERATOR(pg_catalog.=) $1 AND c.tenant OPERATOR(pg_catalog.=) $2 "
                "AND c.hour OPERATOR(pg_catalog.=) $3 AND c.slot OPERATOR(pg_catalog.=) ("
                "SELECT s.slot FROM opledger.counters AS s WHERE s.tool OPERATOR(pg_catalog.=) $1 "
                "AND s.tenant OPERATOR(pg_catalog.=) $2 AND s.hour OPERATOR(pg_catalog.=) $3 "
                "ORDER BY s.slot OPERATOR(pg_catalog.=) $4 DESC, s.slot LIMIT 1 FOR UPDATE OF s SKIP LOCKED) "
                "RETURNING c.slot",
            counter_param_types()};
}

// No free totals row: a new one, in a slot nobody else can be writing (a fresh
// sequence value), so the insert can never conflict or wait either. ($4 is unused
// here; the statements share their parameters.)
StatementText count_new_slot() {
    std::string columns = "tool, tenant, hour, slot",
                values = "$1, $2, $3, pg_catalog.nextval('opledger.counters_slot_seq'::pg_catalog.regclass)";
    for (int i = 0; i < kCounterColumns; ++i) {
        columns += ", " + counter(i);
        values += ", " + param(kCounterParamsBefore + i);
    }
    return {"INSERT INTO opledger.counters AS c (" + columns + ") VALUES (" + values + ") RETURNING c.slot",
            counter_param_types()};
}

}  // namespace

StatementText statement_text(PlanId id) {
    switch (id) {
        case PlanId::policy:
            return {"SELECT t.effect::pg_catalog.text, t.max_attempts, t.lease, t.backoff_base, t.backoff_max, "
                    "t.hash_exclude, t.redact, t.receipts FROM opledger.tools AS t WHERE t.tool OPERATOR(pg_catalog.=) $1",
                    {TEXTOID}};
        case PlanId::hmac_key:
            return {"SELECT k.secret FROM opledger.hmac_key AS k WHERE k.key_id OPERATOR(pg_catalog.=) 1", {}};
        case PlanId::read_operation:
            return {operation_select("WHERE o.operation_id OPERATOR(pg_catalog.=) $1"), {TEXTOID}};
        case PlanId::lock_operation:
            return {operation_select("WHERE o.operation_id OPERATOR(pg_catalog.=) $1 FOR UPDATE"), {TEXTOID}};
        case PlanId::insert_operation:
            return insert_operation(false);
        case PlanId::insert_operation_returning:
            return insert_operation(true);
        case PlanId::insert_event:
            return insert_event();
        case PlanId::insert_first_event:
            return insert_event(" ON CONFLICT (operation_id, seq) DO NOTHING");
        case PlanId::insert_event_with_receipt:
            return insert_event("", true);
        case PlanId::insert_deltas:
            return insert_deltas();
        case PlanId::fold_deltas:
            return fold(CountsTable::deltas, "LIMIT $1", "m.hour", {INT4OID});
        case PlanId::fold_window:
            // The deltas with ids in ($1, $2]: a range scan of the primary key.
            return fold(CountsTable::deltas,
                        "WHERE l.delta_id OPERATOR(pg_catalog.>) $1 AND l.delta_id OPERATOR(pg_catalog.<=) $2", "m.hour",
                        {INT8OID, INT8OID});
        case PlanId::retire_hours:
            // The totals of hours before $1 (a range scan of counters_hour_idx), summed
            // into hour -infinity, where the all-time sums stay exact.
            return fold(CountsTable::totals,
                        "WHERE l.hour OPERATOR(pg_catalog.>) '-infinity'::pg_catalog.timestamptz "
                        "AND l.hour OPERATOR(pg_catalog.<) $1 AND ($3 OR l.tenant OPERATOR(pg_catalog.=) $4) LIMIT $2",
                        "'-infinity'::pg_catalog.timestamptz", {TIMESTAMPTZOID, INT4OID, BOOLOID, TEXTOID});
        case PlanId::compact_hours:
            // The totals rows of finished hours (before $1) whose tool, tenant and hour
            // have another row: a finished hour's slots, summed into one row of it.
            return fold(CountsTable::totals,
                        "WHERE l.hour OPERATOR(pg_catalog.<) $1 AND ($3 OR l.tenant OPERATOR(pg_catalog.=) $4) "
                        "AND EXISTS (SELECT FROM opledger.counters AS s WHERE s.tool OPERATOR(pg_catalog.=) l.tool "
                        "AND s.tenant OPERATOR(pg_catalog.=) l.tenant AND s.hour OPERATOR(pg_catalog.=) l.hour "
                        "AND s.slot OPERATOR(pg_catalog.<>) l.slot) LIMIT $2",
                        "m.hour", {TIMESTAMPTZOID, INT4OID, BOOLOID, TEXTOID});
        case PlanId::count_in_slot:
            return count_in_slot();
        case PlanId::count_new_slot:
            return count_new_slot();
        // Housekeeping reads its candidates without locks (an index scan that runs
        // shard by shard when the ledger is distributed, so planned with its
        // parameters' values: Planning::custom_multi_shard), then locks each alone by
        // its ID with lock_operation_skip_locked and checks it again under the lock.
        // Pages in key order: each page starts after the last key of the one before
        // ($3, $4 for the sweep; $5, $6 for claims), so candidates another session
        // holds are passed over instead of read again.
        case PlanId::sweep_candidates:
            // $3: the caller sees every tenant; else only tenant $4.
            return {"SELECT o.operation_id, o.lease_expires_at FROM opledger.operations AS o "
                    "WHERE o.status OPERATOR(pg_catalog.=) 'pending'::opledger.op_status "
                    "AND o.lease_expires_at OPERATOR(pg_catalog.<=) $1 "
                    "AND ($3 OR o.tenant OPERATOR(pg_catalog.=) $4) "
                    "AND (o.lease_expires_at OPERATOR(pg_catalog.>) $5 OR (o.lease_expires_at OPERATOR(pg_catalog.=) $5 "
                    "AND o.operation_id OPERATOR(pg_catalog.>) $6)) "
                    "ORDER BY o.lease_expires_at, o.operation_id LIMIT $2",
                    {TIMESTAMPTZOID, INT4OID, BOOLOID, TEXTOID, TIMESTAMPTZOID, TEXTOID},
                    Planning::custom_multi_shard};
        case PlanId::claim_candidates:
            // $3: the caller sees every tenant; else only tenant $4.
            return {"SELECT o.operation_id, o.unknown_since FROM opledger.operations AS o "
                    "WHERE o.status OPERATOR(pg_catalog.=) 'unknown'::opledger.op_status "
                    "AND (o.claim_expires_at IS NULL OR o.claim_expires_at OPERATOR(pg_catalog.<=) $1) "
                    "AND ($3 OR o.tenant OPERATOR(pg_catalog.=) $4) "
                    "AND (o.unknown_since OPERATOR(pg_catalog.>) $5 OR (o.unknown_since OPERATOR(pg_catalog.=) $5 "
                    "AND o.operation_id OPERATOR(pg_catalog.>) $6)) "
                    "ORDER BY o.unknown_since, o.operation_id LIMIT $2",
                    {TIMESTAMPTZOID, INT4OID, BOOLOID, TEXTOID, TIMESTAMPTZOID, TEXTOID},
                    Planning::custom_multi_shard};
        case PlanId::last_event_seq:
            return {"SELECT e.seq, e.hash FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) $1 "
                    "ORDER BY e.seq DESC LIMIT 1",
                    {TEXTOID}};
        case PlanId::lock_operation_reserving_seq:
            // The row lock and the seq of the call's (first) event in one statement:
            // an op_begin that changes nothing else (a replay, an answer to wait)
            // writes the row once. RETURNING shows the row after, event_seq included.
            return {"UPDATE opledger.operations AS o SET event_seq = o.event_seq OPERATOR(pg_catalog.+) 1 "
                    "WHERE o.operation_id OPERATOR(pg_catalog.=) $1 RETURNING " + operation_select_list(false),
                    {TEXTOID}};
        // A housekeeping candidate, locked only if it still qualifies (see
        // ledger_housekeeping.cpp, Candidates): the candidates' conditions again.
        case PlanId::lock_sweep_candidate:
            return {operation_select("WHERE o.operation_id OPERATOR(pg_catalog.=) $1 "
                                     "AND o.status OPERATOR(pg_catalog.=) 'pending'::opledger.op_status "
                                     "AND o.lease_expires_at OPERATOR(pg_catalog.<=) $2 "
                                     "AND ($3 OR o.tenant OPERATOR(pg_catalog.=) $4) FOR UPDATE SKIP LOCKED"),
                    {TEXTOID, TIMESTAMPTZOID, BOOLOID, TEXTOID}};
        case PlanId::lock_claim_candidate:
            return {operation_select("WHERE o.operation_id OPERATOR(pg_catalog.=) $1 "
                                     "AND o.status OPERATOR(pg_catalog.=) 'unknown'::opledger.op_status "
                                     "AND (o.claim_expires_at IS NULL OR o.claim_expires_at OPERATOR(pg_catalog.<=) $2) "
                                     "AND ($3 OR o.tenant OPERATOR(pg_catalog.=) $4) FOR UPDATE SKIP LOCKED"),
                    {TEXTOID, TIMESTAMPTZOID, BOOLOID, TEXTOID}};
        case PlanId::purge_candidates:
            // Final operations not purged yet, finished before $1 (the partial index
            // operations_finished_idx's predicate, the operators qualified), of a tenant.
            return {"SELECT o.operation_id, o.finished_at FROM opledger.operations AS o "
                    "WHERE o.status OPERATOR(pg_catalog.=) ANY (ARRAY['succeeded', 'failed']::opledger.op_status[]) AND NOT o.purged "
                    "AND o.finished_at OPERATOR(pg_catalog.<) $1 "
                    "AND ($3 OR o.tenant OPERATOR(pg_catalog.=) $4) "
                    "AND (o.finished_at OPERATOR(pg_catalog.>) $5 OR (o.finished_at OPERATOR(pg_catalog.=) $5 "
                    "AND o.operation_id OPERATOR(pg_catalog.>) $6)) "
                    "ORDER BY o.finished_at, o.operation_id LIMIT $2",
                    {TIMESTAMPTZOID, INT4OID, BOOLOID, TEXTOID, TIMESTAMPTZOID, TEXTOID},
                    Planning::custom_multi_shard};
        case PlanId::lock_purge_candidate:
            return {operation_select("WHERE o.operation_id OPERATOR(pg_catalog.=) $1 "
                                     "AND o.status OPERATOR(pg_catalog.=) ANY (ARRAY['succeeded', 'failed']::opledger.op_status[]) AND NOT o.purged "
                                     "AND o.finished_at OPERATOR(pg_catalog.<) $2 "
                                     "AND ($3 OR o.tenant OPERATOR(pg_catalog.=) $4) FOR UPDATE SKIP LOCKED"),
                    {TEXTOID, TIMESTAMPTZOID, BOOLOID, TEXTOID}};
        case PlanId::delete_events:
            // A tombstone's audit trail: every event of the operation (its key's prefix).
            return {"DELETE FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) $1", {TEXTOID}};
        case PlanId::bump_event_seq:
            return {"UPDATE opledger.operations AS o SET event_seq = $2, chain_head = $3, chain_seq = $2 "
                    "WHERE o.operation_id OPERATOR(pg_catalog.=) $1",
                    {TEXTOID, INT4OID, TEXTOID}};
        case PlanId::receipt_key:
            // Both are reference tables under Citus: read on the node that runs the call.
            return {"SELECT s.key_id, s.private_key FROM opledger.receipt_keys AS k "
                    "JOIN opledger.receipt_signing_keys AS s ON s.key_id OPERATOR(pg_catalog.=) k.key_id "
                    "WHERE k.retired_at IS NULL ORDER BY k.created_at DESC LIMIT 1",
                    {}};
        case PlanId::receipt_key_in_use:
            // A statement of its own: Citus refuses, in a delegated call, a write of the
            // operations that also reads a reference table.
            return {"SELECT FROM opledger.receipt_keys AS k WHERE k.key_id OPERATOR(pg_catalog.=) $1 "
                    "AND k.retired_at IS NULL",
                    {TEXTOID}};
        case PlanId::keep_purged_receipts:
            // The same distribution key on both sides: under Citus, one shard's statement.
            return {"INSERT INTO opledger.purged_receipts (operation_id, seq, kind, receipt, issued_at, tenant) "
                    "SELECT e.operation_id, e.seq, (e.receipt::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) 'kind', "
                    "e.receipt, e.at, e.tenant FROM opledger.events AS e "
                    "WHERE e.operation_id OPERATOR(pg_catalog.=) $1 AND e.receipt IS NOT NULL",
                    {TEXTOID},
                    // Citus plans an INSERT ... SELECT only with its parameter's value.
                    Planning::custom_multi_shard};
        case PlanId::chain_row:
            return {"SELECT o.tenant, o.chain_head, o.purged, o.chain_seq, o.event_seq FROM opledger.operations AS o "
                    "WHERE o.operation_id OPERATOR(pg_catalog.=) $1",
                    {TEXTOID}};
        case PlanId::chain_events:
            // The columns in EventColumn order (chain_event reads them by position).
            return {"SELECT e.operation_id, e.at, e.kind, e.decision, e.status_before::pg_catalog.text, "
                    "e.status_after::pg_catalog.text, e.attempt, e.worker, e.provider_ref, e.detail, e.seq, e.role, "
                    "e.tenant, e.login, e.hash, e.receipt FROM opledger.events AS e "
                    "WHERE e.operation_id OPERATOR(pg_catalog.=) $1 ORDER BY e.seq",
                    {TEXTOID}};
        case PlanId::events_tenant:
            return {"SELECT e.tenant FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) $1 LIMIT 1",
                    {TEXTOID}};
        case PlanId::role_tenants:
            return {"SELECT r.member::pg_catalog.oid, r.tenant FROM opledger.role_tenants AS r", {}};
        case PlanId::count_:
            break;
    }
    return {};
}

}  // namespace opledger::pg::ledger
