// Stable storage for unescaped strings and canonical numbers that cannot be views
// into the input. Blocks never move, so pointers into them stay valid.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

class Arena {
public:
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

private:
    static constexpr std::size_t kBlockSize = 64 * 1024;

    void grow(std::size_t size) {
        const std::size_t block = size > kBlockSize ? size : kBlockSize;
        blocks_.push_back(std::make_unique<char[]>(block));
        cursor_ = blocks_.back().get();
        remaining_ = block;
    }

    std::vector<std::unique_ptr<char[]>> blocks_;
    char* cursor_ = nullptr;
    std::size_t remaining_ = 0;
};

}  // namespace opledger::core::detail
