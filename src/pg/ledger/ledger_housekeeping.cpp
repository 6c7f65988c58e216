// Housekeeping: op_sweep, op_claim_reconciliation, op_purge, and the internal
// helpers of register_tool (_check_pointers, _random_secret).
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/jcs.hpp"
#include "core/ledger/bounds.hpp"
#include "core/ledger/state_machine.hpp"
#include "pg/boundary.hpp"
#include "pg/interrupts.hpp"
#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_caller.hpp"
#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_results.hpp"
#include "pg/ledger/ledger_store.hpp"

extern "C" {
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/fmgrprotos.h"
#include "utils/array.h"
#include "utils/tuplestore.h"
}

namespace opledger::pg::ledger {
namespace {

namespace sm = opledger::core::ledger;

// Candidates are read without locks, a page at a time in key order (an index scan
// that runs shard by shard when the ledger is distributed), and only those of the
// caller's tenant (every tenant's for superusers, admins and roles mapped to '*').
// Each is then locked alone by its ID, by a statement that repeats the whole
// condition (state, time and tenant) and skips rows another transaction holds
// (FOR UPDATE SKIP LOCKED: such a row waits for the next run). One operation per
// statement is what a distributed ledger can run on any node; paging on past the
// rows another session holds keeps two sweepers or reconcilers from stalling each
// other.
//
// Why the condition is in the locking statement, not checked after it: under READ
// COMMITTED the statement reads the row as its own, newer snapshot shows it, and a
// row that no longer matches (a report or a claim committed since the page was read)
// is not locked at all, where a lock by ID alone would hold it to the end of the
// caller's transaction for nothing. (A row that changes between that snapshot and the
// lock is locked in its newest version, checked again by PostgreSQL and skipped; only
// that window of microseconds can leave an unchanged row locked.) The tenant is part
// of it so that the caller's transaction can never hold another tenant's row, even
// for a moment: the tenant of an operation never changes.
//
// The IDs are kept as strings and each page's tuple table is freed once read, so a
// page holds no memory of the SPI connection while its rows are worked on.
class Candidates {
public:
    // params: the statement's own first parameters; the key follows them.
    Candidates(PlanId plan, std::vector<Datum> params, int page)
        : plan_(plan), params_(std::move(params)), page_(page) {
        params_.push_back(TimestampTzGetDatum(DT_NOBEGIN));  // before every time
        params_.push_back(string_to_text(""));                // before every ID
    }

    // The next candidate's ID; nothing when none is left.
    std::optional<std::string> next() {
        if (index_ == ids_.size() && (exhausted_ || !read_page())) return std::nullopt;
        return ids_[index_++];
    }

private:
    bool read_page() {
        execute(plan_, params_.data(), nullptr, 0);
        SPITupleTable* table = SPI_tuptable;
        const uint64 rows = SPI_processed;
        ids_.clear();
        index_ = 0;
        for (uint64 i = 0; i < rows; ++i) {
            bool null = false;
            ids_.push_back(text_to_string(column(table, i, 0, &null)));
            if (i + 1 == rows) params_[params_.size() - 2] = column(table, i, 1, &null);  // by value
        }
        pg_call([table] { SPI_freetuptable(table); });
        if (!ids_.empty()) params_.back() = string_to_text(ids_.back());
        exhausted_ = rows < static_cast<uint64>(page_);
        return !ids_.empty();
    }

