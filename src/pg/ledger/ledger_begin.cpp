// op_begin: may this attempt run?
//
// A new ID is inserted with the state machine's begin_new transition (INSERT ... ON
// CONFLICT DO NOTHING, so two sessions racing on one ID both get a consistent answer:
// the loser finds the winner's row), for the caller's tenant. An existing operation
// is locked (FOR UPDATE: even a replay appends an event, whose seq comes from the
// row), checked to be of the caller's tenant (42501 otherwise, before its arguments
// are compared, so another tenant's IDs are no oracle), and decided by
// begin_existing under the lock.
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/jcs.hpp"
#include "core/ledger/state_machine.hpp"
#include "pg/boundary.hpp"
#include "pg/jsonb_reader.hpp"
#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_caller.hpp"
#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_results.hpp"
#include "pg/ledger/ledger_store.hpp"
#include "pg/security/reuse_monitor.hpp"

extern "C" {
#include "utils/jsonb.h"
}

namespace opledger::pg::ledger {
namespace {

struct BeginArgs {
    Value operation_id;
    Value tool_datum;
    std::string tool;
    Jsonb* args = nullptr;
    Value conversation_id;
    TextArg worker;
    std::optional<int64_t> lease_us;
};

std::string hex(std::string_view bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(digits[c >> 4]);
        out.push_back(digits[c & 15]);
    }
    return out;
}

// What an OL001 adds to the state machine's refusal: the JSON Pointers where the
// arguments differ (compared in their redacted forms, so no value at a redact path is
// ever looked at or shown) and both fingerprints. Also written to the server log,
// since the error rolls back with the caller's statement and leaves no event.
[[noreturn]] void raise_reuse(const core::ledger::Refusal& refusal, const OperationRow& row, const Fingerprinter& fp,
                              const core::Document& doc, const std::string& given_alg, const std::string& given_hash,
                              const Caller& caller) {
    std::string detail;
    if (refusal.code == core::ledger::RefusalCode::reuse_other_args) {
        if (row.args.null) {
            detail = "The stored arguments were purged; only the fingerprints can be compared.";
        } else {
            Jsonb* stored_args = pg_call([&] { return DatumGetJsonbP(row.args.datum); });
            const core::Document stored_doc = document_from_jsonb(stored_args, json_parse_limits());
            const core::Document given_doc = core::parse_json_text(fp.stored_text(doc), json_parse_limits());
            const std::vector<std::string> pointers = core::Document::diff(
                stored_doc, given_doc, fp.excluded().empty() ? nullptr : &fp.excluded(), 20);
            if (!pointers.empty()) {
                detail = "The arguments differ at:";
                for (std::size_t i = 0; i < pointers.size(); ++i) {
                    detail += i == 0 ? " " : ", ";
                    detail += pointers[i].empty() ? std::string("\"\" (the whole document)") : pointers[i];
                }
                detail += ".";
            } else {
                detail = "The arguments differ only under redacted paths (values are never shown):";
                const std::vector<std::string>& redact = fp.policy().redact;
                for (std::size_t i = 0; i < redact.size(); ++i) {
                    detail += i == 0 ? " " : ", ";
                    detail += redact[i];
                }
                detail += ".";
            }
        }
    }
    detail += std::string(detail.empty() ? "" : " ") + "Stored fingerprint " + row.fingerprint_alg + ":" +
              hex(row.args_hash) + ", this call's " + given_alg + ":" + hex(given_hash) + ".";
    // The log line never carries the statement or its context: both can hold the
    // call's literal arguments, the very secret a guessing caller is trying.
    const std::string log_line = refusal.message + ": " + detail;
    const char* log_text = log_line.c_str();
    pg_call([&] { ereport(LOG, (errmsg("opledger: %s", log_text), errhidestmt(true), errhidecontext(true))); });
    // Counted where the caller's rollback cannot undo it (opledger.rejected_reuses).
    const std::string operation_id = text_to_string(row.operation_id.datum);
    reuse_monitor_record(MonitorKind::reuse, row.tenant.c_str(), row.tool.c_str(), operation_id.c_str(), caller.role);
    raise_refusal(refusal, detail);
}

// op_begin's work inside one SPI connection.
class Begin {
public:
    Begin(const BeginArgs& args, const ToolPolicy& policy, const core::Document& doc, const Caller& caller)
        : args_(args), policy_(policy), fp_(policy), doc_(doc), caller_(caller) {
        call_.worker = args.worker.text;
        call_.lease = args.lease_us;
        values_.actor = args.worker.datum;
        set_caller(values_, caller);
    }

    // Answers the call; returns op_begin's result row.
    Datum run(TupleDesc desc) {
        for (int round = 0; round < 3; ++round) {
            if (guess_new_id) {
                if (std::optional<Datum> answer = try_insert(desc)) return *answer;
            }
            if (std::optional<Datum> answer = decide_existing(desc)) return *answer;
            guess_new_id = true;  // it vanished between the statements: insert again
        }
        throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE, "op_begin: the operation keeps changing",
                       "It was created and removed concurrently several times.", "Retry the transaction.");
    }

private:
    // Whether this backend's last op_begin created its operation. Then the next one
    // tries the insert first; after a repeat it reads first, so that replay-heavy
    // workloads do not pay a failed insert per call.
    static inline bool guess_new_id = true;

