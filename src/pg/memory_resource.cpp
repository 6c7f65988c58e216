#include "pg/memory_resource.hpp"

#include <cstdint>
#include <new>

#include "pg/boundary.hpp"

namespace opledger::pg {
namespace {

// Enough for ~1 MB documents to be canonicalised again and again without fresh pages;
// larger documents give their extra memory back after the call.
constexpr std::size_t kWorkspaceKeepBytes = 8 * 1024 * 1024;

core::Workspace* workspace = nullptr;

}  // namespace

void* MemoryContextResource::do_allocate(std::size_t bytes, std::size_t alignment) {
    // palloc only promises MAXALIGN: over-allocate, align, and keep the raw pointer
    // just below the aligned block so that deallocate can find it.
    const std::size_t total = bytes + alignment + sizeof(void*);
    if (bytes > MaxAllocHugeSize / 2 || total > MaxAllocHugeSize) throw std::bad_alloc();
    auto* raw = static_cast<char*>(MemoryContextAllocExtended(context_, total, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM));
    if (raw == nullptr) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw + sizeof(void*));
    const std::uintptr_t aligned = (start + alignment - 1) & ~(static_cast<std::uintptr_t>(alignment) - 1);
    reinterpret_cast<void**>(aligned)[-1] = raw;
    return reinterpret_cast<void*>(aligned);
}

void MemoryContextResource::do_deallocate(void* pointer, std::size_t, std::size_t) {
    pfree(static_cast<void**>(pointer)[-1]);
}

core::Workspace& backend_workspace() {
    if (workspace != nullptr) return *workspace;
    // Everything lives for the backend's lifetime in one context of its own.
    MemoryContext context = pg_call([] {
        return AllocSetContextCreate(TopMemoryContext, "opledger workspace", ALLOCSET_DEFAULT_SIZES);
    });
    void* resource_memory = MemoryContextAllocExtended(context, sizeof(MemoryContextResource), MCXT_ALLOC_NO_OOM);
    void* workspace_memory = MemoryContextAllocExtended(context, sizeof(core::Workspace), MCXT_ALLOC_NO_OOM);
    if (resource_memory == nullptr || workspace_memory == nullptr) {
        MemoryContextDelete(context);
        throw std::bad_alloc();
    }
    auto* resource = new (resource_memory) MemoryContextResource(context);
    try {
        workspace = new (workspace_memory) core::Workspace(resource);
    } catch (...) {
        MemoryContextDelete(context);
        throw;
    }
    return *workspace;
}

WorkspaceLoan::~WorkspaceLoan() { workspace_.trim(kWorkspaceKeepBytes); }

}  // namespace opledger::pg
