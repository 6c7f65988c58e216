// The hash chain of an operation's events and the signed receipts that quote its
// head, free of PostgreSQL: the SQL layer passes plain values, this file decides the
// bytes. Both the writer (each op_* call) and the verifiers (verify_chain, the
// command-line receipt verifiers) depend on these bytes staying the same, so the
// format is versioned by the "v" member of a receipt and documented in
// docs/receipts.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace opledger::core::ledger {

// One event as it is hashed: its stored columns except the surrogate event_id.
// `at` is microseconds since 1970-01-01 UTC. `detail_canonical` is the detail's
// RFC 8785 form (the caller canonicalizes the stored jsonb), or empty for SQL NULL.
struct ChainEvent {
    std::string_view operation_id;
    long long seq = 0;
    long long at = 0;
    std::string_view kind;
    std::optional<std::string_view> decision;
    std::optional<std::string_view> status_before;
    std::string_view status_after;
    std::optional<long long> attempt;
    std::optional<std::string_view> worker;
    std::optional<std::string_view> provider_ref;
    std::string_view detail_canonical;  // empty: SQL NULL
    std::optional<std::string_view> role;
    std::optional<std::string_view> login;
    std::string_view tenant;
};

// The canonical (RFC 8785) JSON object hashed for an event: every member above
// (absent values as null) plus "prev", the hash of the event before it in the same
// operation (null for the first event of a chain). Throws JsonError when a text is
// not valid UTF-8 or the detail is not canonical JSON text.
std::string event_canonical(const ChainEvent& event, std::optional<std::string_view> prev_hex);

// Lowercase hex SHA-256 of event_canonical: the event's stored hash and, for the
// last event, the operation's chain head.
std::string event_hash(const ChainEvent& event, std::optional<std::string_view> prev_hex);

// Lowercase hex of bytes, and its inverse (nullopt when `hex` is not even-length hex).
std::string to_hex(std::string_view bytes);
std::optional<std::string> from_hex(std::string_view hex);

// A receipt's members other than its signature: names (ASCII) and values, each
// value already in canonical JSON form. receipt_canonical sorts the members by name
// and writes the object; the signature covers exactly these bytes.
using ReceiptMembers = std::vector<std::pair<std::string, std::string>>;
std::string receipt_canonical(ReceiptMembers members);
// A JSON string's canonical form (quoted, escaped); throws JsonError on invalid UTF-8.
std::string canonical_string(std::string_view utf8);

// RFC 3339 UTC time with six fraction digits ("2026-12-03T14:30:00.123456Z") of
// microseconds since 1970-01-01 UTC; years 0001 to 9999.
std::string utc_time(long long unix_micros);

// What a receipt states (docs/receipts.md, "The receipt"). kind: approved, succeeded,
// failed or resolved; seq/chain_head: the event the receipt covers and its hash;
// outcome_fingerprint: lowercase hex SHA-256 of the RFC 8785 form of the result
// (status succeeded) or the error (status failed), nullopt when there is none.
struct ReceiptFacts {
    std::string kind;
    std::string operation_id;
    std::string tenant;
    std::string tool;
    std::string status;
    std::string fingerprint_alg;
    std::string args_fingerprint;  // lowercase hex
    std::optional<std::string> outcome_fingerprint;
    std::optional<long long> attempt;
    std::optional<std::string> approved_by;  // roles
    std::optional<std::string> resolved_by;
    // Microseconds since 1970-01-01 UTC: the covered event's time, the approval's and
    // the final state's (nullopt: none).
    long long at = 0;
    std::optional<long long> approved_at;
    std::optional<long long> finished_at;
    long long seq = 0;
    std::string chain_head;
    std::string key_id;
};
inline constexpr int kReceiptVersion = 1;

// The receipt's members but its signature ("v", every fact, "key_id"). Throws
// JsonError when a text is not valid UTF-8.
ReceiptMembers receipt_members(const ReceiptFacts& facts);
// The receipt as stored and handed out: receipt_members plus "signature", the
// base64url Ed25519 signature of receipt_canonical(receipt_members(facts)); RFC 8785 text,
// written in one pass (the same bytes: tests/unit/event_chain_test.cpp).
std::string signed_receipt(const ReceiptFacts& facts, std::string_view private_key);

// Ed25519 (RFC 8032) through OpenSSL 3. Keys are the raw 32-byte forms.
struct Ed25519KeyPair {
    std::string private_key;  // 32 bytes
    std::string public_key;   // 32 bytes
};
Ed25519KeyPair ed25519_generate();
// The 64-byte signature of message; throws std::runtime_error on a malformed key.
std::string ed25519_sign(std::string_view private_key, std::string_view message);
bool ed25519_verify(std::string_view public_key, std::string_view message, std::string_view signature);

// base64url without padding (RFC 4648 section 5), the signature's encoding in a
// receipt; decode returns nullopt on anything else.
std::string base64url_encode(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace opledger::core::ledger