    std::optional<Datum> try_insert(TupleDesc desc) {
        OperationRow row;
        row.operation_id = args_.operation_id;
        row.conversation_id = args_.conversation_id;
        row.tool_datum = args_.tool_datum;
        row.tool = args_.tool;
        row.args = Value::of(json_text_to_jsonb(fp_.stored_text(doc_).c_str()));
        row.fingerprint_alg = fp_.default_alg();
        row.args_hash = fingerprint(row.fingerprint_alg);
        row.tenant = caller_.all_tenants ? std::string() : caller_.tenant;
        row.created_role = caller_.role_name;
        row.created_login = caller_.login_name;
        row.receipts = policy_.receipts;
        now_ = GetCurrentTimestamp();
        const core::ledger::Transition t = core::ledger::begin_new(policy_.rules, call_, now_);
        std::optional<OperationRow> inserted = insert_operation(row, t, values_, now_);
        if (!inserted) {
            guess_new_id = false;
            return std::nullopt;
        }
        store_new(*inserted, t, values_, now_);
        guess_new_id = true;
        return begin_result(desc, *inserted, *t.decision, t.retry_after, caller_.role);
    }

    std::optional<Datum> decide_existing(TupleDesc desc) {
        std::optional<OperationRow> row =
            fetch_operation(PlanId::lock_operation_reserving_seq, args_.operation_id.datum);
        if (!row) return std::nullopt;
        now_ = GetCurrentTimestamp();  // once the row is locked (ledger_store.hpp, "Time")
        require_tenant(caller_, row->tenant, "op_begin");  // (an error undoes the reserved seq too)
        call_.same_tool = row->tool == args_.tool;
        std::string given_alg = call_.same_tool ? row->fingerprint_alg : std::string(fp_.default_alg());
        const std::string given_hash = fingerprint(given_alg);
        call_.same_fingerprint = given_hash == row->args_hash;
        core::ledger::Verdict verdict = core::ledger::begin_existing(row->state, policy_.rules, call_, now_);
        if (auto* refusal = std::get_if<core::ledger::Refusal>(&verdict))
            raise_reuse(*refusal, *row, fp_, doc_, given_alg, given_hash, caller_);
        const core::ledger::Transition& t = std::get<core::ledger::Transition>(verdict);
        store(*row, t, values_, now_, ReturnRow::no);
        return begin_result(desc, *row, *t.decision, t.retry_after, caller_.role);
    }

    // The fingerprint of the call's arguments with alg (computed once per algorithm).
    const std::string& fingerprint(const std::string& alg) {
        if (alg != hash_alg_) {
            hash_ = fp_.fingerprint(doc_, alg);
            hash_alg_ = alg;
        }
        return hash_;
    }

    const BeginArgs& args_;
    const ToolPolicy& policy_;
    const Fingerprinter fp_;
    const core::Document& doc_;
    const Caller& caller_;
    core::ledger::Micros now_ = 0;  // the call's time, read before its row is written
    core::ledger::BeginCall call_;
    CallValues values_;
    std::string hash_alg_, hash_;
};

// A NOTICE the first time a session uses a tool that was never registered (a typo
// such as "emial.send" would otherwise run silently under the default policy). It
// does not repeat the name: it is a value of the call (no message carries one), and the caller
// knows which call it just made. Kept per backend, for at most kMaxNoticedTools names.
void notice_unregistered(const std::string& tool) {
    static std::unordered_set<std::string> noticed;
    constexpr std::size_t kMaxNoticedTools = 1024;
    if (noticed.count(tool) != 0 || noticed.size() >= kMaxNoticedTools) return;
    noticed.insert(tool);
    pg_call([&] {
        ereport(NOTICE, (errmsg("opledger: the tool of this call is not registered"),
                         errdetail("op_begin treats it as non_idempotent_write with the default policy "
                                   "(5 attempts, 5-minute lease, backoff from 1 second to 5 minutes)."),
                         errhint("If that is not what it is, an admin registers it with opledger.register_tool "
                                 "(for example in a migration); opledger.require_registered_tools = on refuses "
                                 "unregistered tools.")));
    });
}

Datum op_begin(FunctionCallInfo fcinfo) {
    BeginArgs args;
    name_arg(fcinfo, 0, "op_begin", "operation_id", kMaxOperationIdBytes);
    args.operation_id = Value::of(PG_GETARG_DATUM(0));
    args.tool = name_arg(fcinfo, 1, "op_begin", "tool", kMaxToolBytes);
    args.tool_datum = Value::of(PG_GETARG_DATUM(1));
    require_not_null(fcinfo, 2, "op_begin", "args");
    args.args = DatumGetJsonbP(jsonb_arg(fcinfo, 2, "op_begin", "args").datum);
    if (!JB_ROOT_IS_OBJECT(args.args))
        invalid_parameter("op_begin: args must be a JSON object",
                          "A tool call's arguments are an object of named parameters.",
                          "Pass the arguments themselves (jsonb), not a JSON string or array holding them.");
    args.conversation_id = optional_text_arg(fcinfo, 3, "op_begin", "conversation_id", kMaxConversationIdBytes).datum;
    args.worker = optional_text_arg(fcinfo, 4, "op_begin", "worker", kMaxWorkerBytes);
    if (!PG_ARGISNULL(5)) args.lease_us = lease_arg(fcinfo, 5, "op_begin");
    const core::Document doc = document_from_jsonb(args.args, json_parse_limits());
    const TupleDesc desc = result_descriptor(fcinfo);

    SpiConnection spi;
    const Caller caller = current_caller();
    const ToolPolicy policy = policy_for(args.tool_datum.datum, true);
    if (!policy.rules.registered) notice_unregistered(args.tool);
    Begin begin(args, policy, doc, caller);
    const Datum result = begin.run(desc);
    spi.finish();
    return result;
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_begin, ledger::op_begin)
