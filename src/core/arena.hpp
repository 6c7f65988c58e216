// Stable storage for unescaped strings and canonical numbers that cannot be views
// into the input. Blocks never move, so pointers into them stay valid. Every block
// comes from a caller-chosen memory_resource (a PostgreSQL memory context in the
// extension), and reset() keeps the blocks so a reused workspace does not touch
// fresh pages on the next call.
#pragma once

#include <cstddef>
#include <memory_resource>
#include <vector>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

class Arena {
public:
    explicit Arena(std::pmr::memory_resource* resource = std::pmr::get_default_resource())
        : resource_(resource), blocks_(resource) {}
    ~Arena() { release(); }
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    char* allocate(std::size_t size) {
        if (size > remaining_) grow(size);
        char* result = cursor_;
        cursor_ += size;
        remaining_ -= size;
        return result;
    }

    // Returns the unused tail of the latest allocation (it must be the last one).
    void give_back(std::size_t unused) {
        cursor_ -= unused;
        remaining_ += unused;
    }

    // Forgets the contents but keeps the blocks for reuse.
    void reset() {
        next_block_ = 0;
        cursor_ = nullptr;
        remaining_ = 0;
    }

    // Gives every block back to the resource.
    void release() noexcept {
        for (const Block& block : blocks_) resource_->deallocate(block.data, block.size, 1);
        blocks_.clear();
        blocks_.shrink_to_fit();
        reset();
    }

    std::size_t retained_bytes() const noexcept {
        std::size_t total = blocks_.capacity() * sizeof(Block);
        for (const Block& block : blocks_) total += block.size;
        return total;
    }

private:
    static constexpr std::size_t kBlockSize = 64 * 1024;

    struct Block {
        char* data;
        std::size_t size;
    };

    void grow(std::size_t size) {
        // Reuse a kept block when it is big enough; skipped (too small) ones stay for later calls.
        while (next_block_ < blocks_.size()) {
            const Block& block = blocks_[next_block_++];
            if (block.size >= size) return use(block);
        }
        const std::size_t bytes = size > kBlockSize ? size : kBlockSize;
        blocks_.reserve(blocks_.size() + 1);  // so a failing push cannot leak the new block
        blocks_.push_back(Block{static_cast<char*>(resource_->allocate(bytes, 1)), bytes});
        next_block_ = blocks_.size();
        use(blocks_.back());
    }

    void use(const Block& block) {
        cursor_ = block.data;  // not zeroed: every byte is written before use
        remaining_ = block.size;
    }

    std::pmr::memory_resource* resource_;
    std::pmr::vector<Block> blocks_;
    std::size_t next_block_ = 0;  // blocks before this one are in use since reset()
    char* cursor_ = nullptr;
    std::size_t remaining_ = 0;
};

}  // namespace opledger::core::detail
