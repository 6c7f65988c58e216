// The events' hash chain in the write path and its verifiers (see ledger_receipts.hpp).
#include "pg/ledger/ledger_receipts.hpp"

#include <string>
#include <vector>

#include "core/canonical_stream.hpp"
#include "core/ledger/event_chain.hpp"
#include "pg/boundary.hpp"
#include "pg/jsonb_canonical.hpp"
#include "pg/jsonb_reader.hpp"
#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_caller.hpp"
#include "pg/ledger/ledger_sql.hpp"
#include "pg/ledger/ledger_tables.hpp"
#include "pg/memory_resource.hpp"

extern "C" {
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
}

namespace opledger::pg::ledger {
namespace chain = opledger::core::ledger;
namespace {

// PostgreSQL counts time from 2000-01-01; the chain from 1970-01-01 (UTC).
constexpr long long kUnixToPostgresMicros = 946684800LL * 1000000LL;

std::string canonical_jsonb(Datum value) {
    Jsonb* jsonb = pg_call([&] { return DatumGetJsonbP(value); });
    DocumentMemoryLoan memory;
    if (!jsonb_strings_are_utf8()) return document_from_jsonb(jsonb, json_parse_limits(), memory.get()).canonical();
    std::string out;
    core::CanonicalStream stream(out);
    write_jsonb_canonical(jsonb, stream, json_parse_limits(), memory.get());
    stream.finish();
    return out;
}

// The text columns of one event, kept alive while its ChainEvent views them.
struct EventTexts {
    std::string operation_id, kind, status_after, tenant, detail;
    std::optional<std::string> decision, status_before, worker, provider_ref, role, login;
};

std::optional<std::string> optional_text(Datum value, bool null) {
    if (null) return std::nullopt;
    return text_to_string(value);
}

std::optional<std::string_view> view(const std::optional<std::string>& s) {
    if (!s) return std::nullopt;
    return std::string_view(*s);
}

// values/nulls by EventColumn; status columns as text, at as timestamptz.
chain::ChainEvent chain_event(const Datum* values, const char* nulls, EventTexts& t) {
    auto null = [&](int i) { return nulls[i] == 'n'; };
    t.operation_id = text_to_string(values[ec_operation_id]);
    t.kind = text_to_string(values[ec_kind]);
    t.status_after = text_to_string(values[ec_status_after]);
    t.tenant = text_to_string(values[ec_tenant]);
    t.decision = optional_text(values[ec_decision], null(ec_decision));
    t.status_before = optional_text(values[ec_status_before], null(ec_status_before));
    t.worker = optional_text(values[ec_worker], null(ec_worker));
    t.provider_ref = optional_text(values[ec_provider_ref], null(ec_provider_ref));
    t.role = optional_text(values[ec_role], null(ec_role));
    t.login = optional_text(values[ec_login], null(ec_login));
    t.detail = null(ec_detail) ? std::string() : canonical_jsonb(values[ec_detail]);
    chain::ChainEvent e;
    e.operation_id = t.operation_id;
    e.seq = DatumGetInt32(values[ec_seq]);
    e.at = DatumGetTimestampTz(values[ec_at]) + kUnixToPostgresMicros;
    e.kind = t.kind;
    e.decision = view(t.decision);
    e.status_before = view(t.status_before);
    e.status_after = t.status_after;
    if (!null(ec_attempt)) e.attempt = DatumGetInt32(values[ec_attempt]);
    e.worker = view(t.worker);
    e.provider_ref = view(t.provider_ref);
    e.detail_canonical = t.detail;
    e.role = view(t.role);
    e.login = view(t.login);
    e.tenant = t.tenant;
    return e;
}

// A one-row result of a function declared RETURNS TABLE, from C strings (NULL:
// SQL NULL), formed in the caller's memory context.
Datum one_row(FunctionCallInfo fcinfo, const std::vector<std::optional<std::string>>& columns) {
    // Built out here: the lambda below may end in an ereport, so it owns nothing
    // with a destructor (src/pg/boundary.hpp).
    std::vector<char*> cells;
    for (const auto& c : columns) cells.push_back(c ? const_cast<char*>(c->c_str()) : nullptr);
    char** cell_values = cells.data();
    return pg_call([&] {
        TupleDesc desc = nullptr;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("opledger: a row type was expected")));
        AttInMetadata* meta = TupleDescGetAttInMetadata(desc);
        HeapTuple tuple = BuildTupleFromCStrings(meta, cell_values);
        return HeapTupleGetDatum(tuple);
    });
}

