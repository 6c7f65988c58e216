#include "pg/ledger/tool_cache.hpp"

#include <memory_resource>
#include <new>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pg/boundary.hpp"
#include "pg/memory_resource.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "storage/sinval.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

namespace opledger::pg::ledger {
namespace {

// Unregistered tool names are cached too (require_registered_tools = off); the
// cap keeps a stream of made-up names from growing the cache without bound.
constexpr std::size_t kMaxCachedTools = 1024;

using PmrStrings = std::pmr::vector<std::pmr::string>;

// A ToolPolicy with its strings in the cache's memory context.
struct CachedPolicy {
    CachedPolicy(const ToolPolicy& p, std::pmr::memory_resource* memory)
        : rules(p.rules), hash_exclude(memory), redact(memory) {
        for (const std::string& s : p.hash_exclude) hash_exclude.emplace_back(s);
        for (const std::string& s : p.redact) redact.emplace_back(s);
    }
    ToolPolicy to_policy() const {
        ToolPolicy p;
        p.rules = rules;
        for (const auto& s : hash_exclude) p.hash_exclude.emplace_back(s);
        for (const auto& s : redact) p.redact.emplace_back(s);
        return p;
    }
    core::ledger::Policy rules;  // plain data
    PmrStrings hash_exclude, redact;
};

using PolicyMap = std::pmr::unordered_map<std::pmr::string, CachedPolicy>;

// Everything lives in the memory context "opledger tool cache" (a child of
// CacheMemoryContext), created on first use and kept for the backend's life.
struct ToolCache {
    explicit ToolCache(MemoryContext context) : resource(context), policies(&resource) {}
    MemoryContextResource resource;
    PolicyMap policies;
    Oid tools_relid = InvalidOid;  // opledger.tools when the cache was filled
    std::uint64_t generation = 1;
};

ToolCache* cache = nullptr;

void drop_all() noexcept {
    if (cache == nullptr) return;
    cache->policies.clear();  // frees into the context; nothing here can throw
    cache->tools_relid = InvalidOid;
    ++cache->generation;
}

// Relcache callback (called by PostgreSQL, C frames): InvalidOid means "all relations".
void on_relcache_invalidation(Datum, Oid relid) {
    if (cache != nullptr && (relid == InvalidOid || relid == cache->tools_relid)) drop_all();
}

ToolCache& get_cache() {
    if (cache != nullptr) return *cache;
    MemoryContext context = pg_call([] {
        return AllocSetContextCreate(CacheMemoryContext, "opledger tool cache", ALLOCSET_SMALL_SIZES);
    });
    void* memory = MemoryContextAllocExtended(context, sizeof(ToolCache), MCXT_ALLOC_NO_OOM);
    if (memory == nullptr) {
        MemoryContextDelete(context);
        throw std::bad_alloc();
    }
    cache = new (memory) ToolCache(context);  // constructors allocate nothing yet
    pg_call([] { CacheRegisterRelcacheCallback(on_relcache_invalidation, (Datum)0); });
    return *cache;
}

Oid tools_relid() {
    return pg_call([] {
        const Oid schema = get_namespace_oid("opledger", true);
        return OidIsValid(schema) ? get_relname_relid("tools", schema) : InvalidOid;
    });
}

}  // namespace

std::optional<ToolPolicy> find_cached_policy(const std::string& tool) {
    ToolCache& c = get_cache();
    pg_call([] { AcceptInvalidationMessages(); });
    const auto found = c.policies.find(std::pmr::string(tool, &c.resource));
    if (found == c.policies.end()) return std::nullopt;
    return found->second.to_policy();
}

std::uint64_t policy_cache_generation() { return get_cache().generation; }

void remember_policy(const std::string& tool, const ToolPolicy& policy, std::uint64_t generation) {
    ToolCache& c = get_cache();
    if (generation != c.generation) return;  // dropped while the policy was loaded
    if (c.tools_relid == InvalidOid) {
        c.tools_relid = tools_relid();
        if (c.tools_relid == InvalidOid) return;
    }
    if (c.policies.size() >= kMaxCachedTools) c.policies.clear();
    c.policies.emplace(std::piecewise_construct, std::forward_as_tuple(tool),
                       std::forward_as_tuple(policy, &c.resource));
}

namespace {

// AFTER ... FOR EACH STATEMENT trigger on opledger.tools.
Datum tools_changed(FunctionCallInfo fcinfo) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        throw SqlError(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, "opledger._tools_changed: not called as a trigger");
    const Oid relid = RelationGetRelid(reinterpret_cast<TriggerData*>(fcinfo->context)->tg_relation);
    drop_all();
    pg_call([relid] { CacheInvalidateRelcacheByRelid(relid); });
    return PointerGetDatum(nullptr);
}

}  // namespace
}  // namespace opledger::pg::ledger

OPLEDGER_SQL_FUNCTION(opledger_tools_changed, opledger::pg::ledger::tools_changed)