    PlanId plan_;
    std::vector<Datum> params_;
    int page_;
    std::vector<std::string> ids_;
    std::size_t index_ = 0;
    bool exhausted_ = false;
};

// Locks a candidate with the statement that checks it again (see Candidates); its row
// if it still qualifies and no other transaction holds it. recheck: the parameters
// after the ID.
std::optional<OperationRow> lock_candidate(PlanId plan, const std::string& id, const std::vector<Datum>& recheck) {
    std::vector<Datum> values{string_to_text(id)};
    values.insert(values.end(), recheck.begin(), recheck.end());
    execute(plan, values.data(), nullptr, 1);
    if (SPI_processed == 0) return std::nullopt;
    return read_operation(SPI_tuptable, 0);
}

Datum op_sweep(FunctionCallInfo fcinfo) {
    const int max_rows = positive_int_arg(fcinfo, 0, "op_sweep", "max_rows", kMaxSweepRows);
    const sm::Micros now = GetCurrentTimestamp();
    SpiConnection spi;
    const Caller caller = current_caller();
    CallValues values;
    set_caller(values, caller);
    const Datum tenant = string_to_text(caller.tenant);
    const std::vector<Datum> recheck = {TimestampTzGetDatum(now), BoolGetDatum(caller.all_tenants), tenant};
    Candidates candidates(PlanId::sweep_candidates,
                          {TimestampTzGetDatum(now), Int32GetDatum(max_rows), BoolGetDatum(caller.all_tenants), tenant},
                          max_rows);
    std::map<std::string, sm::Policy> policies;
    int swept = 0;
    // Each candidate is worked on in an SPI connection of its own (row_scope), so that
    // its statements' tuple tables and every value built for it are given back before
    // the next: a sweep of 100000 rows runs in the memory of one. What outlives a row
    // (the role, the tenant, the candidates' key) lives in the call's connection.
    while (swept < max_rows) {
        check_for_interrupts();
        const std::optional<std::string> id = candidates.next();
        if (!id) break;
        SpiConnection row_scope;
        std::optional<OperationRow> row = lock_candidate(PlanId::lock_sweep_candidate, *id, recheck);
        const sm::Micros at = GetCurrentTimestamp();  // once the row is locked (ledger_store.hpp, "Time")
        if (row && sm::lease_expired(row->state, at) && may_touch(caller, row->tenant)) {
            auto found = policies.find(row->tool);
            if (found == policies.end())
                found = policies.emplace(row->tool, policy_for(row->tool_datum.datum, false).rules).first;
            store(*row, sm::expire_lease(row->state, found->second, at, "op_sweep"), values, at, ReturnRow::no);
            ++swept;
        }
        row_scope.finish();
    }
    fold_counter_deltas(std::numeric_limits<int>::max());
    retire_counter_hours(now, max_rows, caller.all_tenants, tenant);
    compact_counter_hours(now, max_rows, caller.all_tenants, tenant);
    spi.finish();
    return Int32GetDatum(swept);
}

Datum op_claim_reconciliation(FunctionCallInfo fcinfo) {
    sm::ClaimCall call;
    call.worker = name_arg(fcinfo, 0, "op_claim_reconciliation", "worker", kMaxWorkerBytes);
    const Value worker = Value::of(PG_GETARG_DATUM(0));
    const int max_rows = positive_int_arg(fcinfo, 1, "op_claim_reconciliation", "max_rows", kMaxClaimRows);
    call.lease = lease_arg(fcinfo, 2, "op_claim_reconciliation");
    const sm::Micros now = GetCurrentTimestamp();

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    TupleDesc desc = rsinfo->setDesc;
    Tuplestorestate* store_out = rsinfo->setResult;

    SpiConnection spi;
    const Caller caller = current_caller();
    const ReadablePayloads readable = readable_payloads(caller.role);
    const Datum tenant = string_to_text(caller.tenant);
    const std::vector<Datum> recheck = {TimestampTzGetDatum(now), BoolGetDatum(caller.all_tenants), tenant};
    Candidates candidates(PlanId::claim_candidates,
                          {TimestampTzGetDatum(now), Int32GetDatum(max_rows), BoolGetDatum(caller.all_tenants), tenant},
                          max_rows);
    int claimed = 0;
    std::vector<Datum> out_values(desc->natts);
    std::vector<char> out_nulls_storage(desc->natts);
    bool* out_nulls = reinterpret_cast<bool*>(out_nulls_storage.data());
    Datum* out_value_ptr = out_values.data();
    CallValues values{worker, Value{}, Value{}, Value{}};
    set_caller(values, caller);
    // One SPI connection per candidate, as in op_sweep.
    while (claimed < max_rows) {
        check_for_interrupts();
        const std::optional<std::string> id = candidates.next();
        if (!id) break;
        SpiConnection row_scope;
        std::optional<OperationRow> row = lock_candidate(PlanId::lock_claim_candidate, *id, recheck);
        const sm::Micros at = GetCurrentTimestamp();  // once the row is locked (ledger_store.hpp, "Time")
        if (row && sm::claimable(row->state, at) && may_touch(caller, row->tenant)) {
            const std::optional<WrittenRow> written =
                store(*row, sm::claim(row->state, call, at), values, at, ReturnRow::yes);
            if (written) {
                ++claimed;
                // The tuplestore copies the row into the call's own memory.
                operations_values(*written, desc, out_value_ptr, out_nulls, readable);
                pg_call([&] { tuplestore_putvalues(store_out, desc, out_value_ptr, out_nulls); });
            }
        }
        row_scope.finish();
    }
    spi.finish();
    return (Datum)0;
}

// Candidates of op_purge per page: it has no max_rows, so a page only bounds what is
// read ahead of the locks.
constexpr int kPurgePage = 1000;

// opledger.op_purge(older_than): the caller's tenant's final operations finished
// before the call's time minus older_than become tombstones, one at a time, each
// through the store like any other transition (the row's UPDATE with updated_at,
// then the DELETE of its events). Candidates, locks and memory as in op_sweep.
Datum op_purge(FunctionCallInfo fcinfo) {
    require_not_null(fcinfo, 0, "op_purge", "older_than");
    const Datum older_than = PG_GETARG_DATUM(0);
    const bool in_range = pg_call([&] {
        Interval zero{0, 0, 0};
        Interval century{0, 0, 100 * MONTHS_PER_YEAR};
        return !DatumGetBool(DirectFunctionCall2(interval_lt, older_than, IntervalPGetDatum(&zero))) &&
               !DatumGetBool(DirectFunctionCall2(interval_gt, older_than, IntervalPGetDatum(&century)));
    });
    if (!in_range) invalid_parameter("op_purge: older_than must be between 0 and 100 years");
    const sm::Micros now = GetCurrentTimestamp();
    // Calendar arithmetic in the session's time zone, as timestamptz - interval does.
    const sm::Micros cutoff = pg_call([&] {
        return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_mi_interval, TimestampTzGetDatum(now), older_than));
    });
    SpiConnection spi;
    const Caller caller = current_caller();
    CallValues values;
    set_caller(values, caller);
    const Datum tenant = string_to_text(caller.tenant);
    const std::vector<Datum> recheck = {TimestampTzGetDatum(cutoff), BoolGetDatum(caller.all_tenants), tenant};
    Candidates candidates(PlanId::purge_candidates,
                          {TimestampTzGetDatum(cutoff), Int32GetDatum(kPurgePage), BoolGetDatum(caller.all_tenants),
                           tenant},
                          kPurgePage);
    int purged = 0;
    // One SPI connection per candidate, as in op_sweep.
    for (;;) {
        check_for_interrupts();
        const std::optional<std::string> id = candidates.next();
        if (!id) break;
        SpiConnection row_scope;
        std::optional<OperationRow> row = lock_candidate(PlanId::lock_purge_candidate, *id, recheck);
        const sm::Micros at = GetCurrentTimestamp();  // once the row is locked (ledger_store.hpp, "Time")
        if (row && sm::purgeable(row->state, cutoff) && may_touch(caller, row->tenant)) {
            store(*row, sm::purge(row->state), values, at, ReturnRow::no);
            if (purged < std::numeric_limits<int>::max()) ++purged;
        }
        row_scope.finish();
    }
    spi.finish();
    return Int32GetDatum(purged);
}

