// The opledger SQLSTATEs as PostgreSQL error codes, built from their one definition
// (core/ledger/bounds.hpp).
#pragma once

#include "core/ledger/bounds.hpp"

extern "C" {
#include "postgres.h"
}

namespace opledger::pg {

constexpr int sqlstate_code(const char (&code)[6]) {
    return MAKE_SQLSTATE(code[0], code[1], code[2], code[3], code[4]);
}

inline constexpr int kOL001 = sqlstate_code(core::ledger::kSqlstateReuse);
inline constexpr int kOL002 = sqlstate_code(core::ledger::kSqlstateTransition);
inline constexpr int kOL003 = sqlstate_code(core::ledger::kSqlstateUnregistered);

}  // namespace opledger::pg
