// Document lifetime, writing entry points and the object-closing step shared by
// the parser and the builder (sorting members, rejecting duplicate names).
#include <algorithm>
#include <optional>

#include "core/document_impl.hpp"
#include "core/pointer_impl.hpp"
#include "core/sha256_stream.hpp"
#include "core/utf16_order.hpp"
#include "core/workspace_impl.hpp"

namespace opledger::core {

namespace detail {

namespace {

// RFC 8785 order of two pending keys: the prefixes (see TapeWriter::key_prefix)
// decide unless they are equal; then the full names do.
inline int compare_keys(const std::pmr::vector<Node>& tape, const PendingKey& a, const PendingKey& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix ? -1 : 1;
    return utf16_order(tape[a.node].text(), tape[b.node].text());
}

}  // namespace

// Inlined into close_object: the shape hit is the common path for arrays of objects.
[[gnu::always_inline]] inline const std::uint8_t* TapeWriter::known_shape_order(const PendingKey* keys,
                                                                                std::size_t count) const {
    const Shape& shape = shapes_[shape_slot(keys, count)];
    if (shape.count != count) return nullptr;
    for (std::size_t i = 0; i < count; ++i)
        if (keys[i].prefix != shape.prefixes[i]) return nullptr;
    return shape.order;
}

void TapeWriter::remember_shape(const PendingKey* input, const PendingKey* sorted, std::size_t count) {
    for (std::size_t i = 1; i < count; ++i)
        if (sorted[i - 1].prefix == sorted[i].prefix) return;  // order not decided by prefixes alone
    Shape& shape = shapes_[shape_slot(input, count)];
    shape.count = static_cast<std::uint32_t>(count);
    for (std::size_t i = 0; i < count; ++i) {
        shape.prefixes[i] = input[i].prefix;
        // Keys of one object have increasing tape indices in input order.
        std::uint8_t position = 0;
        for (std::size_t j = 0; j < count; ++j) position += input[j].node < sorted[i].node;
        shape.order[i] = position;
    }
}

void TapeWriter::close_object(std::size_t index, std::size_t count, bool has_offsets) {
    auto& keys = doc_.pending_keys;
    const auto begin = keys.end() - static_cast<std::ptrdiff_t>(count);
    const auto end = keys.end();
    const std::pmr::vector<Node>& tape = doc_.tape;
    const bool small = count >= 2 && count <= kMaxShapeMembers;
    if (small) {
        if (const std::uint8_t* order = known_shape_order(&*begin, count)) return finish_object(index, count, order);
    }
    PendingKey input[kMaxShapeMembers];
    if (small) std::copy(begin, end, input);
    // Tools often emit members already sorted (and most objects are small): one
    // strictly-increasing pass then proves both the order and the absence of duplicates.
    auto unsorted = begin;
    if (count > 1) {
        unsorted = end;
        for (auto it = begin + 1; it != end; ++it)
            if (compare_keys(tape, *(it - 1), *it) >= 0) {
                unsorted = it;
                break;
            }
    }
    if (unsorted != end && count > 1) {
        if (count <= 16) {  // insertion sort from the first out-of-order key: no call overhead
            for (auto it = unsorted; it != end; ++it) {
                const PendingKey moving = *it;
                auto hole = it;
                while (hole != begin && compare_keys(tape, moving, *(hole - 1)) < 0) {
                    *hole = *(hole - 1);
                    --hole;
                }
                *hole = moving;
            }
        } else {
            std::sort(begin, end, [&tape](const PendingKey& a, const PendingKey& b) {
                return compare_keys(tape, a, b) < 0;
            });
        }
        // compare_keys is 0 only for identical names, so duplicates end up adjacent.
        for (auto it = begin; it + 1 != end; ++it) {
            if (compare_keys(tape, *it, *(it + 1)) != 0) continue;
            const Node& first = tape[it->node];
            std::string quoted;
            append_quoted(quoted, first.text().substr(0, 200), first.needs_escape);
            std::optional<std::size_t> offset;
            if (has_offsets) offset = std::max(it->source_offset, (it + 1)->source_offset);
            throw JsonError(JsonErrorKind::invalid_text, "duplicate object member name " + quoted, offset);
        }
    }
    if (small) remember_shape(input, &*begin, count);
    finish_object(index, count, nullptr);
}

// Records the object's sorted member slice and drops its pending keys.
// order: the sorted order of the pending keys by input position, or null when
// they already are in sorted order. (Reading just the node fields, rather than
// moving whole 16-byte keys that were stored field by field, avoids a store-forwarding stall.)
void TapeWriter::finish_object(std::size_t index, std::size_t count, const std::uint8_t* order) {
    auto& keys = doc_.pending_keys;
    auto& members = doc_.members;
    const std::size_t first = keys.size() - count;
    const PendingKey* key = keys.data() + first;
    Node& node = doc_.tape[index];
    node.container.first_member = static_cast<std::uint32_t>(members.size());
    node.size = static_cast<std::uint32_t>(count);
    node.container.end = static_cast<std::uint32_t>(doc_.tape.size());
    if (order)
        for (std::size_t i = 0; i < count; ++i) members.push_back(key[order[i]].node);
    else
        for (std::size_t i = 0; i < count; ++i) members.push_back(key[i].node);
    keys.resize(first);
}

}  // namespace detail

Document::Document() : impl_(std::make_unique<Impl>()) {}
Document::Document(std::pmr::memory_resource* memory) : impl_(std::make_unique<Impl>(memory)) {}
Document::~Document() = default;
Document::Document(Document&&) noexcept = default;
Document& Document::operator=(Document&&) noexcept = default;

// A default-constructed or moved-from Document holds no value and writes nothing.
void Document::write_canonical(std::string& out, const WriteOptions& options) const {
    if (!impl_ || impl_->tape.empty()) return;
    out.reserve(out.size() + impl_->size_hint);
    write_to(detail::OutputSink::append_to_string, &out, options);
}

// Writes through a staging buffer on the stack (a Document has no workspace) into consume.
void Document::write_to(void (*consume)(void*, const char*, std::size_t), void* target,
                        const WriteOptions& options) const {
    if (!impl_ || impl_->tape.empty()) return;
    // Root of a pointer set's trie, or null for none/empty. Written inside a Document
    // member because only Document (PointerSet's friend) may look inside a PointerSet.
    const auto trie_root = [](const PointerSet* set) -> const detail::PointerTrie* {
        return set && set->impl_ ? &set->impl_->nodes.front() : nullptr;
    };
    // A small stack buffer: no allocation per call; big documents just flush more often.
    char buffer[4096];
    detail::OutputSink sink(buffer, sizeof buffer, consume, target);
    std::pmr::vector<detail::WriteFrame> stack;
    detail::write_document(*impl_, sink, stack, trie_root(options.exclude), trie_root(options.redact));
    sink.flush();
}

Sha256Digest canonical_sha256(const Document& document, const WriteOptions& options) {
    detail::Sha256Stream digest;
    document.write_to(detail::Sha256Stream::consume, &digest, options);
    return digest.finish();
}

std::string Document::canonical(const WriteOptions& options) const {
    std::string out;
    write_canonical(out, options);
    return out;
}

std::vector<std::string> Document::diff(const Document& a, const Document& b, const PointerSet* ignore,
                                        std::size_t max_pointers) {
    // Root of a pointer set's trie, or null for none/empty. Written inside a Document
    // member because only Document (PointerSet's friend) may look inside a PointerSet.
    const auto trie_root = [](const PointerSet* set) -> const detail::PointerTrie* {
        return set && set->impl_ ? &set->impl_->nodes.front() : nullptr;
    };
    static const Impl kEmpty;
    const Impl& left = a.impl_ ? *a.impl_ : kEmpty;
    const Impl& right = b.impl_ ? *b.impl_ : kEmpty;
    return detail::diff_documents(left, right, trie_root(ignore), max_pointers);
}

}  // namespace opledger::core
