// Saved SPI plans of the ledger and small Datum helpers.
#include "pg/ledger/ledger_spi.hpp"

#include <array>

extern "C" {
#include "catalog/pg_type_d.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
}

namespace opledger::pg::ledger {
namespace {

// The columns every state-machine step reads; column_index_0 positions are fixed
// (see ledger_row.hpp).
#define OPLEDGER_ROW_COLUMNS                                                                         \
    "operation_id, tool, args, args_hash, fingerprint_alg, status::pg_catalog.text, attempt, "      \
    "lease_owner, lease_expires_at, retry_after, result, error, provider_ref, finished_at, "         \
    "approved_by, approved_at, approval_note, unknown_since, resolved_at, resolved_by, resolution, " \
    "claim_owner, claim_expires_at, purged, conversation_id"

// The same, qualified for a join with alias o.
#define OPLEDGER_ROW_COLUMNS_O                                                                           \
    "o.operation_id, o.tool, o.args, o.args_hash, o.fingerprint_alg, o.status::pg_catalog.text, o.attempt, " \
    "o.lease_owner, o.lease_expires_at, o.retry_after, o.result, o.error, o.provider_ref, o.finished_at, "   \
    "o.approved_by, o.approved_at, o.approval_note, o.unknown_since, o.resolved_at, o.resolved_by, "         \
    "o.resolution, o.claim_owner, o.claim_expires_at, o.purged, o.conversation_id"

constexpr int kMaxArgs = 64;

struct PlanSpec {
    const char* sql;
    int nargs;
    std::array<Oid, kMaxArgs> types;
};

const PlanSpec kPlans[static_cast<int>(PlanId::count_)] = {
    // policy
    {"SELECT effect::pg_catalog.text, max_attempts, lease, backoff_base, backoff_max, hash_exclude, redact "
     "FROM opledger.tools WHERE tool = $1",
     1, {TEXTOID}},
    // hmac_key
    {"SELECT secret FROM opledger.hmac_key WHERE key_id = 1", 0, {}},
    // hmac_key_create
    {"INSERT INTO opledger.hmac_key (key_id, secret) VALUES (1, $1) ON CONFLICT (key_id) DO NOTHING", 1,
     {BYTEAOID}},
    // lock_row
    {"SELECT " OPLEDGER_ROW_COLUMNS " FROM opledger.operations WHERE operation_id = $1 FOR UPDATE", 1,
     {TEXTOID}},
    // begin_row: op_begin in one statement for the two common cases. A new ID is
    // inserted ("inserted"); an existing ID in a final state whose tool and
    // fingerprint match is answered from an unlocked read ("answered": final states
    // never change, so replays of hot IDs do not queue on the row lock). Any other
    // existing row is returned as "existing" for the locked path; no row at all means
    // the ID was created concurrently after this statement's snapshot (the locked
    // path then finds it). The caller writes the event (event_log.hpp).
    {"WITH i AS ("
     "  INSERT INTO opledger.operations AS o (operation_id, conversation_id, tool, args, args_hash, "
     "      fingerprint_alg, status, attempt, lease_owner, lease_expires_at, created_at, updated_at) "
     "  VALUES ($1, $2, $3, $4, $5, $6, $7::opledger.op_status, $8, $9, $10, $11, $11) "
     "  ON CONFLICT (operation_id) DO NOTHING "
     "  RETURNING " OPLEDGER_ROW_COLUMNS_O
     ") SELECT " OPLEDGER_ROW_COLUMNS ", 'inserted'::pg_catalog.text FROM i "
     "UNION ALL "
     "SELECT " OPLEDGER_ROW_COLUMNS_O ", "
     "    CASE WHEN o.status IN ('succeeded'::opledger.op_status, 'failed'::opledger.op_status) "
     "          AND o.tool = $3 AND o.args_hash = $5 AND o.fingerprint_alg = $6 "
     "         THEN 'answered' ELSE 'existing' END "
     "FROM opledger.operations AS o "
     "WHERE o.operation_id = $1 AND NOT EXISTS (SELECT 1 FROM i)",
     11,
     {TEXTOID, TEXTOID, TEXTOID, JSONBOID, BYTEAOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TIMESTAMPTZOID,
      TIMESTAMPTZOID}},
    // insert_new: begin_row's insert alone, nothing returned (SPI_processed says
    // whether the row was new); the caller answers from the values it gave.
    {"INSERT INTO opledger.operations (operation_id, conversation_id, tool, args, args_hash, "
     "    fingerprint_alg, status, attempt, lease_owner, lease_expires_at, created_at, updated_at) "
     "VALUES ($1, $2, $3, $4, $5, $6, $7::opledger.op_status, $8, $9, $10, $11, $11) "
     "ON CONFLICT (operation_id) DO NOTHING",
     11,
     {TEXTOID, TEXTOID, TEXTOID, JSONBOID, BYTEAOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TIMESTAMPTZOID,
      TIMESTAMPTZOID}},
    // write_row: any transition of a locked operation (the caller writes its event)
    {"UPDATE opledger.operations AS o SET "
     "    status = $2::opledger.op_status, attempt = $3, lease_owner = $4, lease_expires_at = $5, "
     "    retry_after = $6, "
     "    result = CASE WHEN $7 THEN $8 ELSE o.result END, "
     "    error = CASE WHEN $9 THEN $10 ELSE o.error END, "
     "    provider_ref = $11, updated_at = $12, finished_at = $13, "
     "    approved_by = $14, approved_at = $15, approval_note = $16, "
     "    unknown_since = $17, resolved_at = $18, resolved_by = $19, resolution = $20, "
     "    claim_owner = $21, claim_expires_at = $22, "
     "    late_successes = o.late_successes + $23, duplicate_effects = o.duplicate_effects + $24, "
     "    manual_interventions = o.manual_interventions + $25 "
     "WHERE o.operation_id = $1 "
     "RETURNING o.*",
     25,
     {TEXTOID,        TEXTOID,        INT4OID,        TEXTOID,        TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID,
      JSONBOID,       BOOLOID,        JSONBOID,       TEXTOID,        TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID,
      TIMESTAMPTZOID, TEXTOID,        TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID,        TEXTOID,        TEXTOID,
      TIMESTAMPTZOID, INT4OID,        INT4OID,        INT4OID}},
    // succeed_pending: op_succeed's common case in one statement, the transition
    // pending -> succeeded of the current attempt (exactly what op_succeed's locked
    // path writes for it; the caller writes the event). No row: the locked path decides.
    // The status comes as a parameter ($6 = 'pending'): written as a constant, the
    // generic plan may choose the partial index on pending operations (its predicate
    // is implied) and scan every pending entry, dead ones included, for one ID.
    {"UPDATE opledger.operations AS o SET "
     "    status = 'succeeded'::opledger.op_status, result = $2, error = NULL, "
     "    provider_ref = COALESCE($3, o.provider_ref), finished_at = $4, updated_at = $4, "
     "    lease_expires_at = NULL, retry_after = NULL, claim_owner = NULL, claim_expires_at = NULL "
     "WHERE o.operation_id = $1 AND o.status = $6::opledger.op_status "
     "  AND ($5 IS NULL OR o.attempt = $5) "
     "RETURNING o.*",
     6, {TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID}},
    // insert_event: an event written through SQL (event_log.cpp says when)
    {"INSERT INTO opledger.events (operation_id, at, kind, decision, status_before, status_after, attempt, worker, "
     "    provider_ref, detail) "
     "VALUES ($1, $2, $3, $4, $5::opledger.op_status, $6::opledger.op_status, $7, $8, $9, $10)",
     10, {TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, JSONBOID}},
    // sweep_candidates
    {"SELECT " OPLEDGER_ROW_COLUMNS " FROM opledger.operations "
     "WHERE status = 'pending'::opledger.op_status AND lease_expires_at <= $1 "
     "ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED",
     2, {TIMESTAMPTZOID, INT4OID}},
    // claim_candidates
    {"SELECT " OPLEDGER_ROW_COLUMNS " FROM opledger.operations "
     "WHERE status = 'unknown'::opledger.op_status AND (claim_expires_at IS NULL OR claim_expires_at <= $1) "
     "ORDER BY unknown_since LIMIT $2 FOR UPDATE SKIP LOCKED",
     2, {TIMESTAMPTZOID, INT4OID}},
};

// Saved plans live in CacheMemoryContext (SPI_keepplan) for the backend's lifetime.
SPIPlanPtr saved_plans[static_cast<int>(PlanId::count_)] = {};

SPIPlanPtr plan_for(PlanId id) {
    const int index = static_cast<int>(id);
    if (saved_plans[index] != nullptr) return saved_plans[index];
    const PlanSpec& spec = kPlans[index];
    SPIPlanPtr plan = pg_call([&] {
        SPIPlanPtr prepared = SPI_prepare_cursor(spec.sql, spec.nargs, const_cast<Oid*>(spec.types.data()),
                                                 CURSOR_OPT_GENERIC_PLAN);
        if (prepared == nullptr)
            elog(ERROR, "opledger: could not prepare a ledger statement: %s", SPI_result_code_string(SPI_result));
        if (SPI_keepplan(prepared) != 0) elog(ERROR, "opledger: SPI_keepplan failed");
        return prepared;
    });
    saved_plans[index] = plan;
    return plan;
}

}  // namespace

int execute(PlanId id, const Datum* values, const char* nulls, long count) {
    SPIPlanPtr plan = plan_for(id);
    Datum* mutable_values = const_cast<Datum*>(values);
    const int rc = pg_call([&] { return SPI_execute_plan(plan, mutable_values, nulls, false, count); });
    if (rc < 0) {
        throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: a ledger statement failed",
                       std::string("SPI returned ") + SPI_result_code_string(rc) + ".");
    }
    return rc;
}

