// Result rows of the op_* functions (see ledger_results.hpp).
#include "pg/ledger/ledger_results.hpp"

#include <array>
#include <cstring>
#include <vector>

#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_tables.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "funcapi.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
}

namespace opledger::pg::ledger {
namespace {

bool column_named(TupleDesc desc, int index_0, const char* name) {
    return index_0 < desc->natts && !TupleDescAttr(desc, index_0)->attisdropped &&
           strcmp(NameStr(TupleDescAttr(desc, index_0)->attname), name) == 0;
}

// The attribute number of `name` in a returned row, looked for first at index_0.
int returned_attno(TupleDesc desc, const char* name, int index_0) {
    if (column_named(desc, index_0, name)) return index_0 + 1;
    const int attno = SPI_fnumber(desc, name);
    if (attno <= 0)
        throw SqlError(ERRCODE_UNDEFINED_COLUMN, "opledger: a column of opledger.operations is missing",
                       "The result row type and the table disagree; reinstall or update the extension.");
    return attno;
}

// Whether a row returned as `returned` (RETURNING o.*) is laid out exactly as
// `target`, the operations row type: same columns, in the same order, none dropped.
bool same_layout(TupleDesc returned, TupleDesc target) {
    if (returned->natts != target->natts) return false;
    for (int i = 0; i < target->natts; ++i) {
        const Form_pg_attribute r = TupleDescAttr(returned, i);
        const Form_pg_attribute t = TupleDescAttr(target, i);
        if (t->attisdropped || r->atttypid != t->atttypid || r->atttypmod != t->atttypmod ||
            strcmp(NameStr(r->attname), NameStr(t->attname)) != 0)
            return false;
    }
    return true;
}

Datum form_result(TupleDesc desc, Datum* values, bool* nulls) {
    return pg_call([&] {
        HeapTuple tuple = heap_form_tuple(desc, values, nulls);
        return PointerGetDatum(SPI_returntuple(tuple, desc));
    });
}

}  // namespace

TupleDesc result_descriptor(FunctionCallInfo fcinfo) {
    TupleDesc desc = pg_call([&]() -> TupleDesc {
        TupleDesc found = nullptr;
        if (get_call_result_type(fcinfo, nullptr, &found) != TYPEFUNC_COMPOSITE) return nullptr;
        return BlessTupleDesc(found);
    });
    if (desc == nullptr)
        throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                       "opledger: function returning a row called in a context that cannot accept it");
    return desc;
}

namespace {

// Whether role may read the column of opledger.operations (SELECT on the table or on
// the column). C-style: may ereport (run it under pg_call).
bool column_readable(Oid role, Oid relid, const char* name) {
    const AttrNumber attno = get_attnum(relid, name);
    return attno != InvalidAttrNumber && pg_attribute_aclcheck(relid, attno, role, ACL_SELECT) == ACLCHECK_OK;
}

Oid operations_relid() { return get_relname_relid("operations", get_namespace_oid("opledger", false)); }

}  // namespace

ReadablePayloads readable_payloads(Oid role) {
    return pg_call([&] {
        ReadablePayloads r;
        const Oid relid = operations_relid();
        if (pg_class_aclcheck(relid, role, ACL_SELECT) == ACLCHECK_OK) return r;
        auto column = [&](const char* name) { return column_readable(role, relid, name); };
        r.args = column("args");
        r.result = column("result");
        r.error = column("error");
        r.approval_note = column("approval_note");
        r.result_fingerprint = column("result_fingerprint");
        r.duplicate_effects = column("duplicate_effects");
        return r;
    });
}

