// Private pieces shared by the parser, the writer and Workspace: the explicit
// stacks that keep parsing and writing iterative, and the workspace that owns
// reusable buffers for all of them (every buffer from the caller's memory_resource).
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <memory_resource>
#include <vector>

#include "core/document_impl.hpp"
#include "core/jcs.hpp"
#include "core/no_postgres.hpp"
#include "core/output_sink.hpp"
#include "core/pointer_impl.hpp"
#include "core/sha256_blocks.hpp"

namespace opledger::core::detail {

// An array/object the text parser has opened but not closed.
struct ParseFrame {
    std::uint32_t node;
    std::uint32_t count;
    bool is_object;
};

// An array/object the writer is inside of.
struct WriteFrame {
    std::uint32_t node;
    std::uint32_t position;    // members/elements done so far
    std::uint32_t next_child;  // arrays: tape index of the next element
    bool wrote_any;
};

// How much of the parse result will be used. write_only lets string values keep
// their input spelling when it already is the canonical escaped form (no unescape
// now, no re-escape later); such a tape must only be written, never inspected.
enum class ParseMode { document, write_only };

// Parses text into doc (reset first) without copying it: string views point into text.
void parse_text_into(Document::Impl& doc, std::string_view text, const ParseLimits& limits,
                     std::pmr::vector<ParseFrame>& stack, ParseMode mode);

// Writes the canonical form of doc into sink (not flushed).
void write_document(const Document::Impl& doc, OutputSink& sink, std::pmr::vector<WriteFrame>& stack,
                    const PointerTrie* exclude, const PointerTrie* redact);

}  // namespace opledger::core::detail

namespace opledger::core {

struct Workspace::Impl {
    // Staging buffer of the writer: big enough that SHA-256 gets efficient updates,
    // small enough to stay in L1/L2 while it is refilled.
    static constexpr std::size_t kChunkBytes = 32 * 1024;

    explicit Impl(std::pmr::memory_resource* resource)
        : upstream(resource), doc(resource), parse_stack(resource), write_stack(resource) {}
    ~Impl() {
        release_chunk();
    }
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    // The staging buffer for an input of text_size bytes: small inputs get a small
    // one (raw memory, not a vector, so it is never zero-filled).
    char* chunk_for(std::size_t text_size) {
        const std::size_t wanted = std::min(kChunkBytes, std::max(text_size, detail::OutputSink::kMinCapacity));
        if (chunk_size < wanted) {
            release_chunk();
            chunk = static_cast<char*>(upstream->allocate(wanted, 1));
            chunk_size = wanted;
        }
        return chunk;
    }
    void release_chunk() noexcept {
        if (chunk) upstream->deallocate(chunk, chunk_size, 1);
        chunk = nullptr;
        chunk_size = 0;
    }

    std::pmr::memory_resource* upstream;
    Document::Impl doc;
    std::pmr::vector<detail::ParseFrame> parse_stack;
    std::pmr::vector<detail::WriteFrame> write_stack;
    char* chunk = nullptr;
    std::size_t chunk_size = 0;
    detail::Sha256Blocks sha256_blocks;  // canonical_sha256_text's digest (no allocation)
};

}  // namespace opledger::core