struct ChainVerdict {
    bool valid = true;
    long long events = 0;
    std::optional<std::string> head;
    std::optional<long long> first_broken_seq;
    std::optional<std::string> reason;
};

// Recomputes the chain of one operation from its stored events (in seq order):
// each stored hash against the recomputed one, then the row's chain head against
// the last. Events recorded before 0.5.0 have no hash: they may only come before
// the first hashed one (the chain then starts there, with no previous hash).
ChainVerdict check_chain(Datum operation_id) {
    ChainVerdict v;
    Datum args[1] = {operation_id};
    std::optional<std::string> row_head;
    bool row_exists = false;
    bool purged = false;
    long long row_chain_seq = 0, row_event_seq = 0;
    {
        execute(PlanId::chain_row, args, nullptr, 1);
        if (SPI_processed == 1) {
            row_exists = true;
            bool null = false;
            const Datum head = column(SPI_tuptable, 0, 1, &null);
            if (!null) row_head = text_to_string(head);
            purged = DatumGetBool(column(SPI_tuptable, 0, 2, &null));
            const Datum chain_seq = column(SPI_tuptable, 0, 3, &null);
            if (!null) row_chain_seq = DatumGetInt32(chain_seq);
            const Datum event_seq = column(SPI_tuptable, 0, 4, &null);
            if (!null) row_event_seq = DatumGetInt32(event_seq);
        }
    }
    execute(PlanId::chain_events, args, nullptr, 0);
    SPITupleTable* table = SPI_tuptable;
    const uint64 count = SPI_processed;
    v.events = static_cast<long long>(count);
    std::optional<std::string> prev;
    bool chained = false;
    long long first_chained_seq = 0;
    long long purged_start_seq = 0;
    // The stored hash of event row_chain_seq, which the row's head must equal.
    std::optional<std::string> hash_at_chain_seq;
    bool chain_seq_seen = false;
    auto broken = [&](long long seq, std::string why) {
        v.valid = false;
        v.first_broken_seq = seq;
        v.reason = std::move(why);
    };
    for (uint64 i = 0; i < count; ++i) {
        std::array<Datum, kEventColumns> values{};
        std::array<char, kEventColumns> nulls{};
        for (int c = 0; c < kEventColumns; ++c) {
            bool null = false;
            values[c] = column(table, i, c, &null);
            nulls[c] = null ? 'n' : ' ';
        }
        const long long seq = DatumGetInt32(values[ec_seq]);
        if (nulls[ec_hash] == 'n') {
            if (chained) {
                broken(seq, "the event has no hash but an event before it has one");
                return v;
            }
            continue;
        }
        EventTexts texts;
        const std::string expected = chain::event_hash(chain_event(values.data(), nulls.data(), texts), view(prev));
        const std::string stored = text_to_string(values[ec_hash]);
        if (stored != expected && !chained && purged) {
            // Events after a purge chain to the tombstone's head at the time, whose
            // events are gone: that one link cannot be recomputed. The chain is
            // checked from this event on.
            purged_start_seq = seq;
            chained = true;
            first_chained_seq = seq;
            prev = stored;
            if (seq == row_chain_seq) {
                hash_at_chain_seq = stored;
                chain_seq_seen = true;
            }
            continue;
        }
        if (stored != expected) {
            broken(seq, chained ? "the event's hash does not match its contents and the hash of the event before it"
                                : "the event's hash does not match its contents (first event of the chain)");
            return v;
        }
        if (!chained) first_chained_seq = seq;
        chained = true;
        prev = stored;
        if (seq == row_chain_seq) {
            hash_at_chain_seq = stored;
            chain_seq_seen = true;
        }
    }
    v.head = prev;
    if (!row_exists) {
        if (count > 0) v.reason = "the operation row is gone; its events were checked among themselves";
        return v;
    }
    if (purged && count == 0) {
        // op_purge deletes the events and keeps the tombstone's chain head, which
        // receipts issued before still quote.
        v.head = row_head;
        if (row_head) v.reason = "the operation was purged: its events are gone and the tombstone keeps the chain head";
        return v;
    }
    long long last_seq = 0;
    if (count > 0) {
        bool null = false;
        last_seq = DatumGetInt32(column(table, count - 1, ec_seq, &null));
    }
    // The row's head is the hash of event chain_seq (the last one, unless answers
    // that wrote only their event came after it), and its event_seq the last seq.
    if (count > 0 && last_seq != row_event_seq) {
        broken(last_seq, "the operation's last event is not the one its row counts (an event was added or "
                         "removed at the end)");
        return v;
    }
    const bool head_events_gone = purged && !chain_seq_seen;  // the head's event went with the purge
    if (!head_events_gone && (row_chain_seq == 0 ? row_head.has_value() : row_head != hash_at_chain_seq)) {
        broken(row_chain_seq > 0 ? row_chain_seq : last_seq,
               "the operation's chain head is not the hash of the event it names (an event was removed or changed)");
        v.head = row_head;
        return v;
    }
    if (purged_start_seq > 0)
        v.reason = "the operation was purged: the chain is checked from seq " + std::to_string(purged_start_seq) +
                   ", whose link to the purged events cannot be recomputed";
    else if (first_chained_seq > 1)
        v.reason = "the chain starts at seq " + std::to_string(first_chained_seq) +
                   "; the events before it were recorded before 0.5.0 and have no hash";
    else if (!chained && count > 0)
        v.reason = "no event has a hash: all were recorded before 0.5.0";
    return v;
}

}  // namespace

