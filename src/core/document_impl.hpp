// Private layout of a Document: one flat tape of nodes in document order.
//
//   object node, then per member (input order): key node, value subtree
//   array node, then its element subtrees
//
// Each object also owns a slice of `members`: the tape indices of its key nodes
// sorted in RFC 8785 order (sorted once while building, which also exposes
// duplicate names as neighbours), so writing is a linear walk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.hpp"
#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core::detail {

enum class NodeType : std::uint8_t { null_value, false_value, true_value, number, string, key, array, object };

struct Node {
    union {
        const char* data;          // number/string/key: bytes (canonical number, unescaped string)
        std::size_t first_member;  // object: start of its slice in Document::Impl::members
    };
    std::size_t size;  // number/string/key: byte length; array/object: element/member count
    union {
        std::size_t end;            // array/object: tape index one past the subtree
        std::size_t source_offset;  // key: byte offset in the text (for duplicate errors)
    };
    NodeType type;
    bool needs_escape;  // string/key: holds '"', '\\' or a control and must be escaped

    std::string_view text() const { return {data, size}; }
};

inline bool is_container(NodeType type) { return type == NodeType::array || type == NodeType::object; }

}  // namespace opledger::core::detail

namespace opledger::core {

struct Document::Impl {
    std::vector<detail::Node> tape;
    std::vector<std::size_t> members;
    detail::Arena arena;
    std::string owned_text;  // the text that string views point into, when owned

    std::size_t next_sibling(std::size_t index) const {
        const detail::Node& node = tape[index];
        return detail::is_container(node.type) ? node.end : index + 1;
    }
};

}  // namespace opledger::core

namespace opledger::core::detail {

// Appends nodes to a Document::Impl; shared by the text parser and DocumentBuilder
// so both produce identical documents.
class TapeWriter {
public:
    explicit TapeWriter(Document::Impl& doc) : doc_(doc) {}

    void scalar(NodeType type, const char* data = nullptr, std::size_t size = 0, bool needs_escape = false) {
        Node node;
        node.data = data;
        node.size = size;
        node.end = doc_.tape.size() + 1;
        node.type = type;
        node.needs_escape = needs_escape;
        doc_.tape.push_back(node);
    }

    void key(const char* data, std::size_t size, bool needs_escape, std::size_t source_offset) {
        pending_keys_.push_back(doc_.tape.size());
        Node node;
        node.data = data;
        node.size = size;
        node.source_offset = source_offset;
        node.type = NodeType::key;
        node.needs_escape = needs_escape;
        doc_.tape.push_back(node);
    }

    // Returns the tape index of the new container.
    std::size_t open(NodeType type) {
        Node node;
        node.first_member = 0;
        node.size = 0;
        node.end = 0;
        node.type = type;
        node.needs_escape = false;
        doc_.tape.push_back(node);
        return doc_.tape.size() - 1;
    }

    void close_array(std::size_t index, std::size_t count) {
        Node& node = doc_.tape[index];
        node.size = count;
        node.end = doc_.tape.size();
    }

    // Sorts the object's keys; throws JsonError(invalid_text) on a duplicate name
    // (with the later key's offset when has_offsets).
    void close_object(std::size_t index, std::size_t count, bool has_offsets);

private:
    Document::Impl& doc_;
    std::vector<std::size_t> pending_keys_;  // keys of all open objects, innermost last
};

// Appends the JSON string literal of raw UTF-8 (quotes and RFC 8785 escapes).
void append_quoted(std::string& out, std::string_view utf8, bool needs_escape);

// True when utf8 contains a byte that the canonical form must escape.
bool needs_escaping(std::string_view utf8) noexcept;

}  // namespace opledger::core::detail
