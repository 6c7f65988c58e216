// Private layout of a Document: one flat tape of nodes in document order.
//
//   object node, then per member (input order): key node, value subtree
//   array node, then its element subtrees
//
// Each object also owns a slice of `members`: the tape indices of its key nodes
// sorted in RFC 8785 order (sorted once while building, which also exposes
// duplicate names as neighbours), so writing is a linear walk.
//
// Sizes and indices are 32-bit so a node is 16 bytes (half the cache and memory
// traffic of a pointer-sized layout); inputs of 4 GiB or more are rejected up front
// (PostgreSQL values are below 1 GB anyway).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <string>
#include <string_view>
#include <vector>

#include "core/arena.hpp"
#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core::detail {

// Largest input (text bytes, string bytes, node count) that 32-bit fields can index.
constexpr std::size_t kMaxInputBytes = 0xFFFFFFFEu;

// raw: only in write-only tapes (ParseMode::write_only), never in a Document: JSON
// text that already is canonical (a number, a literal, a string with its quotes and
// canonical escapes), which the writer copies verbatim.
enum class NodeType : std::uint8_t { null_value, false_value, true_value, number, string, key, array, object, raw };

struct ContainerLinks {
    std::uint32_t first_member;  // object: start of its slice in Document::Impl::members
    std::uint32_t end;           // array/object: tape index one past the subtree
};

struct Node {
    // Uninitialised: emplace_back() would otherwise zero each node right before
    // every field is stored (TapeWriter fills all of them).
    Node() noexcept {}

    union {
        const char* data;  // number/string/key: bytes (canonical number, unescaped string)
        ContainerLinks container;
    };
    std::uint32_t size;  // number/string/key: byte length; array/object: element/member count
    NodeType type;
    // string/key: the bytes hold '"', '\\' or a control and must be escaped when written.
    // False also for a string value that the write-only parse left in its (already
    // canonical) escaped input form: the writer copies it verbatim.
    bool needs_escape;

    std::string_view text() const { return {data, size}; }
};
static_assert(sizeof(Node) == 16, "the tape layout relies on 16-byte nodes");

inline bool is_container(NodeType type) { return type == NodeType::array || type == NodeType::object; }

// A member name of an object still being built: its first 8 bytes big-endian, so
// most comparisons while sorting are one integer compare without touching the tape.
struct PendingKey {
    PendingKey() noexcept {}  // uninitialised, as Node: every field is stored right after
    std::uint64_t prefix;
    std::uint32_t node;
    std::uint32_t source_offset;  // text parser: byte offset of the name (duplicate errors)
};

}  // namespace opledger::core::detail

namespace opledger::core {

struct Document::Impl {
    explicit Impl(std::pmr::memory_resource* resource = std::pmr::get_default_resource())
        : tape(resource), members(resource), arena(resource), pending_keys(resource) {}

    std::pmr::vector<detail::Node> tape;
    std::pmr::vector<std::uint32_t> members;
    detail::Arena arena;
    std::pmr::vector<detail::PendingKey> pending_keys;  // while building: keys of all open objects
    std::string owned_text;     // the text that string views point into, when owned
    std::size_t size_hint = 0;  // expected canonical size, to reserve the output once

    std::size_t next_sibling(std::size_t index) const {
        const detail::Node& node = tape[index];
        return detail::is_container(node.type) ? node.container.end : index + 1;
    }

    // Empties the document but keeps every buffer for the next use.
    void reset() {
        tape.clear();
        members.clear();
        arena.reset();
        pending_keys.clear();
        size_hint = 0;
    }
};

}  // namespace opledger::core

namespace opledger::core::detail {

// Appends nodes to a Document::Impl; shared by the text parser and DocumentBuilder
// so both produce identical documents.
class TapeWriter {
public:
    explicit TapeWriter(Document::Impl& doc) : doc_(doc) {}

    // Nodes are filled in place: building one on the stack and copying it made the
    // CPU reload halves of freshly stored fields (a store-forwarding stall).
    void scalar(NodeType type, const char* data = nullptr, std::size_t size = 0, bool needs_escape = false) {
        Node& node = doc_.tape.emplace_back();
        node.data = data;
        node.size = static_cast<std::uint32_t>(size);
        node.type = type;
        node.needs_escape = needs_escape;
    }

    // readable_before: how many bytes before data may be read (the text parser knows
    // its buffer), which lets a short name's prefix come from one 8-byte load.
    void key(const char* data, std::size_t size, bool needs_escape, std::size_t source_offset,
             std::size_t readable_before = 0) {
        // Filled in place: a temporary built from 8- and 4-byte stores and copied with
        // one 16-byte load defeats store forwarding (it cost a fifth of parse time).
        PendingKey& pending = doc_.pending_keys.emplace_back();
        pending.prefix = key_prefix(data, size, readable_before);
        pending.node = static_cast<std::uint32_t>(doc_.tape.size());
        pending.source_offset = static_cast<std::uint32_t>(source_offset);
        scalar(NodeType::key, data, size, needs_escape);
    }

