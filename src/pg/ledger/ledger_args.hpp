// Arguments of the op_* functions and the errors they raise. Validation happens
// before anything is read or written, so a bad argument changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/ledger/bounds.hpp"
#include "core/ledger/state_machine.hpp"
#include "pg/ledger/ledger_sql.hpp"
#include "pg/sqlstates.hpp"

namespace opledger::pg::ledger {

// The SQLSTATEs and the text bounds have one definition each (core/ledger/bounds.hpp).
using opledger::pg::kOL001;
using opledger::pg::kOL002;
using opledger::pg::kOL003;
using core::ledger::kMaxOperationIdBytes;
using core::ledger::kMaxToolBytes;
using core::ledger::kMaxConversationIdBytes;
using core::ledger::kMaxWorkerBytes;
using core::ledger::kMaxProviderRefBytes;
using core::ledger::kMaxNoteBytes;
// Leases (op_begin's and the reconcilers' claims) and the limits of housekeeping.
inline constexpr int64_t kMaxLeaseUs = 7LL * 24 * 3600 * 1000000;
inline constexpr int kMaxSweepRows = 100000;
inline constexpr int kMaxClaimRows = 1000;

[[noreturn]] void invalid_parameter(const std::string& message, const std::string& detail = {},
                                    const std::string& hint = {});
// The state machine's refusal as the SQL error: OL001 for a reuse, OL002 otherwise.
// extra_detail (the differing JSON Pointers of a reuse) comes before its own detail.
[[noreturn]] void raise_refusal(const core::ledger::Refusal& refusal, const std::string& extra_detail = {});
// OL002 for an operation ID that has no operation.
[[noreturn]] void raise_no_operation(const char* function);

void require_not_null(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
// A required, non-empty name argument of at most max_bytes (operation_id, tool,
// worker, approver).
std::string name_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name,
                     std::size_t max_bytes);
// An optional text argument of at most max_bytes: the Datum and its bytes.
struct TextArg {
    Value datum;
    std::optional<std::string> text;
};
TextArg optional_text_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name,
                          std::size_t max_bytes);
// An optional attempt (fencing token); must be positive when given.
std::optional<int> attempt_arg(FunctionCallInfo fcinfo, int argno, const char* function);
// A positive integer argument of at most max (max_rows).
int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name, int max);
// A lease: positive and at most kMaxLeaseUs.
int64_t lease_arg(FunctionCallInfo fcinfo, int argno, const char* function);
// An interval as microseconds (months count as 30 days; saturates).
int64_t interval_us(const Interval* span);
// A detoasted jsonb argument, checked against opledger.max_payload_bytes.
Value jsonb_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);

}  // namespace opledger::pg::ledger
