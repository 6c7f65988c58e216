// op_begin (SPEC §3): may this attempt run? One statement for a new ID or a final
// state (begin_first: insert-or-answer, the begin_row plan); everything else under
// the row lock (begin_existing).
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
#include "pg/ledger/event_log.hpp"
#include "pg/ledger/ledger_counters.hpp"
#include "pg/ledger/ledger_gucs.hpp"
#include "pg/ledger/ledger_row.hpp"
#include "pg/ledger/ledger_spi.hpp"
#include "pg/ledger/ledger_steps.hpp"
#include "pg/ledger/tool_cache.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "funcapi.h"
#include "storage/backendid.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/reltrigger.h"
#include "utils/tuplestore.h"
}

namespace opledger::pg::ledger {
namespace {

// ---------------------------------------------------------------------------
// op_begin

struct BeginArgs {
    Value operation_id;
    std::string id;
    Value tool_datum;
    std::string tool;
    Jsonb* args = nullptr;
    Value conversation_id;
    Value worker;
    std::optional<int64_t> lease_us;
};

[[noreturn]] void raise_reuse(const BeginArgs& call, const Row& row, const Fingerprinter& fp,
                              const core::Document& doc, const std::string& given_hash) {
    std::string message;
    std::string detail;
    const std::string stored = row.fingerprint_alg + ":" + hex(row.args_hash);
    const std::string given =
        std::string(row.tool != call.tool ? fp.default_alg() : row.fingerprint_alg.c_str()) + ":" + hex(given_hash);
    if (row.tool != call.tool) {
        message = "operation ID \"" + call.id + "\" was already used with another tool";
        detail = "It belongs to tool \"" + row.tool + "\"; this call names tool \"" + call.tool + "\". ";
    } else {
        message = "operation ID \"" + call.id + "\" was already used with different arguments";
        if (row.args.null) {
            detail = "The stored arguments were purged; only the fingerprints can be compared. ";
        } else {
            // Compare the redacted forms, so no value at a redact path is ever looked at or shown.
            Jsonb* stored_args = pg_call([&] { return DatumGetJsonbP(row.args.datum); });
            const core::Document stored_doc = document_from_jsonb(stored_args, json_parse_limits());
            const core::Document given_doc = core::parse_json_text(fp.stored_text(doc), json_parse_limits());
            const std::vector<std::string> pointers =
                core::Document::diff(stored_doc, given_doc, fp.exclude.empty() ? nullptr : &fp.exclude, 20);
            if (!pointers.empty()) {
                detail = "The arguments differ at:";
                for (std::size_t i = 0; i < pointers.size(); ++i) {
                    detail += i == 0 ? " " : ", ";
                    detail += pointers[i].empty() ? std::string("\"\" (the whole document)") : pointers[i];
                }
                detail += ". ";
            } else {
                detail = "The arguments differ only under redacted paths (values are never shown):";
                for (std::size_t i = 0; i < fp.policy.redact.size(); ++i) {
                    detail += i == 0 ? " " : ", ";
                    detail += fp.policy.redact[i];
                }
                detail += ". ";
            }
        }
    }
    detail += "Stored fingerprint " + stored + ", this call's " + given + ".";
    const std::string log_line = message + ": " + detail;
    const char* log_text = log_line.c_str();
    pg_call([&] { ereport(LOG, (errmsg("opledger: %s", log_text))); });
    throw SqlError(kOL001, message, detail,
                   "Repeat the call with the original tool and arguments, or use a new operation ID "
                   "for a different action.");
}

struct BeginOutcome {
    Row row;  // the operation as it is after this call
    const char* decision = nullptr;
    Value retry_after;
};

bool is_final(Status status) { return status == Status::succeeded || status == Status::failed; }

// Same tool and fingerprint as the stored operation, or OL001 before anything is written.
void check_same_call(const BeginArgs& call, const Row& row, const Fingerprinter& fp, const core::Document& doc) {
    if (row.tool != call.tool) raise_reuse(call, row, fp, doc, fp.fingerprint(doc, fp.default_alg()));
    const std::string given_hash = fp.fingerprint(doc, row.fingerprint_alg);
    if (given_hash != row.args_hash) raise_reuse(call, row, fp, doc, given_hash);
}

// Counters of an op_begin answer that changes nothing (a duplicate prevented).
void count_answer(const Row& row) {
    Change change;
    change.begins = 1;
    change.duplicates_prevented = 1;
    add_counters(row.tool, row.status, row.status, change);
}

// An op_begin answer that changes nothing: only its event (and counters).
void audit_answer(const BeginArgs& call, const Row& row, const char* decision, TimestampTz now) {
    EventRecord event;
    event.operation_id = row.operation_id.datum;
    event.at = now;
    event.kind = "begin";
    event.decision = decision;
    event.status_before = row.status;
    event.status_after = row.status;
    event.attempt = row.attempt;
    event.worker = call.worker;
    append_event(event);
    count_answer(row);
}

BeginOutcome begin_existing(const BeginArgs& call, Row& row, const Policy& policy, const Fingerprinter& fp,
                            const core::Document& doc, TimestampTz now) {
    check_same_call(call, row, fp, doc);

    // op_begin itself expires a stale lease, so correctness never waits for op_sweep.
    if (lease_expired(row, now)) expire_lease(row, policy, now, "op_begin", call.worker);

    const Status before = row.status;
    Change change;
    change.kind = "begin";
    change.begins = 1;
    change.worker = call.worker;
    BeginOutcome out;
    bool execute = false;
    switch (row.status) {
        case Status::succeeded:
            out.decision = "replay";
            break;
        case Status::failed:
            out.decision = "failed";
            break;
        case Status::awaiting_approval:
            if (row.approved_at.null) out.decision = "needs_approval";
            else execute = true;
            break;
        case Status::pending:
            out.decision = "in_progress";
            out.retry_after = row.lease_expires_at;
            break;
        case Status::retryable:
            if (row.attempt >= policy.max_attempts) {
                // max_attempts was lowered since this op became retryable.
                become_failed(row, change, now);
                change.detail = DetailBuilder().boolean("attempts_exhausted", true).num("max_attempts", policy.max_attempts).jsonb();
                out.decision = "failed";
            } else if (!row.retry_after.null && now < row.retry_after.as_timestamp()) {
                out.decision = "retry_later";
                out.retry_after = row.retry_after;
            } else {
                execute = true;
            }
            break;
        case Status::unknown:
            if ((policy.effect == Effect::idempotent_write || policy.effect == Effect::read_only) &&
                row.attempt < policy.max_attempts) {
                if (!row.retry_after.null && now < row.retry_after.as_timestamp()) {
                    out.decision = "retry_later";
                    out.retry_after = row.retry_after;
                } else {
                    execute = true;
                }
            } else {
                out.decision = "reconcile";
            }
            break;
    }
    if (execute) {
        out.decision = "execute";
        row.status = Status::pending;
        row.attempt += 1;
        row.lease_owner = call.worker;
        row.lease_expires_at = Value::timestamp(add_us(now, call.lease_us.value_or(policy.lease_us)));
        row.retry_after = Value{};
        row.claim_owner = Value{};
        row.claim_expires_at = Value{};
        change.executions = 1;
    } else {
        change.duplicates_prevented = 1;
    }
    change.decision = out.decision;
    if (execute || row.status != before) {
        write(row, before, change, now);
    } else {
        audit_answer(call, row, out.decision, now);  // nothing to change in the row
    }
    out.row = std::move(row);
    return out;
}

// Parameters $1..$11 of begin_row and insert_new: the new operation.
struct NewOperation {
    static constexpr int kParams = 11;
    Datum values[kParams];
    char nulls[kParams];
    std::string hash;
    const char* alg;
    const char* decision;
    bool needs_approval;
};

NewOperation new_operation(const BeginArgs& call, const Policy& policy, const Fingerprinter& fp,
                           const core::Document& doc, TimestampTz now) {
    NewOperation op;
    const char* alg = fp.default_alg();
    op.alg = alg;
    op.hash = fp.fingerprint(doc, alg);
    const std::string& hash = op.hash;
    const Datum stored_args = json_text_to_jsonb(fp.stored_text(doc));
    op.needs_approval = policy.effect == Effect::irreversible;
    op.decision = op.needs_approval ? "needs_approval" : "execute";
    std::memset(op.nulls, ' ', sizeof op.nulls);
    auto set = [&](int param, const Value& v) {
        op.values[param - 1] = v.null ? 0 : v.datum;
        op.nulls[param - 1] = v.null ? 'n' : ' ';
    };
    set(1, call.operation_id);
    set(2, call.conversation_id);
    set(3, call.tool_datum);
    set(4, Value::of(stored_args));
    set(5, Value::of(string_to_bytea(hash)));
    set(6, Value::of(string_to_text(alg)));
    set(7, Value::of(string_to_text(op.needs_approval ? "awaiting_approval" : "pending")));
    set(8, Value::of(Int32GetDatum(op.needs_approval ? 0 : 1)));
    set(9, op.needs_approval ? Value{} : call.worker);
    set(10, op.needs_approval ? Value{}
                              : Value::timestamp(add_us(now, call.lease_us.value_or(policy.lease_us))));
    set(11, Value::timestamp(now));
    return op;
}

// The operation row as insert_new / begin_row store it for a new ID.
Row new_row(const BeginArgs& call, const NewOperation& op) {
    auto param = [&](int number) {
        return op.nulls[number - 1] == 'n' ? Value{} : Value::of(op.values[number - 1]);
    };
    Row row;
    row.operation_id = param(1);
    row.tool_datum = param(3);
    row.tool = call.tool;
    row.args = param(4);
    row.args_hash = op.hash;
    row.fingerprint_alg = op.alg;
    row.status = op.needs_approval ? Status::awaiting_approval : Status::pending;
    row.attempt = DatumGetInt32(op.values[7]);
    row.lease_owner = param(9);
    row.lease_expires_at = param(10);
    return row;  // every other column starts NULL (purged: false)
}

// The answer for a row that this call inserted, its event and its counters.
BeginOutcome inserted(const BeginArgs& call, Row row, const NewOperation& op, TimestampTz now) {
    BeginOutcome out;
    out.row = std::move(row);
    out.decision = op.decision;
    EventRecord event;
    event.operation_id = out.row.operation_id.datum;
    event.at = now;
    event.kind = "begin";
    event.decision = op.decision;
    event.status_after = out.row.status;
    event.attempt = out.row.attempt;
    event.worker = call.worker;
    append_event(event);
    int64 deltas[kCounterColumns] = {};
    deltas[k_begins] = 1;
    deltas[k_executions] = op.needs_approval ? 0 : 1;
    deltas[k_duplicates_prevented] = op.needs_approval ? 1 : 0;
    deltas[k_status_first + static_cast<int>(op.needs_approval ? Status::awaiting_approval : Status::pending)] = 1;
    const char* name = call.tool.c_str();
    pg_call([&] { counters_add(name, deltas); });
    return out;
}

// Whether opledger.operations stores an inserted row exactly as given: no insert
// trigger or rule that could change it, so insert_new may answer from the values it
// gave. Worked out once and again after any relcache invalidation.
enum class Known { unknown, yes, no };
Known operations_as_given = Known::unknown;

void forget_operations_shape(Datum, Oid) { operations_as_given = Known::unknown; }

bool operations_store_rows_as_given() {
    if (operations_as_given == Known::unknown) {
        operations_as_given = pg_call([] {
            static bool callback_registered = false;
            if (!callback_registered) {
                CacheRegisterRelcacheCallback(forget_operations_shape, (Datum)0);
                callback_registered = true;
            }
            const Oid relid = get_relname_relid("operations", get_namespace_oid("opledger", false));
            if (!OidIsValid(relid)) elog(ERROR, "opledger: table opledger.operations is missing");
            Relation rel = table_open(relid, AccessShareLock);
            const TriggerDesc* triggers = rel->trigdesc;
            const bool changes_rows = rel->rd_rules != nullptr ||
                                      (triggers != nullptr && (triggers->trig_insert_before_row ||
                                                               triggers->trig_insert_instead_row));
            table_close(rel, AccessShareLock);
            return changes_rows ? Known::no : Known::yes;
        });
    }
    return operations_as_given == Known::yes;
}

// Whether this backend's last op_begin inserted a new ID. Then the next one first
// tries insert_new, a plain INSERT ... ON CONFLICT DO NOTHING, and answers from the
// values it inserted: cheaper than begin_row, which also plans for an existing row
// (a second scan, a UNION and every column returned). A guess that turns out wrong
// (the ID exists) costs that one statement before begin_row; workloads of repeats
// stop guessing after their first repeat.
bool last_begin_inserted = false;

// op_begin's first try, one statement (begin_row, or insert_new when a new ID is
// likely): inserts a new ID, or answers a final state from an unlocked read. Nothing
// when the row lock must decide: a row in another state, or one created
// concurrently after this statement's snapshot.
std::optional<BeginOutcome> begin_first(const BeginArgs& call, const Policy& policy, const Fingerprinter& fp,
                                        const core::Document& doc, TimestampTz now) {
    const NewOperation op = new_operation(call, policy, fp, doc, now);
    if (last_begin_inserted && operations_store_rows_as_given()) {
        execute(PlanId::insert_new, op.values, op.nulls, 0);
        if (SPI_processed == 1) return inserted(call, new_row(call, op), op, now);
    }
    execute(PlanId::begin_row, op.values, op.nulls, 0);
    last_begin_inserted = false;
    if (SPI_processed == 0) return std::nullopt;
    SPITupleTable* table = SPI_tuptable;
    bool is_null = false;
    constexpr int kKindColumn = c_conversation_id + 1;  // begin_row adds it after the row's columns
    const std::string kind = text_to_string(column(table, 0, kKindColumn, &is_null));
    if (kind == "inserted") {
        last_begin_inserted = true;
        return inserted(call, read_row(table, 0), op, now);
    }
    Row row = read_row(table, 0);
    if (!is_final(row.status)) return std::nullopt;
    BeginOutcome out;
    out.decision = row.status == Status::succeeded ? "replay" : "failed";
    // Not "answered": another tool or fingerprint (OL001), or one computed with another
    // algorithm (the tool's redact setting changed since): compare in C++, then answer.
    if (kind != "answered") check_same_call(call, row, fp, doc);
    audit_answer(call, row, out.decision, now);
    out.row = std::move(row);
    return out;
}

Datum begin_result(TupleDesc desc, const BeginOutcome& out) {
    if (desc->natts != 13)
        throw SqlError(ERRCODE_DATATYPE_MISMATCH, "opledger: begin_result does not have the expected 13 columns");
    const Row& row = out.row;
    const Oid status_type = TupleDescAttr(desc, 2)->atttypid;
    const char* status = status_name(row.status);
    const Datum status_datum = pg_call([&] {
        return DirectFunctionCall2(enum_in, CStringGetDatum(status), ObjectIdGetDatum(status_type));
    });
    Datum values[13];
    bool nulls[13];
    auto put = [&](int i, const Value& v) {
        values[i] = v.null ? 0 : v.datum;
        nulls[i] = v.null;
    };
    put(0, Value::of(string_to_text(out.decision)));
    put(1, row.operation_id);
    put(2, Value::of(status_datum));
    put(3, Value::of(Int32GetDatum(row.attempt)));
    put(4, row.result);
    put(5, row.error);
    put(6, row.provider_ref);
    put(7, out.retry_after);
    put(8, row.lease_expires_at);
    put(9, row.finished_at);
    put(10, Value::of(BoolGetDatum(row.purged)));
    put(11, Value::of(string_to_text(row.fingerprint_alg)));
    put(12, Value::of(string_to_bytea(row.args_hash)));
    return return_tuple(desc, values, nulls);
}

Datum op_begin(FunctionCallInfo fcinfo) {
    BeginArgs call;
    call.id = name_arg(fcinfo, 0, "op_begin", "operation_id");
    call.operation_id = Value::of(PG_GETARG_DATUM(0));
    call.tool = name_arg(fcinfo, 1, "op_begin", "tool");
    call.tool_datum = Value::of(PG_GETARG_DATUM(1));
    require_not_null(fcinfo, 2, "op_begin", "args");
    call.args = DatumGetJsonbP(jsonb_arg(fcinfo, 2, "op_begin", "args").datum);
    call.conversation_id = optional_arg(fcinfo, 3);
    call.worker = optional_arg(fcinfo, 4);
    if (!PG_ARGISNULL(5)) {
        const int64_t lease = interval_us(PG_GETARG_INTERVAL_P(5));
        if (lease <= 0) invalid_parameter("op_begin: lease must be positive", "A lease is how long this attempt may run before it is presumed lost.");
        call.lease_us = lease;
    }
    const core::Document doc = document_from_jsonb(call.args, json_parse_limits());
    const TupleDesc result_desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    const Policy policy = policy_for(call.tool_datum.datum, call.tool, true);
    const Fingerprinter fp(policy);
    std::optional<BeginOutcome> outcome = begin_first(call, policy, fp, doc, now);
    // Everything else takes the row lock: an operation in a non-final state, or one
    // that appeared (or vanished) between the statements.
    for (int round = 0; round < 3 && !outcome; ++round) {
        std::optional<Row> row = lock_row(call.operation_id.datum);
        // No row to lock: it vanished (or was never visible); try the insert again.
        if (row) outcome = begin_existing(call, *row, policy, fp, doc, now);
        else outcome = begin_first(call, policy, fp, doc, now);
    }
    if (!outcome)
        throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE, "op_begin: operation \"" + call.id + "\" keeps changing",
                       "It was created and removed concurrently several times.", "Retry the transaction.");
    const Datum result = begin_result(result_desc, *outcome);
    spi.finish();
    return result;
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_begin, ledger::op_begin)
