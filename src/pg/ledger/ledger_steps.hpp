// The steps every op_* function is made of, shared by ledger_begin.cpp,
// ledger_reports.cpp and ledger_housekeeping.cpp: argument validation, the tool's
// policy and the fingerprint, reading and locking an operation row, writing a
// transition (row + event + counters), and returning rows to SQL.
//
// Every op_* call: validate arguments (nothing touched yet), lock the operation row
// (SELECT ... FOR UPDATE), decide in C++, then write the row (one UPDATE) and its
// event (event_log.hpp), and return; counter deltas are kept in memory
// and written once per transaction (ledger_counters.cpp). Errors are raised before
// the write, and the caller's transaction (or statement) rolls back anything else,
// so every error leaves the ledger as it was. Nothing here commits.
//
// Time: all ledger timestamps are the wall clock at the call (GetCurrentTimestamp,
// i.e. clock_timestamp()), read once per call. Leases and backoff must mean real
// time even inside a long caller transaction, where now() would stand still.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/jcs.hpp"
#include "pg/boundary.hpp"
#include "pg/ledger/ledger_row.hpp"
#include "pg/ledger/ledger_spi.hpp"

extern "C" {
#include "utils/timestamp.h"
}

namespace opledger::pg::ledger {

inline constexpr int kOL001 = MAKE_SQLSTATE('O', 'L', '0', '0', '1');
inline constexpr int kOL002 = MAKE_SQLSTATE('O', 'L', '0', '0', '2');
inline constexpr int kOL003 = MAKE_SQLSTATE('O', 'L', '0', '0', '3');
inline constexpr const char* kAlgSha = "jcs-sha256/1";
inline constexpr const char* kAlgHmac = "jcs-hmac-sha256/1";
inline constexpr std::size_t kMaxNameBytes = 1024;

// Errors and argument validation
[[noreturn]] void invalid_parameter(const std::string& message, const std::string& detail = {},
                                    const std::string& hint = {});
[[noreturn]] void impossible(const std::string& message, const std::string& detail, const std::string& hint = {});
void require_not_null(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
// A required, non-empty name argument (operation_id, tool, worker, approver).
std::string name_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
Value optional_arg(FunctionCallInfo fcinfo, int argno);
// An optional attempt (fencing token); must be positive when given.
std::optional<int> attempt_arg(FunctionCallInfo fcinfo, int argno, const char* function);
int64_t interval_us(const Interval* span);
// A detoasted jsonb argument, checked against opledger.max_payload_bytes.
Value jsonb_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
TimestampTz add_us(TimestampTz t, int64_t us);
std::string hex(std::string_view bytes);
// Minimal JSON string escaping for event details built here (names, notes, words).
void append_json_string(std::string& out, std::string_view value);

// Policy and fingerprint
[[noreturn]] void raise_unregistered(const std::string& tool);
// The policy from the backend's tool cache (see tool_cache.hpp), loaded on a miss.
Policy policy_for(Datum tool_datum, const std::string& tool, bool enforce_registration);
std::string hmac_key();

struct Change {
    const char* kind = nullptr;
    const char* decision = nullptr;
    Value worker;
    Value provider_ref;       // as reported by this call (event)
    Value detail;             // small jsonb detail
    const char* payload_key = nullptr;  // detail gets {payload_key: payload} added
    Value payload;
    bool set_result = false;
    bool set_error = false;
    bool counters = true;
    int begins = 0, executions = 0, duplicates_prevented = 0, successes = 0, failures = 0, retries = 0,
        unknowns = 0, late_successes = 0, duplicate_effects = 0, manual = 0, resolutions = 0;
};

struct Written {
    HeapTuple tuple = nullptr;  // the operations row after the write (SPI memory)
    TupleDesc desc = nullptr;
};

// Builds a small JSON object for event details: {"k": v, ...}.
class DetailBuilder {
public:
    DetailBuilder& str(const char* key, std::string_view value) {
        sep(key);
        append_json_string(json_, value);
        return *this;
    }
    DetailBuilder& num(const char* key, long long value) {
        sep(key);
        json_ += std::to_string(value);
        return *this;
    }
    DetailBuilder& boolean(const char* key, bool value) {
        sep(key);
        json_ += value ? "true" : "false";
        return *this;
    }
    Value jsonb() const {
        if (json_.empty()) return Value{};
        return Value::of(json_text_to_jsonb(json_ + "}"));
    }

private:
    void sep(const char* key) {
        json_ += json_.empty() ? "{" : ",";
        append_json_string(json_, key);
        json_.push_back(':');
    }
    std::string json_;
};

struct Fingerprinter {
    const Policy& policy;
    core::PointerSet exclude;
    core::PointerSet redact;

    explicit Fingerprinter(const Policy& p)
        : policy(p), exclude(core::PointerSet::parse(p.hash_exclude)), redact(core::PointerSet::parse(p.redact)) {}

    const char* default_alg() const { return policy.redact.empty() ? kAlgSha : kAlgHmac; }

    std::string fingerprint(const core::Document& doc, const std::string& alg) const {
        core::WriteOptions options;
        if (!exclude.empty()) options.exclude = &exclude;
        const std::string canonical = doc.canonical(options);
        core::Sha256Digest digest;
        if (alg == kAlgSha) {
            digest = core::sha256(canonical);
        } else if (alg == kAlgHmac) {
            digest = core::hmac_sha256(hmac_key(), canonical);
        } else {
            throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "unsupported fingerprint algorithm \"" + alg + "\"",
                           "This version of opledger computes jcs-sha256/1 and jcs-hmac-sha256/1 only.");
        }
        return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
    }

    // The stored form of the arguments: canonical, with redact paths replaced.
    std::string stored_text(const core::Document& doc) const {
        core::WriteOptions options;
        if (!redact.empty()) options.redact = &redact;
        return doc.canonical(options);
    }
};

// Writing a transition
void notify(const Row& row);
void add_counters(const std::string& tool, Status before, Status after, const Change& change);
Written write(const Row& row, Status before, const Change& change, TimestampTz now);

// Returning rows
// A column of the written row by name. `*hint` is where to look first (0-based, -1
// for nowhere) and is set to where the column was found: a caller that keeps it
// between calls finds the column at once.
Value returned_column(const Written& w, const char* name, int* hint);
// The function's declared composite result type, blessed (call before SPI_connect).
TupleDesc result_descriptor(FunctionCallInfo fcinfo);
// Values of the written operations row laid out for `target` (the operations row
// type, possibly with dropped columns).
void operations_values(const Written& w, TupleDesc target, Datum* values, bool* nulls);
Datum return_tuple(TupleDesc desc, Datum* values, bool* nulls);
Datum return_operations_row(const Written& w, TupleDesc desc);

// The one way an operation becomes failed: final, no retry time, counted once.
void become_failed(Row& row, Change& change, TimestampTz now);
// Lease expiry (shared by op_begin and op_sweep).
Written expire_lease(Row& row, const Policy& policy, TimestampTz now, const char* noticed_by, Value worker);
bool lease_expired(const Row& row, TimestampTz now);

// Reading and locking one operation row
std::optional<Row> fetch_row(PlanId plan, Datum operation_id);
std::optional<Row> lock_row(Datum operation_id);
Row lock_existing(Datum operation_id, const std::string& id, const char* function);

// Checks shared by the reports
bool same_jsonb(const Value& a, const Value& b);
void check_fence(const Row& row, std::optional<int> attempt, const char* function, const std::string& id);
[[noreturn]] void wrong_state(const char* function, const std::string& id, const Row& row, const char* allowed);

}  // namespace opledger::pg::ledger
