// Tool policies (read from opledger.tools by every call) and fingerprints.
//
// There is no per-backend cache: invalidating one needed a trigger on opledger.tools,
// and a trigger keeps the table from becoming a Citus reference table, where each
// node must see a changed policy at once. The read is one primary-key lookup of a
// small table through a saved plan.
#include "pg/ledger/ledger_policy.hpp"

#include <optional>

#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_gucs.hpp"

extern "C" {
#include "catalog/pg_type_d.h"
#include "utils/jsonb.h"
#include "utils/array.h"
}

namespace opledger::pg::ledger {
namespace {

std::vector<std::string> text_array(Datum array_datum) {
    ArrayType* array = pg_call([&] { return DatumGetArrayTypeP(array_datum); });
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    pg_call([&] { deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &count); });
    std::vector<std::string> out;
    out.reserve(count);
    for (int i = 0; i < count; ++i)
        if (!nulls[i]) out.push_back(text_to_string(elements[i]));
    return out;
}

[[noreturn]] void raise_unregistered() {
    throw SqlError(kOL003, "op_begin: the tool is not registered",
                   "opledger.require_registered_tools is on, so op_begin accepts registered tools only.",
                   "Register it with opledger.register_tool(tool, effect, ...), or check the tool name.");
}

// The policy row of a tool: effect, max_attempts, lease, backoff_base, backoff_max,
// hash_exclude, redact (PlanId::policy); the defaults when there is none.
ToolPolicy load_policy(Datum tool_datum) {
    Datum values[1] = {tool_datum};
    execute(PlanId::policy, values, nullptr, 1);
    ToolPolicy policy;
    if (SPI_processed == 0) return policy;
    SPITupleTable* table = SPI_tuptable;
    bool is_null = false;
    core::ledger::Policy& rules = policy.rules;
    rules.registered = true;
    rules.effect = core::ledger::parse_effect(text_to_string(column(table, 0, 0, &is_null)))
                       .value_or(core::ledger::Effect::non_idempotent_write);
    rules.max_attempts = DatumGetInt32(column(table, 0, 1, &is_null));
    rules.lease = interval_us(DatumGetIntervalP(column(table, 0, 2, &is_null)));
    rules.backoff_base = interval_us(DatumGetIntervalP(column(table, 0, 3, &is_null)));
    rules.backoff_max = interval_us(DatumGetIntervalP(column(table, 0, 4, &is_null)));
    policy.hash_exclude = text_array(column(table, 0, 5, &is_null));
    policy.redact = text_array(column(table, 0, 6, &is_null));
    policy.receipts = DatumGetBool(column(table, 0, 7, &is_null));
    return policy;
}

}  // namespace

ToolPolicy policy_for(Datum tool_datum, bool enforce_registration) {
    ToolPolicy policy = load_policy(tool_datum);
    if (!policy.rules.registered && enforce_registration && ledger_require_registered_tools) raise_unregistered();
    return policy;
}

namespace {

// jsonb's text form: equal jsonb values print alike (sorted keys, no duplicates).
std::string payload_text(const Value& payload) {
    const Datum datum = payload.datum;
    const char* text = pg_call([&] {
        Jsonb* value = DatumGetJsonbP(datum);
        return JsonbToCString(nullptr, &value->root, VARSIZE(value));
    });
    return text;
}

Value hmac_bytea(const std::string& message) {
    const core::Sha256Digest digest = core::hmac_sha256(hmac_key(), message);
    return Value::of(string_to_bytea(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size())));
}

}  // namespace

Value payload_fingerprint(const Value& operation_id, const Value& payload) {
    if (payload.null) return Value{};
    // The ID's length first, so that no other (ID, payload) pair gives the same message.
    const std::string id = text_to_string(operation_id.datum);
    return hmac_bytea("opledger-result/2:" + std::to_string(id.size()) + ":" + id + ":" + payload_text(payload));
}

Value unbound_payload_fingerprint(const Value& payload) {
    if (payload.null) return Value{};
    return hmac_bytea("opledger-payload:" + payload_text(payload));
}

std::string notify_token(const std::string& operation_id) {
    const core::Sha256Digest digest = core::hmac_sha256(hmac_key(), "opledger-notify:" + operation_id);
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < 16; ++i) {
        out.push_back(digits[digest[i] >> 4]);
        out.push_back(digits[digest[i] & 15]);
    }
    return out;
}

std::string hmac_key() {
    // Only read: CREATE EXTENSION makes the key (opledger.create_hmac_key). A call that
    // wrote it would hold its row until the caller's transaction ended, and every other
    // session that needs the key would wait for that transaction.
    execute(PlanId::hmac_key, nullptr, nullptr, 1);
    if (SPI_processed == 0) {
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "opledger: the fingerprint key is missing",
                       "Fingerprints of tools with redact paths and notify tokens need the key in opledger.hmac_key.",
                       "A superuser creates a new one with SELECT opledger.create_hmac_key(); fingerprints and notify "
                       "tokens made with a deleted key no longer match. After a restore, restore opledger.hmac_key "
                       "from the dump instead.");
    }
    bool is_null = false;
    return bytea_to_string(column(SPI_tuptable, 0, 0, &is_null));
}

Fingerprinter::Fingerprinter(const ToolPolicy& policy)
    : policy_(policy),
      exclude_(core::PointerSet::parse(policy.hash_exclude)),
      redact_(core::PointerSet::parse(policy.redact)) {}

std::string Fingerprinter::fingerprint(const core::Document& doc, const std::string& alg) const {
    core::WriteOptions options;
    if (!exclude_.empty()) options.exclude = &exclude_;
    const std::string canonical = doc.canonical(options);
    core::Sha256Digest digest;
    if (alg == kAlgSha) {
        digest = core::sha256(canonical);
    } else if (alg == kAlgHmac) {
        digest = core::hmac_sha256(hmac_key(), canonical);
    } else {
        throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "op_begin: the operation's fingerprint algorithm is not supported",
                       "This version of opledger computes jcs-sha256/1 and jcs-hmac-sha256/1 only.");
    }
    return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

std::string Fingerprinter::stored_text(const core::Document& doc) const {
    core::WriteOptions options;
    if (!redact_.empty()) options.redact = &redact_;
    return doc.canonical(options);
}

}  // namespace opledger::pg::ledger