std::string chain_hash(const Datum* values, const char* nulls, const std::optional<std::string>& prev) {
    EventTexts texts;
    return chain::event_hash(chain_event(values, nulls, texts), view(prev));
}

const char* receipt_kind(const sm::Transition& t, sm::Status before) {
    const char* kind = nullptr;
    for (const sm::Event& e : t.events) {
        if (e.kind == "approve") kind = "approved";
        if (e.kind == "resolve") kind = "resolved";
    }
    const sm::Status after = t.after.status;
    if (!kind && after != before && (after == sm::Status::succeeded || after == sm::Status::failed))
        kind = sm::status_name(after);
    return kind;
}

namespace {

// The signing key this backend signed with last. Kept so that a receipt reads no
// private key: checking that the kept key is still in use (not retired) is one indexed
// read of receipt_keys, and a retired one is replaced by the key read anew. A key_id
// names its public key (a hash of it), so the private half of an ID never changes.
struct SigningKey {
    std::string key_id;
    std::string private_key;
};
std::optional<SigningKey> kept_key;

SigningKey key_in_use() {
    execute(PlanId::receipt_key, nullptr, nullptr, 1);
    if (SPI_processed != 1)
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "opledger: no receipt signing key is in use",
                       "The operation's tool asks for receipts, and every signing key is retired; nothing was recorded.",
                       "An admin makes one with opledger.create_receipt_key(); then call again.");
    bool null = false;
    SigningKey key;
    key.key_id = text_to_string(column(SPI_tuptable, 0, 0, &null));
    key.private_key = bytea_to_string(column(SPI_tuptable, 0, 1, &null));
    return key;
}

bool still_in_use(const SigningKey& key) {
    Datum key_id[1] = {string_to_text(key.key_id)};
    execute(PlanId::receipt_key_in_use, key_id, nullptr, 1);
    return SPI_processed == 1;
}

}  // namespace