    // Returns the tape index of the new container.
    std::size_t open(NodeType type) {
        Node& node = doc_.tape.emplace_back();
        node.data = nullptr;
        node.size = 0;
        node.type = type;
        node.needs_escape = false;
        return doc_.tape.size() - 1;
    }

    void close_array(std::size_t index, std::size_t count) {
        Node& node = doc_.tape[index];
        node.size = static_cast<std::uint32_t>(count);
        node.container.end = static_cast<std::uint32_t>(doc_.tape.size());
    }

    // Sorts the object's keys; throws JsonError(invalid_text) on a duplicate name
    // (with the later key's offset when has_offsets).
    void close_object(std::size_t index, std::size_t count, bool has_offsets);

    // The first 8 bytes of a name as a big-endian integer (zero-padded), with lead
    // bytes >= 0xEE remapped so that integer order is UTF-16 order: supplementary
    // characters (lead 0xF0..0xF4, surrogate pairs in UTF-16) sort before U+E000..U+FFFF
    // (lead 0xEE/0xEF). Bytes >= 0xEE are always lead bytes, and two names first
    // differ at the same kind of byte, so remapping bytes keeps the comparison exact.
    // Equal prefixes say nothing (padding vs a real NUL byte): compare the names then.
    static std::uint64_t key_prefix(const char* data, std::size_t size, std::size_t readable_before = 0) {
        std::uint64_t prefix = 0;
        if (size >= 8) {
            __builtin_memcpy(&prefix, data, 8);
            prefix = __builtin_bswap64(prefix);
        } else if (size != 0 && size + readable_before >= 8) {
            // The 8 bytes ending at the name's end: after the byte swap the name is in
            // the low `size` bytes; shifting moves it to the top and zero-fills below.
            __builtin_memcpy(&prefix, data + size - 8, 8);
            prefix = __builtin_bswap64(prefix) << (8 * (8 - size));
        } else {
            for (std::size_t i = 0; i < size; ++i)
                prefix |= std::uint64_t{static_cast<unsigned char>(data[i])} << (56 - 8 * i);
        }
        if ((prefix & 0x8080808080808080ULL) == 0) return prefix;  // ASCII: the usual case
        std::uint64_t mapped = 0;
        for (int shift = 56; shift >= 0; shift -= 8) {
            unsigned byte = static_cast<unsigned>(prefix >> shift) & 0xFF;
            if (byte >= 0xF0) byte -= 2;       // 0xF0..0xF4 -> 0xEE..0xF2
            else if (byte >= 0xEE) byte += 5;  // 0xEE..0xEF -> 0xF3..0xF4
            mapped |= std::uint64_t{byte} << shift;
        }
        return mapped;
    }

private:
    // Order of the names of recently sorted small objects, by their prefixes in input
    // order: arrays of same-shaped objects (transcripts, rows, tool calls) then cost
    // one prefix comparison per member instead of a sort full of mispredicted branches.
    // Only shapes with distinct prefixes are kept, so a hit also proves no duplicates.
    static constexpr std::size_t kMaxShapeMembers = 8;
    static constexpr std::size_t kShapeSlots = 16;
    struct Shape {
        std::uint32_t count = 0;  // 0: empty slot
        std::uint8_t order[kMaxShapeMembers];  // sorted position i holds input key order[i]
        std::uint64_t prefixes[kMaxShapeMembers];  // in input order
    };
    static std::size_t shape_slot(const PendingKey* keys, std::size_t count) {
        const std::uint64_t mixed = (keys[0].prefix ^ (keys[count - 1].prefix >> 7)) * 0x9E3779B97F4A7C15ULL + count;
        return static_cast<std::size_t>(mixed >> 60) % kShapeSlots;
    }
    const std::uint8_t* known_shape_order(const PendingKey* keys, std::size_t count) const;
    void finish_object(std::size_t index, std::size_t count, const std::uint8_t* order);
    void remember_shape(const PendingKey* input, const PendingKey* sorted, std::size_t count);

    Document::Impl& doc_;
    Shape shapes_[kShapeSlots];
};

// Appends the JSON string literal of raw UTF-8 (quotes and RFC 8785 escapes).
void append_quoted(std::string& out, std::string_view utf8, bool needs_escape);

// True when utf8 contains a byte that the canonical form must escape.
bool needs_escaping(std::string_view utf8) noexcept;

}  // namespace opledger::core::detail
