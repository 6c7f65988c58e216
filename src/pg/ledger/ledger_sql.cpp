// Saved SPI plans of the ledger (texts from ledger_tables.cpp) and small Datum helpers.
#include "pg/ledger/ledger_sql.hpp"

#include "pg/ledger/ledger_tables.hpp"
#include "pg/ledger/ledger_version.hpp"

// executor/spi_priv.h reaches s_lock.h, whose C code uses `register` (not C++17).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "catalog/pg_type_d.h"
#include "executor/spi_priv.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/plancache.h"
}
#pragma GCC diagnostic pop

namespace opledger::pg::ledger {
namespace {

// Saved plans live in CacheMemoryContext (SPI_keepplan) for the backend's lifetime.
SPIPlanPtr saved_plans[static_cast<int>(PlanId::count_)] = {};

// Prepares a statement and keeps it for the backend's lifetime: with one generic
// plan, or (a statement that may read several shards) planned with its parameters'
// values at each execution.
SPIPlanPtr prepare_kept(const StatementText& text) {
    const char* sql = text.sql.c_str();
    const int nargs = static_cast<int>(text.types.size());
    Oid* types = const_cast<Oid*>(text.types.data());
    const int options =
        text.planning == Planning::custom_multi_shard ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN;
    int failure = 0;
    SPIPlanPtr plan = pg_call([&]() -> SPIPlanPtr {
        SPIPlanPtr prepared = SPI_prepare_cursor(sql, nargs, types, options);
        if (prepared == nullptr) {
            failure = SPI_result;
            return nullptr;
        }
        if (SPI_keepplan(prepared) != 0) {
            failure = SPI_ERROR_ARGUMENT;
            return nullptr;
        }
        return prepared;
    });
    if (plan == nullptr)
        throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: could not prepare a ledger statement",
                       std::string("SPI returned ") + SPI_result_code_string(failure) + ".");
    return plan;
}

SPIPlanPtr plan_for(PlanId id) {
    const int index = static_cast<int>(id);
    if (saved_plans[index] == nullptr) saved_plans[index] = prepare_kept(statement_text(id));
    return saved_plans[index];
}

// The saved UPDATEs, by shape. Few shapes occur (one or two per kind of
// transition), so a short array searched in order is enough. Should more ever
// occur, the others run as the statement that writes every column (saved apart).
struct UpdateShape {
    ColumnSet columns;
    bool returning = false;
    SPIPlanPtr plan = nullptr;
};
UpdateShape update_shapes[kMaxUpdateShapes];
int update_shape_count = 0;
SPIPlanPtr every_column_plans[2] = {};  // [returning]

SPIPlanPtr update_plan_for(ColumnSet columns, bool returning) {
    for (int i = 0; i < update_shape_count; ++i) {
        const UpdateShape& shape = update_shapes[i];
        if (shape.columns.bits == columns.bits && shape.returning == returning) return shape.plan;
    }
    if (update_shape_count == kMaxUpdateShapes) {
        SPIPlanPtr& every = every_column_plans[returning ? 1 : 0];
        if (every == nullptr) every = prepare_kept(update_operation(transition_columns(), returning));
        return every;
    }
    SPIPlanPtr plan = prepare_kept(update_operation(columns, returning));
    update_shapes[update_shape_count++] = UpdateShape{columns, returning, plan};
    return plan;
}

// The most memory a saved statement's generic plan may hold before it is built anew.
// A plan of these statements takes a few tens of kB. Citus 13.2.1 and later (also 12.1.11
// and later, 14.0) grows it on every call that runs a statement on a shard of the node it
// is on, when the shard is chosen at execution (operation_id = $1): it plans the
// statement for that shard again and appends that plan to the generic plan's memory
// instead of finding the one it kept for the shard before, tens of kB per call for the
// backend's lifetime (a worker backend serving one coordinator session held 326 MB
// of its own after 3000 begin+succeed cycles).
constexpr Size kMaxGenericPlanBytes = Size{1} << 20;

// Marks a saved statement's generic plan invalid once its memory passed
// kMaxGenericPlanBytes, as PostgreSQL's plan cache does when a table the plan uses
// changes: the next execution builds a new generic plan, and the old one is freed
// once no execution uses it. On a plan that doesn't grow it only reads: a few loads
// per execution.
void bound_generic_plan(SPIPlanPtr plan) {
    const List* sources = plan->plancache_list;
    for (int i = 0; i < list_length(sources); ++i) {
        CachedPlan* generic = static_cast<CachedPlanSource*>(list_nth(sources, i))->gplan;
        if (generic != nullptr && generic->is_valid &&
            MemoryContextMemAllocated(generic->context, true) > kMaxGenericPlanBytes)
            generic->is_valid = false;
    }
}

int run_plan(SPIPlanPtr plan, const Datum* values, const char* nulls, long count) {
    Datum* mutable_values = const_cast<Datum*>(values);
    const int rc = pg_call([&] {
        bound_generic_plan(plan);
        return SPI_execute_plan(plan, mutable_values, nulls, false, count);
    });
    if (rc < 0) {
        throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: a ledger statement failed",
                       std::string("SPI returned ") + SPI_result_code_string(rc) + ".");
    }
    return rc;
}

}  // namespace

int execute(PlanId id, const Datum* values, const char* nulls, long count) {
    return run_plan(plan_for(id), values, nulls, count);
}

int execute_update(ColumnSet columns, bool returning, const Datum* values, const char* nulls) {
    return run_plan(update_plan_for(columns, returning), values, nulls, 0);
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

Datum json_text_to_jsonb(const char* text) {
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
    // Every ledger call starts here: none touches a table of another schema version.
    require_installed_version();
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
