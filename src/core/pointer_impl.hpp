// Private form of a PointerSet: a trie of unescaped RFC 6901 reference tokens.
// Nodes live in a deque (stable addresses, no recursive destruction however long
// a pointer is).
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core::detail {

struct PointerTrie {
    bool terminal = false;  // a pointer of the set ends here
    std::map<std::string, const PointerTrie*, std::less<>> children;
    const PointerTrie* any = nullptr;  // the "*" token: every member or element

    const PointerTrie* child(std::string_view token) const {
        if (any != nullptr) return any;
        if (children.empty()) return nullptr;
        const auto found = children.find(token);
        return found == children.end() ? nullptr : found->second;
    }
    // Array index tokens are decimal without leading zeros (RFC 6901 §4), which is
    // exactly std::to_string's output, so "01" or "-" never match an element.
    const PointerTrie* element(std::size_t index) const {
        if (any != nullptr) return any;
        return children.empty() ? nullptr : child(std::to_string(index));
    }
};

// RFC 6901 string form of a path of unescaped tokens ("~" -> "~0", "/" -> "~1").
void append_pointer_token(std::string& pointer, std::string_view token);

std::vector<std::string> diff_documents(const Document::Impl& a, const Document::Impl& b,
                                        const PointerTrie* ignore, std::size_t max_pointers);

}  // namespace opledger::core::detail

namespace opledger::core {

struct PointerSet::Impl {
    std::deque<detail::PointerTrie> nodes;  // nodes[0] is the root
};

}  // namespace opledger::core
