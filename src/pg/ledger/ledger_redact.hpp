// Redaction of the JSON payloads a call reports (result, error): the values at a
// tool's redact pointers become "[REDACTED]" before anything is stored (the row and
// the audit trail alike), as they do in the stored args (docs/security.md).
#pragma once

#include "core/jcs.hpp"
#include "pg/ledger/ledger_sql.hpp"

namespace opledger::pg::ledger {

// The payload (jsonb, or SQL NULL) with the values at `redact` replaced. The
// payload's own form is kept otherwise: no canonicalisation, so a result with a
// number no double can hold is still stored exactly as given.
Value redact_payload(const Value& payload, const core::PointerSet& redact);

}  // namespace opledger::pg::ledger