Datum sign_receipt(const OperationRow& row, const sm::Transition& t, const OperationRow::EventRow& last,
                   const char* kind) {
    if (!kept_key || !still_in_use(*kept_key)) {
        kept_key.reset();
        kept_key = key_in_use();
    }
    chain::ReceiptFacts f;
    f.key_id = kept_key->key_id;
    f.kind = kind;
    f.operation_id = text_to_string(row.operation_id.datum);
    f.tenant = row.tenant;
    f.tool = row.tool;
    const sm::Status after = t.after.status;
    f.status = sm::status_name(after);
    f.fingerprint_alg = row.fingerprint_alg;
    f.args_fingerprint = chain::to_hex(row.args_hash);
    const Value& outcome = after == sm::Status::succeeded ? row.result
                           : after == sm::Status::failed  ? row.error
                                                          : Value{};
    if (!outcome.null) {
        const core::Sha256Digest digest = core::sha256(canonical_jsonb(outcome.datum));
        f.outcome_fingerprint = chain::to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
    }
    f.attempt = t.after.attempt;
    f.approved_by = t.after.approved_role;
    f.resolved_by = t.after.resolved_role;
    f.at = DatumGetTimestampTz(last.values[ec_at]) + kUnixToPostgresMicros;
    if (t.after.approved_at) f.approved_at = *t.after.approved_at + kUnixToPostgresMicros;
    if (t.after.finished_at) f.finished_at = *t.after.finished_at + kUnixToPostgresMicros;
    f.seq = DatumGetInt32(last.values[ec_seq]);
    f.chain_head = text_to_string(last.values[ec_hash]);
    return string_to_text(chain::signed_receipt(f, kept_key->private_key));
}

namespace {

// opledger._ed25519_verify(public_key, message, signature): the public key and the
// signature in base64url; false for anything malformed.
Datum ed25519_verify_sql(FunctionCallInfo fcinfo) {
    const std::string key_text = text_to_string(PG_GETARG_DATUM(0));
    const std::string message = text_to_string(PG_GETARG_DATUM(1));
    const std::string sig_text = text_to_string(PG_GETARG_DATUM(2));
    const std::optional<std::string> key = chain::base64url_decode(key_text);
    const std::optional<std::string> sig = chain::base64url_decode(sig_text);
    const bool ok = key && sig && chain::ed25519_verify(*key, message, *sig);
    return BoolGetDatum(ok);
}

// opledger.verify_chain(operation_id)
Datum verify_chain(FunctionCallInfo fcinfo) {
    (void)name_arg(fcinfo, 0, "verify_chain", "operation_id", kMaxOperationIdBytes);
    SpiConnection spi;
    const Caller caller = current_caller();
    {
        Datum args[1] = {PG_GETARG_DATUM(0)};
        execute(PlanId::chain_row, args, nullptr, 1);
        bool null = false;
        if (SPI_processed == 1) {
            require_tenant(caller, text_to_string(column(SPI_tuptable, 0, 0, &null)), "verify_chain");
        } else {
            // Without its row the events' tenant decides who may see them.
            execute(PlanId::events_tenant, args, nullptr, 1);
            if (SPI_processed == 1)
                require_tenant(caller, text_to_string(column(SPI_tuptable, 0, 0, &null)), "verify_chain");
        }
    }
    const ChainVerdict v = check_chain(PG_GETARG_DATUM(0));
    spi.finish();
    return one_row(fcinfo, {std::string(v.valid ? "t" : "f"), std::to_string(v.events), v.head,
                            v.first_broken_seq ? std::optional<std::string>(std::to_string(*v.first_broken_seq))
                                               : std::nullopt,
                            v.reason});
}

// opledger._ed25519_keypair(): a fresh key pair (private raw bytes, public base64url).
Datum ed25519_keypair(FunctionCallInfo fcinfo) {
    const chain::Ed25519KeyPair pair = chain::ed25519_generate();
    const Datum priv = string_to_bytea(pair.private_key);
    const std::string pub = chain::base64url_encode(pair.public_key);
    return pg_call([&] {
        TupleDesc desc = nullptr;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("opledger: a row type was expected")));
        desc = BlessTupleDesc(desc);
        Datum values[2] = {priv, CStringGetTextDatum(pub.c_str())};
        bool nulls[2] = {false, false};
        return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
    });
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_verify_chain, ledger::verify_chain)
OPLEDGER_SQL_FUNCTION(opledger_ed25519_keypair, ledger::ed25519_keypair)
OPLEDGER_SQL_FUNCTION(opledger_ed25519_verify, ledger::ed25519_verify_sql)