void operations_values(const WrittenRow& w, TupleDesc target, Datum* values, bool* nulls,
                       const ReadablePayloads& readable) {
    for (int i = 0; i < target->natts; ++i) {
        Form_pg_attribute attr = TupleDescAttr(target, i);
        const char* name = NameStr(attr->attname);
        const bool hidden = (!readable.args && strcmp(name, "args") == 0) ||
                            (!readable.result && strcmp(name, "result") == 0) ||
                            (!readable.error && strcmp(name, "error") == 0) ||
                            (!readable.approval_note && strcmp(name, "approval_note") == 0) ||
                            (!readable.result_fingerprint && strcmp(name, "result_fingerprint") == 0) ||
                            (!readable.duplicate_effects && strcmp(name, "duplicate_effects") == 0);
        if (attr->attisdropped || hidden) {
            values[i] = 0;
            nulls[i] = true;
            continue;
        }
        if (w.tuple == nullptr) {
            const int column = written_column_index(name);
            if (column < 0)
                throw SqlError(ERRCODE_UNDEFINED_COLUMN, "opledger: the result has a column opledger.operations lacks",
                               "The result row type and the table disagree; reinstall or update the extension.");
            values[i] = w.values[column];
            nulls[i] = w.nulls[column] == 'n';
            continue;
        }
        // The operations row type and RETURNING o.* share the table's order.
        const int attno = returned_attno(w.desc, NameStr(attr->attname), i);
        values[i] = SPI_getbinval(w.tuple, w.desc, attno, &nulls[i]);
    }
}

Datum return_operations_row(const WrittenRow& w, TupleDesc desc, const ReadablePayloads& readable) {
    // A caller who may read the whole row, and a statement that returned it in the
    // result's own layout: the row is handed back as it is.
    if (w.tuple != nullptr && readable.all() && same_layout(w.desc, desc)) {
        const HeapTuple tuple = w.tuple;
        return pg_call([&] { return PointerGetDatum(SPI_returntuple(tuple, desc)); });
    }
    std::vector<Datum> values(desc->natts);
    std::vector<char> nulls_storage(desc->natts);
    bool* nulls = reinterpret_cast<bool*>(nulls_storage.data());
    operations_values(w, desc, values.data(), nulls, readable);
    return form_result(desc, values.data(), nulls);
}

const std::array<const char*, kBeginResultColumnCount>& begin_result_columns() {
    static const std::array<const char*, kBeginResultColumnCount> names = {
        "decision",    "operation_id",     "status",      "attempt", "result",          "error",
        "provider_ref", "retry_after",     "lease_expires_at", "finished_at", "purged", "fingerprint_alg",
        "args_hash",   "lease_owner",      "next_action",
    };
    return names;
}

namespace {

// Indices into begin_result_columns().
enum BeginColumn : int {
    kDecision, kOperationId, kStatus, kAttempt, kResult, kError, kProviderRef, kRetryAfter,
    kLeaseExpiresAt, kFinishedAt, kPurged, kFingerprintAlg, kArgsHash, kLeaseOwner, kNextAction,
};
static_assert(kNextAction + 1 == kBeginResultColumnCount, "one index per begin_result column");

// Where each attribute of the declared begin_result type finds its value: the index in
// begin_result_columns() of attribute i (-1: a dropped attribute, always NULL). Checked
// against the type's attribute names on every call (one strcmp each) and worked out
// again when they differ, so the type is read by name, and a column the library does
// not know, or one it fills that the type lacks, is an error.
struct BeginLayout {
    std::vector<int> column;
};

bool layout_matches(const BeginLayout& layout, TupleDesc desc) {
    if (static_cast<int>(layout.column.size()) != desc->natts) return false;
    const auto& names = begin_result_columns();
    for (int i = 0; i < desc->natts; ++i) {
        const int c = layout.column[i];
        if (c < 0 ? !TupleDescAttr(desc, i)->attisdropped : !column_named(desc, i, names[c])) return false;
    }
    return true;
}

[[noreturn]] void begin_result_mismatch() {
    throw SqlError(ERRCODE_DATATYPE_MISMATCH, "opledger: opledger.begin_result does not have the columns op_begin fills",
                   "The installed type and the library disagree; reinstall or update the extension.");
}

const BeginLayout& begin_layout(TupleDesc desc) {
    static BeginLayout cached;
    if (layout_matches(cached, desc)) return cached;
    const auto& names = begin_result_columns();
    BeginLayout layout;
    layout.column.assign(desc->natts, -1);
    std::array<bool, kBeginResultColumnCount> seen{};
    int filled = 0;
    for (int i = 0; i < desc->natts; ++i) {
        const Form_pg_attribute attr = TupleDescAttr(desc, i);
        if (attr->attisdropped) continue;
        int found = -1;
        for (int c = 0; c < kBeginResultColumnCount; ++c)
            if (strcmp(NameStr(attr->attname), names[c]) == 0) found = c;
        if (found < 0 || seen[found]) begin_result_mismatch();
        seen[found] = true;
        layout.column[i] = found;
        ++filled;
    }
    if (filled != kBeginResultColumnCount) begin_result_mismatch();
    cached = std::move(layout);
    return cached;
}

}  // namespace

