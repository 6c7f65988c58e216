// Housekeeping (SPEC §3-§4): op_sweep, op_claim_reconciliation, and the internal
// helpers of register_tool (_check_pointers, _random_secret).
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/jcs.hpp"
#include "core/ledger/state_machine.hpp"
#include "pg/boundary.hpp"
#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_results.hpp"
#include "pg/ledger/ledger_store.hpp"

extern "C" {
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/tuplestore.h"
}

namespace opledger::pg::ledger {
namespace {

namespace sm = opledger::core::ledger;

// The operations a candidates statement returned (FOR UPDATE SKIP LOCKED: this
// call holds their locks), read before the first write replaces SPI_tuptable.
std::vector<OperationRow> locked_candidates(PlanId plan, sm::Micros now, int max_rows) {
    Datum values[2] = {TimestampTzGetDatum(now), Int32GetDatum(max_rows)};
    execute(plan, values, nullptr, 0);
    SPITupleTable* table = SPI_tuptable;
    std::vector<OperationRow> rows;
    rows.reserve(SPI_processed);
    for (uint64 i = 0; i < SPI_processed; ++i) rows.push_back(read_operation(table, i));
    return rows;
}

Datum op_sweep(FunctionCallInfo fcinfo) {
    const int max_rows = positive_int_arg(fcinfo, 0, "op_sweep", "max_rows");
    const sm::Micros now = GetCurrentTimestamp();
    SpiConnection spi;
    std::vector<OperationRow> rows = locked_candidates(PlanId::sweep_candidates, now, max_rows);
    std::map<std::string, sm::Policy> policies;
    int swept = 0;
    for (OperationRow& row : rows) {
        // The statement's snapshot may predate a transition that committed since;
        // the locked row is the truth.
        if (!sm::lease_expired(row.state, now)) continue;
        auto found = policies.find(row.tool);
        if (found == policies.end())
            found = policies.emplace(row.tool, policy_for(row.tool_datum.datum, row.tool, false).rules).first;
        store(row, sm::expire_lease(row.state, found->second, now, "op_sweep"), CallValues{}, now);
        ++swept;
    }
    fold_counter_deltas(std::numeric_limits<int>::max());
    spi.finish();
    return Int32GetDatum(swept);
}

Datum op_claim_reconciliation(FunctionCallInfo fcinfo) {
    sm::ClaimCall call;
    call.worker = name_arg(fcinfo, 0, "op_claim_reconciliation", "worker");
    const Value worker = Value::of(PG_GETARG_DATUM(0));
    const int max_rows = positive_int_arg(fcinfo, 1, "op_claim_reconciliation", "max_rows");
    require_not_null(fcinfo, 2, "op_claim_reconciliation", "lease");
    call.lease = interval_us(PG_GETARG_INTERVAL_P(2));
    if (call.lease <= 0) invalid_parameter("op_claim_reconciliation: lease must be positive");
    const sm::Micros now = GetCurrentTimestamp();

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    TupleDesc desc = rsinfo->setDesc;
    Tuplestorestate* store_out = rsinfo->setResult;

    SpiConnection spi;
    std::vector<OperationRow> rows = locked_candidates(PlanId::claim_candidates, now, max_rows);
    std::vector<Datum> out_values(desc->natts);
    std::vector<char> out_nulls_storage(desc->natts);
    bool* out_nulls = reinterpret_cast<bool*>(out_nulls_storage.data());
    Datum* out_value_ptr = out_values.data();
    const CallValues values{worker, Value{}, Value{}};
    for (OperationRow& row : rows) {
        if (!sm::claimable(row.state, now)) continue;
        const std::optional<WrittenRow> written = store(row, sm::claim(row.state, call, now), values, now);
        if (!written) continue;
        operations_values(*written, desc, out_value_ptr, out_nulls);
        pg_call([&] { tuplestore_putvalues(store_out, desc, out_value_ptr, out_nulls); });
    }
    spi.finish();
    return (Datum)0;
}

Datum check_pointers(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(0)) return (Datum)0;
    const std::string parameter = PG_ARGISNULL(1) ? std::string("pointers") : text_to_string(PG_GETARG_DATUM(1));
    ArrayType* array = pg_call([&] { return PG_GETARG_ARRAYTYPE_P(0); });
    if (ARR_NDIM(array) > 1)
        invalid_parameter("register_tool: " + parameter + " must be a one-dimensional array of JSON Pointers");
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    pg_call([&] { deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &count); });
    for (int i = 0; i < count; ++i) {
        if (nulls[i])
            throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "register_tool: " + parameter + " must not contain nulls");
        const std::string pointer = text_to_string(elements[i]);
        try {
            (void)core::PointerSet::parse({pointer});
        } catch (const core::JsonError& error) {
            throw SqlError(ERRCODE_INVALID_TEXT_REPRESENTATION,
                           "register_tool: invalid JSON Pointer in " + parameter + ": \"" + pointer + "\"",
                           std::string("RFC 6901: ") + error.what() + ".",
                           "A JSON Pointer is empty or starts with \"/\"; inside a member name write \"~0\" for "
                           "\"~\" and \"~1\" for \"/\".");
        }
    }
    return (Datum)0;
}

Datum random_secret(FunctionCallInfo) {
    unsigned char secret[32];
    const bool ok = pg_call([&] { return pg_strong_random(secret, sizeof secret); });
    if (!ok) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: could not generate random bytes");
    return string_to_bytea(std::string_view(reinterpret_cast<char*>(secret), sizeof secret));
}

// opledger.flush_counters() of 0.1.0, which wrote the counts deferred to commit.
// Since 0.2.0 every call writes its counts itself, so there is nothing to flush;
// the symbol stays so that the frozen 0.1.0 install script (CREATE EXTENSION ...
// VERSION '0.1.0', then ALTER EXTENSION ... UPDATE) still loads.
Datum flush_counters(FunctionCallInfo) { return (Datum)0; }

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_sweep, ledger::op_sweep)
OPLEDGER_SQL_FUNCTION(opledger_op_claim_reconciliation, ledger::op_claim_reconciliation)
OPLEDGER_SQL_FUNCTION(opledger_check_pointers, ledger::check_pointers)
OPLEDGER_SQL_FUNCTION(opledger_random_secret, ledger::random_secret)
OPLEDGER_SQL_FUNCTION(opledger_flush_counters, ledger::flush_counters)
