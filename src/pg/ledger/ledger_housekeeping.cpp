// Housekeeping (SPEC §3-§4): op_sweep, op_claim_reconciliation, and the internal
// helpers of register_tool and the tests (_check_pointers, _random_secret,
// flush_counters).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/jcs.hpp"
#include "pg/boundary.hpp"
#include "pg/jsonb_reader.hpp"
#include "pg/ledger/ledger_counters.hpp"
#include "pg/ledger/ledger_gucs.hpp"
#include "pg/ledger/ledger_row.hpp"
#include "pg/ledger/ledger_spi.hpp"
#include "pg/ledger/ledger_steps.hpp"
#include "pg/ledger/tool_cache.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "funcapi.h"
#include "storage/backendid.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace opledger::pg::ledger {
namespace {

// ---------------------------------------------------------------------------
// Housekeeping: op_sweep, op_claim_reconciliation

int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    require_not_null(fcinfo, argno, function, name);
    const int value = PG_GETARG_INT32(argno);
    if (value <= 0)
        invalid_parameter(std::string(function) + ": " + name + " must be positive, not " + std::to_string(value));
    return value;
}

Datum op_sweep(FunctionCallInfo fcinfo) {
    const int max_rows = positive_int_arg(fcinfo, 0, "op_sweep", "max_rows");
    const TimestampTz now = GetCurrentTimestamp();
    SpiConnection spi;
    Datum values[2] = {TimestampTzGetDatum(now), Int32GetDatum(max_rows)};
    execute(PlanId::sweep_candidates, values, nullptr, 0);
    SPITupleTable* candidates = SPI_tuptable;
    const uint64 count = SPI_processed;
    std::map<std::string, Policy> policies;
    for (uint64 i = 0; i < count; ++i) {
        Row row = read_row(candidates, i);
        auto found = policies.find(row.tool);
        if (found == policies.end())
            found = policies.emplace(row.tool, policy_for(row.tool_datum.datum, row.tool, false)).first;
        expire_lease(row, found->second, now, "op_sweep", Value{});
    }
    spi.finish();
    return Int32GetDatum(static_cast<int32>(count));
}

Datum op_claim_reconciliation(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_claim_reconciliation", "worker");
    const Value worker = Value::of(PG_GETARG_DATUM(0));
    const int max_rows = positive_int_arg(fcinfo, 1, "op_claim_reconciliation", "max_rows");
    require_not_null(fcinfo, 2, "op_claim_reconciliation", "lease");
    const int64_t lease = interval_us(PG_GETARG_INTERVAL_P(2));
    if (lease <= 0) invalid_parameter("op_claim_reconciliation: lease must be positive");
    const TimestampTz now = GetCurrentTimestamp();

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    TupleDesc desc = rsinfo->setDesc;
    Tuplestorestate* store = rsinfo->setResult;

    SpiConnection spi;
    Datum values[2] = {TimestampTzGetDatum(now), Int32GetDatum(max_rows)};
    execute(PlanId::claim_candidates, values, nullptr, 0);
    SPITupleTable* candidates = SPI_tuptable;
    const uint64 count = SPI_processed;
    std::vector<Datum> out_values(desc->natts);
    std::vector<char> out_nulls_storage(desc->natts);
    bool* out_nulls = reinterpret_cast<bool*>(out_nulls_storage.data());
    Datum* out_value_ptr = out_values.data();
    for (uint64 i = 0; i < count; ++i) {
        Row row = read_row(candidates, i);
        const Status before = row.status;
        Change change;
        change.kind = "claim";
        change.worker = worker;
        change.counters = false;
        row.claim_owner = worker;
        row.claim_expires_at = Value::timestamp(add_us(now, lease));
        const Written w = write(row, before, change, now);
        operations_values(w, desc, out_value_ptr, out_nulls);
        pg_call([&] { tuplestore_putvalues(store, desc, out_value_ptr, out_nulls); });
    }
    spi.finish();
    return (Datum)0;
}

// ---------------------------------------------------------------------------
// register_tool helpers

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

// Writes this transaction's counter deltas now instead of at commit (tests use it).
Datum flush_counters(FunctionCallInfo) {
    pg_call([] { counters_flush_now(); });
    PG_RETURN_VOID();
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_sweep, ledger::op_sweep)
OPLEDGER_SQL_FUNCTION(opledger_op_claim_reconciliation, ledger::op_claim_reconciliation)
OPLEDGER_SQL_FUNCTION(opledger_check_pointers, ledger::check_pointers)
OPLEDGER_SQL_FUNCTION(opledger_random_secret, ledger::random_secret)
OPLEDGER_SQL_FUNCTION(opledger_flush_counters, ledger::flush_counters)
