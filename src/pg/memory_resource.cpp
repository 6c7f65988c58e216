#include "pg/memory_resource.hpp"

#include <cstdint>
#include <new>

#include "pg/boundary.hpp"

namespace opledger::pg {
namespace {

// Enough for ~1 MB documents to be canonicalised again and again without fresh pages;
// larger documents give their extra memory back after the call.
constexpr std::size_t kWorkspaceKeepBytes = 8 * 1024 * 1024;

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

namespace {

// The block that one call's small Documents fit in; larger ones take more blocks
// from the memory context, given back when the loan ends.
constexpr std::size_t kDocumentBlockBytes = 256 * 1024;

// Everything that outlives a call lives in one context, for the backend's lifetime.
struct BackendMemory {
    MemoryContextResource context_memory;
    std::pmr::monotonic_buffer_resource document_memory;
    core::Workspace workspace;
    int document_loans = 0;

    BackendMemory(MemoryContext context, void* document_block)
        : context_memory(context),
          document_memory(document_block, kDocumentBlockBytes, &context_memory),
          workspace(&context_memory) {}
};

BackendMemory* backend_memory = nullptr;

BackendMemory& get_backend_memory() {
    if (backend_memory != nullptr) return *backend_memory;
    MemoryContext context = pg_call([] {
        return AllocSetContextCreate(TopMemoryContext, "opledger workspace", ALLOCSET_DEFAULT_SIZES);
    });
    void* memory = MemoryContextAllocExtended(context, sizeof(BackendMemory), MCXT_ALLOC_NO_OOM);
    void* document_block = MemoryContextAllocExtended(context, kDocumentBlockBytes, MCXT_ALLOC_NO_OOM);
    if (memory == nullptr || document_block == nullptr) {
        MemoryContextDelete(context);
        throw std::bad_alloc();
    }
    try {
        backend_memory = new (memory) BackendMemory(context, document_block);
    } catch (...) {
        MemoryContextDelete(context);
        throw;
    }
    return *backend_memory;
}

}  // namespace

core::Workspace& backend_workspace() { return get_backend_memory().workspace; }

DocumentMemoryLoan::DocumentMemoryLoan() {
    BackendMemory& memory = get_backend_memory();
    ++memory.document_loans;
    memory_ = &memory.document_memory;
}

DocumentMemoryLoan::~DocumentMemoryLoan() {
    if (--backend_memory->document_loans == 0) backend_memory->document_memory.release();
}

WorkspaceLoan::~WorkspaceLoan() { workspace_.trim(kWorkspaceKeepBytes); }

}  // namespace opledger::pg
