// A tool's policy (opledger.register_tool) as the ledger uses it, and the argument fingerprint.
#pragma once

#include <string>
#include <vector>

#include "core/jcs.hpp"
#include "core/ledger/state_machine.hpp"
#include "pg/ledger/ledger_sql.hpp"

namespace opledger::pg::ledger {

inline constexpr const char* kAlgSha = "jcs-sha256/1";
inline constexpr const char* kAlgHmac = "jcs-hmac-sha256/1";

struct ToolPolicy {
    core::ledger::Policy rules;          // what the state machine decides by
    std::vector<std::string> hash_exclude;  // JSON Pointers left out of the fingerprint
    std::vector<std::string> redact;        // JSON Pointers never stored
    bool receipts = false;                  // its approvals and outcomes get signed receipts
};

// The tool's policy, read from opledger.tools. With enforce_registration, an
// unregistered tool raises OL003 while opledger.require_registered_tools is on.
ToolPolicy policy_for(Datum tool_datum, bool enforce_registration);

// The per-database fingerprint key (created on first need).
std::string hmac_key();

// The keyed fingerprint (HMAC-SHA256, bytea) of a jsonb payload as given, for one
// operation, or NULL. Bound to the operation ID, so that the fingerprint of a guessed
// value taken for one operation (a fresh one, or another unknown one a reconciler
// resolves in a savepoint) can never be compared with another's stored fingerprint.
Value payload_fingerprint(const Value& operation_id, const Value& payload);
// The fingerprint of the same payload not bound to an operation: the form of the
// results stored before fingerprints were bound, which a later report is compared
// with too. Nothing stores or returns this form.
Value unbound_payload_fingerprint(const Value& payload);

// The NOTIFY token of an operation: 32 hex digits of a keyed hash of its ID.
std::string notify_token(const std::string& operation_id);

// Fingerprints and the stored form of a call's arguments under a policy.
class Fingerprinter {
public:
    explicit Fingerprinter(const ToolPolicy& policy);
    const ToolPolicy& policy() const { return policy_; }
    const core::PointerSet& excluded() const { return exclude_; }
    // jcs-sha256/1 normally, jcs-hmac-sha256/1 for a tool with redact paths.
    const char* default_alg() const { return policy_.redact.empty() ? kAlgSha : kAlgHmac; }
    std::string fingerprint(const core::Document& doc, const std::string& alg) const;
    // Canonical text, with the values at redact paths replaced.
    std::string stored_text(const core::Document& doc) const;
    const core::PointerSet& redacted() const { return redact_; }

private:
    const ToolPolicy& policy_;
    core::PointerSet exclude_;
    core::PointerSet redact_;
};

}  // namespace opledger::pg::ledger
