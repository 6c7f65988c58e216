// The ledger's bounds and error codes: the one definition of each. The C++ layers
// use these constants; the SQL fragments (CHECK constraints, set_role_tenant), the
// documentation's tables and the clients' error maps are checked against them by
// tests/unit/bounds_test.cpp, which fails when a copy disagrees.
//
// Every text bound is in bytes. Each keeps every index entry that holds the value far
// below PostgreSQL's limit of about 2.7 kB, so no value can make a write fail for
// reasons of size or stop op_sweep.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace opledger::core::ledger {

inline constexpr std::size_t kMaxOperationIdBytes = 1024;
inline constexpr std::size_t kMaxToolBytes = 256;
inline constexpr std::size_t kMaxConversationIdBytes = 1024;
inline constexpr std::size_t kMaxWorkerBytes = 256;  // worker, resolver, approver
inline constexpr std::size_t kMaxProviderRefBytes = 512;
inline constexpr std::size_t kMaxNoteBytes = 4096;
inline constexpr std::size_t kMaxTenantBytes = 256;
// The fingerprint key (opledger.hmac_key.secret): HMAC-SHA-256's block-sized
// strength, made by opledger._random_secret().
inline constexpr std::size_t kHmacKeyBytes = 32;

// One text argument's bound as the documentation states it: "min to max bytes" when
// the value may not be empty, "at most max bytes" otherwise.
struct TextBound {
    std::string_view argument;
    std::size_t min_bytes;
    std::size_t max_bytes;
};
inline constexpr std::array<TextBound, 8> kTextBounds = {{
    {"operation_id", 1, kMaxOperationIdBytes},
    {"tool", 1, kMaxToolBytes},
    {"conversation_id", 0, kMaxConversationIdBytes},
    {"worker", 0, kMaxWorkerBytes},
    {"provider_ref", 0, kMaxProviderRefBytes},
    {"resolver", 0, kMaxWorkerBytes},
    {"note", 0, kMaxNoteBytes},
    {"tenant", 1, kMaxTenantBytes},
}};

// The SQLSTATEs of the SQL contract (class OL, "opledger").
inline constexpr char kSqlstateReuse[] = "OL001";         // an operation ID reused with other arguments or tool
inline constexpr char kSqlstateTransition[] = "OL002";    // the call does not apply to the operation
inline constexpr char kSqlstateUnregistered[] = "OL003";  // op_begin of a tool that is not registered
// (clients/typescript/src/errors.ts and clients/python/opledger_client/errors.py map
// these to their typed errors.)

}  // namespace opledger::core::ledger
