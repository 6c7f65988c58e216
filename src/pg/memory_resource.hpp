// Memory for the C++ core that outlives a call lives in a PostgreSQL memory context:
// a std::pmr::memory_resource over a context, and the backend's reusable core
// Workspace built on it (visible as "opledger workspace" in pg_backend_memory_contexts).
#pragma once

#include <cstddef>
#include <memory_resource>

#include "core/jcs.hpp"
#include "pg/pg_headers.hpp"

namespace opledger::pg {

// Allocates from a memory context without ever raising an ereport: a failed
// allocation becomes std::bad_alloc, which the SQL entry guard turns into 53200.
class MemoryContextResource final : public std::pmr::memory_resource {
public:
    explicit MemoryContextResource(MemoryContext context) noexcept : context_(context) {}

private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override;
    void do_deallocate(void* pointer, std::size_t bytes, std::size_t alignment) override;
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

    MemoryContext context_;
};

// Memory for the Documents of one SQL call (jsonb input of the jcs functions): a
// bump allocator over a block kept in the workspace's memory context, emptied when
// the outermost DocumentMemoryLoan ends. Allocation is a pointer bump and nothing
// is freed one by one, which made reading small jsonb values ~15% cheaper than
// malloc/free. Documents built on it must not outlive the loan.
class DocumentMemoryLoan {
public:
    DocumentMemoryLoan();
    ~DocumentMemoryLoan();
    DocumentMemoryLoan(const DocumentMemoryLoan&) = delete;
    DocumentMemoryLoan& operator=(const DocumentMemoryLoan&) = delete;
    std::pmr::memory_resource* get() noexcept { return memory_; }

private:
    std::pmr::memory_resource* memory_;
};

// The backend's workspace for canonicalising JSON text; created on first use.
// Between calls it keeps at most kWorkspaceKeepBytes.
core::Workspace& backend_workspace();

// Lends the backend workspace for one call; gives back what it holds beyond its
// keep size when the call ends, normally or by an exception.
class WorkspaceLoan {
public:
    WorkspaceLoan() : workspace_(backend_workspace()) {}
    ~WorkspaceLoan();
    WorkspaceLoan(const WorkspaceLoan&) = delete;
    WorkspaceLoan& operator=(const WorkspaceLoan&) = delete;
    core::Workspace& get() noexcept { return workspace_; }

private:
    core::Workspace& workspace_;
};

}  // namespace opledger::pg