Datum column(SPITupleTable* table, uint64 row, int column_index_0, bool* is_null) {
    // heap_getattr on a materialized tuple: no catalog access, cannot ereport.
    return SPI_getbinval(table->vals[row], table->tupdesc, column_index_0 + 1, is_null);
}

std::string text_to_string(Datum text_datum) {
    text* value = pg_call([&] { return pg_detoast_datum_packed(reinterpret_cast<struct varlena*>(DatumGetPointer(text_datum))); });
    return std::string(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

Datum string_to_text(std::string_view value) {
    const char* data = value.data();
    const int length = static_cast<int>(value.size());
    return pg_call([&] { return PointerGetDatum(cstring_to_text_with_len(data, length)); });
}

Datum json_text_to_jsonb(const std::string& json) {
    const char* text = json.c_str();
    return pg_call([&] { return DirectFunctionCall1(jsonb_in, CStringGetDatum(text)); });
}

std::string bytea_to_string(Datum bytea_datum) {
    bytea* value = pg_call([&] { return pg_detoast_datum_packed(reinterpret_cast<struct varlena*>(DatumGetPointer(bytea_datum))); });
    return std::string(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

Datum string_to_bytea(std::string_view bytes) {
    const char* data = bytes.data();
    const std::size_t length = bytes.size();
    return pg_call([&] {
        bytea* out = static_cast<bytea*>(palloc(VARHDRSZ + length));
        SET_VARSIZE(out, VARHDRSZ + length);
        memcpy(VARDATA(out), data, length);
        return PointerGetDatum(out);
    });
}

SpiConnection::SpiConnection() {
    const int rc = pg_call([&] { return SPI_connect(); });
    if (rc != SPI_OK_CONNECT) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: SPI_connect failed");
    connected_ = true;
}

void SpiConnection::finish() {
    if (!connected_) return;
    connected_ = false;
    pg_call([&] { SPI_finish(); });
}

}  // namespace opledger::pg::ledger
