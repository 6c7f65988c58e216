// The ledger's state machine vocabulary and the in-memory image of one locked
// operation row. Values that PostgreSQL owns (jsonb, text) stay Datums in the SPI
// connection's memory; the decision logic reads the plain fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pg/ledger/ledger_spi.hpp"

namespace opledger::pg::ledger {

enum class Status : int { awaiting_approval = 0, pending, succeeded, failed, unknown, retryable };
constexpr int kStatusCount = 6;
const char* status_name(Status status);
std::optional<Status> parse_status(std::string_view name);

enum class Effect : int { read_only = 0, idempotent_write, non_idempotent_write, irreversible };
std::optional<Effect> parse_effect(std::string_view name);

// A nullable Datum.
struct Value {
    Datum datum = 0;
    bool null = true;
    static Value of(Datum d) { return Value{d, false}; }
    static Value timestamp(TimestampTz t) { return Value{TimestampTzGetDatum(t), false}; }
    TimestampTz as_timestamp() const { return DatumGetTimestampTz(datum); }
};

// Policy of a tool (SPEC §2); defaults for an unregistered tool.
struct Policy {
    bool registered = false;
    Effect effect = Effect::non_idempotent_write;
    int max_attempts = 5;
    int64_t lease_us = 5LL * 60 * 1000000;
    int64_t backoff_base_us = 1000000;
    int64_t backoff_max_us = 5LL * 60 * 1000000;
    std::vector<std::string> hash_exclude;
    std::vector<std::string> redact;

    // Delay before attempt `attempt + 1` after attempt `attempt` ended: base * 2^(attempt-1), capped.
    int64_t backoff_us(int attempt) const;
};

// Column positions of OPLEDGER_ROW_COLUMNS (ledger_spi.cpp).
enum RowColumn : int {
    c_operation_id = 0, c_tool, c_args, c_args_hash, c_fingerprint_alg, c_status, c_attempt,
    c_lease_owner, c_lease_expires_at, c_retry_after, c_result, c_error, c_provider_ref, c_finished_at,
    c_approved_by, c_approved_at, c_approval_note, c_unknown_since, c_resolved_at, c_resolved_by,
    c_resolution, c_claim_owner, c_claim_expires_at, c_purged, c_conversation_id
};

struct Row {
    Value operation_id;  // text
    Value tool_datum;    // text
    std::string tool;
    Value args;          // jsonb, NULL once purged
    std::string args_hash;
    std::string fingerprint_alg;
    Status status = Status::pending;
    int attempt = 0;
    Value lease_owner, lease_expires_at, retry_after, result, error, provider_ref, finished_at;
    Value approved_by, approved_at, approval_note, unknown_since, resolved_at, resolved_by, resolution;
    Value claim_owner, claim_expires_at;
    bool purged = false;
};

Row read_row(SPITupleTable* table, uint64 index);

}  // namespace opledger::pg::ledger
