// Arguments of the op_* functions and the errors they raise. Validation happens
// before anything is read or written, so a bad argument changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/ledger/state_machine.hpp"
#include "pg/ledger/ledger_sql.hpp"

namespace opledger::pg::ledger {

inline constexpr int kOL001 = MAKE_SQLSTATE('O', 'L', '0', '0', '1');
inline constexpr int kOL002 = MAKE_SQLSTATE('O', 'L', '0', '0', '2');
inline constexpr int kOL003 = MAKE_SQLSTATE('O', 'L', '0', '0', '3');
inline constexpr std::size_t kMaxNameBytes = 1024;

[[noreturn]] void invalid_parameter(const std::string& message, const std::string& detail = {},
                                    const std::string& hint = {});
// The state machine's refusal as the SQL error: OL001 for a reuse, OL002 otherwise.
// extra_detail (the differing JSON Pointers of a reuse) comes before its own detail.
[[noreturn]] void raise_refusal(const core::ledger::Refusal& refusal, const std::string& extra_detail = {});
// OL002 for an operation ID that has no operation.
[[noreturn]] void raise_no_operation(const char* function);

void require_not_null(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
// A required, non-empty name argument of at most kMaxNameBytes (operation_id, tool,
// worker, approver).
std::string name_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
// An optional text argument: the Datum and its bytes.
struct TextArg {
    Value datum;
    std::optional<std::string> text;
};
TextArg optional_text_arg(FunctionCallInfo fcinfo, int argno);
// An optional attempt (fencing token); must be positive when given.
std::optional<int> attempt_arg(FunctionCallInfo fcinfo, int argno, const char* function);
// A positive integer argument (max_rows).
int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);
// An interval as microseconds (months count as 30 days; saturates).
int64_t interval_us(const Interval* span);
// A detoasted jsonb argument, checked against opledger.max_payload_bytes.
Value jsonb_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name);

}  // namespace opledger::pg::ledger
