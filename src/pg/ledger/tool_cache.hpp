// Tool policies cached per backend, so that op_begin needs no statement to learn
// its tool's policy. Any change to opledger.tools (register_tool, or direct DML by
// the owner) fires the statement trigger opledger._tools_changed, which drops this
// backend's cache at once and sends a relcache invalidation of the table at
// commit; every other backend drops its cache when that message arrives (at the
// start of its next transaction, or its next lock acquisition).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pg/ledger/ledger_policy.hpp"

namespace opledger::pg::ledger {

// The cached policy of tool, if any. Processes pending invalidation messages first.
std::optional<ToolPolicy> find_cached_policy(const std::string& tool);

// Changes whenever the cache is dropped: take it before loading a policy and pass
// it to remember_policy, so that a policy read before a concurrent change (whose
// invalidation arrived during the load) is never cached.
std::uint64_t policy_cache_generation();
void remember_policy(const std::string& tool, const ToolPolicy& policy, std::uint64_t generation);

}  // namespace opledger::pg::ledger