// opledger.notify_token(operation_id): the token NOTIFY payloads carry for it.
Datum notify_token_of(FunctionCallInfo fcinfo) {
    const std::string id = name_arg(fcinfo, 0, "notify_token", "operation_id", kMaxOperationIdBytes);
    SpiConnection spi;
    const Caller caller = current_caller();
    if (std::optional<OperationRow> row = fetch_operation(PlanId::read_operation, PG_GETARG_DATUM(0)))
        require_tenant(caller, row->tenant, "notify_token");
    const std::string token = notify_token(id);
    spi.finish();
    return string_to_text(token);
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
    unsigned char secret[core::ledger::kHmacKeyBytes];
    const bool ok = pg_call([&] { return pg_strong_random(secret, sizeof secret); });
    if (!ok) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: could not generate random bytes");
    return string_to_bytea(std::string_view(reinterpret_cast<char*>(secret), sizeof secret));
}

// opledger.flush_counters() of 0.1.0, which wrote the counts deferred to commit.
// Since 0.2.0 every call writes its counts itself, so there is nothing to flush;
// the symbol stays so that 0.1.0's install script, still on a server that has this
// library (a package upgrade, or the upgrade test), can create its function.
Datum flush_counters(FunctionCallInfo) { return (Datum)0; }

// opledger._tools_changed() of 0.1.0 and 0.2.0, the trigger that dropped cached tool
// policies. Since 0.3.0 policies are read by every call and the trigger is gone; the
// symbol stays for those versions' install scripts (and does nothing if an old
// schema still fires it before ALTER EXTENSION ... UPDATE).
Datum tools_changed(FunctionCallInfo) { return PointerGetDatum(nullptr); }

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_sweep, ledger::op_sweep)
OPLEDGER_SQL_FUNCTION(opledger_op_claim_reconciliation, ledger::op_claim_reconciliation)
OPLEDGER_SQL_FUNCTION(opledger_op_purge, ledger::op_purge)
OPLEDGER_SQL_FUNCTION(opledger_check_pointers, ledger::check_pointers)
OPLEDGER_SQL_FUNCTION(opledger_random_secret, ledger::random_secret)
OPLEDGER_SQL_FUNCTION(opledger_flush_counters, ledger::flush_counters)
OPLEDGER_SQL_FUNCTION(opledger_notify_token, ledger::notify_token_of)
OPLEDGER_SQL_FUNCTION(opledger_tools_changed, ledger::tools_changed)