Datum begin_result(TupleDesc desc, const OperationRow& row, core::ledger::Decision decision,
                   const std::optional<core::ledger::Micros>& retry_after, Oid role) {
    // A keyed fingerprint goes only to a role that may read it in the table: taken
    // of guessed arguments for a fresh operation (in a savepoint rolled back), it
    // could be compared with another operation's, a guess that leaves no trace. A
    // plain fingerprint is the SHA-256 of the canonical arguments the caller sent.
    const bool hide_hash = row.fingerprint_alg == kAlgHmac && pg_call([&] {
        const Oid relid = operations_relid();
        return pg_class_aclcheck(relid, role, ACL_SELECT) != ACLCHECK_OK && !column_readable(role, relid, "args_hash");
    });
    const BeginLayout& layout = begin_layout(desc);
    const core::ledger::OperationState& s = row.state;
    // The values in begin_result_columns() order, placed in the type's own order below.
    Value by_name[kBeginResultColumnCount];
    auto time = [](const std::optional<core::ledger::Micros>& t) {
        return t ? Value::of(TimestampTzGetDatum(*t)) : Value{};
    };
    by_name[kDecision] = Value::of(string_to_text(core::ledger::decision_name(decision)));
    by_name[kOperationId] = row.operation_id;
    by_name[kAttempt] = Value::of(Int32GetDatum(s.attempt));
    by_name[kResult] = row.result;
    by_name[kError] = row.error;
    by_name[kProviderRef] = s.provider_ref ? Value::of(string_to_text(*s.provider_ref)) : Value{};
    by_name[kRetryAfter] = time(retry_after);
    by_name[kLeaseExpiresAt] = time(s.lease_expires_at);
    by_name[kFinishedAt] = time(s.finished_at);
    by_name[kPurged] = Value::of(BoolGetDatum(s.purged));
    by_name[kFingerprintAlg] = Value::of(string_to_text(row.fingerprint_alg));
    by_name[kArgsHash] = hide_hash ? Value{} : Value::of(string_to_bytea(row.args_hash));
    by_name[kLeaseOwner] = s.lease_owner ? Value::of(string_to_text(*s.lease_owner)) : Value{};
    by_name[kNextAction] =
        Value::of(string_to_text(core::ledger::next_action_name(core::ledger::next_action(decision))));
    std::vector<Datum> values(desc->natts, 0);
    std::vector<char> nulls_storage(desc->natts, 1);
    bool* nulls = reinterpret_cast<bool*>(nulls_storage.data());
    for (int i = 0; i < desc->natts; ++i) {
        const int c = layout.column[i];
        if (c < 0) continue;  // a dropped attribute
        if (c == kStatus) {
            // The enum's type is the attribute's own (opledger.op_status).
            const Oid status_type = TupleDescAttr(desc, i)->atttypid;
            const char* status = core::ledger::status_name(s.status);
            values[i] = pg_call([&] {
                return DirectFunctionCall2(enum_in, CStringGetDatum(status), ObjectIdGetDatum(status_type));
            });
            nulls[i] = false;
            continue;
        }
        values[i] = by_name[c].null ? 0 : by_name[c].datum;
        nulls[i] = by_name[c].null;
    }
    return form_result(desc, values.data(), nulls);
}

}  // namespace opledger::pg::ledger
