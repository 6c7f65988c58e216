// Workspace: the reusable, caller-owned memory of the text entry points
// (canonicalize_text, canonical_sha256_text). Nothing is cached globally: without
// a workspace argument a call builds a local one and frees it on return.
#include <algorithm>
#include <utility>

#include "core/workspace_impl.hpp"

namespace opledger::core {
namespace {

template <typename T>
std::size_t capacity_bytes(const std::pmr::vector<T>& v) {
    return v.capacity() * sizeof(T);
}

// Gives a vector's buffer back to its resource (clear + shrink_to_fit may keep it).
template <typename T>
void release(std::pmr::vector<T>& v) noexcept {
    std::pmr::vector<T>(v.get_allocator()).swap(v);
}

// Parses in write-only mode (string values may stay escaped views of text) and
// writes into consume through the workspace's staging buffer.
void canonicalize_into(std::string_view text, const ParseLimits& limits, Workspace::Impl& ws,
                       detail::OutputSink::Consume consume, void* target) {
    detail::parse_text_into(ws.doc, text, limits, ws.parse_stack, detail::ParseMode::write_only);
    char* chunk = ws.chunk_for(text.size());
    detail::OutputSink sink(chunk, ws.chunk_size, consume, target);
    detail::write_document(ws.doc, sink, ws.write_stack, nullptr, nullptr);
    sink.flush();
}

}  // namespace

Workspace::Workspace(std::pmr::memory_resource* upstream) : impl_(std::make_unique<Impl>(upstream)) {}
Workspace::~Workspace() = default;

std::size_t Workspace::retained_bytes() const noexcept {
    const Impl& ws = *impl_;
    return capacity_bytes(ws.doc.tape) + capacity_bytes(ws.doc.members) + ws.doc.arena.retained_bytes() +
           capacity_bytes(ws.doc.pending_keys) + capacity_bytes(ws.parse_stack) + capacity_bytes(ws.write_stack) +
           ws.chunk_size;
}

void Workspace::trim(std::size_t keep_bytes) noexcept {
    Impl& ws = *impl_;
    ws.doc.reset();
    ws.parse_stack.clear();
    ws.write_stack.clear();
    // Largest first, so a typical keep size still holds the tape and the staging
    // buffer while one outsized call's arena or stacks go back.
    std::pair<std::size_t, int> parts[] = {
        {capacity_bytes(ws.doc.tape), 0},        {capacity_bytes(ws.doc.members), 1},
        {ws.doc.arena.retained_bytes(), 2},      {capacity_bytes(ws.doc.pending_keys), 3},
        {capacity_bytes(ws.parse_stack), 4},     {capacity_bytes(ws.write_stack), 5},
        {ws.chunk_size, 6},
    };
    std::sort(std::begin(parts), std::end(parts), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& part : parts) {
        if (retained_bytes() <= keep_bytes) return;
        switch (part.second) {
            case 0: release(ws.doc.tape); break;
            case 1: release(ws.doc.members); break;
            case 2: ws.doc.arena.release(); break;
            case 3: release(ws.doc.pending_keys); break;
            case 4: release(ws.parse_stack); break;
            case 5: release(ws.write_stack); break;
            default: ws.release_chunk(); break;
        }
    }
}

void canonicalize_text(std::string_view text, const ParseLimits& limits, Workspace& workspace, std::string& out) {
    out.clear();
    out.reserve(text.size());  // the canonical form is rarely longer than the input
    canonicalize_into(text, limits, *workspace.impl_, detail::OutputSink::append_to_string, &out);
}

std::string canonicalize_text(std::string_view text, const ParseLimits& limits) {
    Workspace workspace;  // per call: nothing outlives it
    std::string out;
    canonicalize_text(text, limits, workspace, out);
    return out;
}

// The sink in block mode: the writer hashes the canonical output while writing it
// (SHA-NI, a quarter block per member; see write_plain), so hashing and writing
// overlap; without SHA-NI the sink hashes whole blocks at each flush (OpenSSL).
Sha256Digest canonical_sha256_text(std::string_view text, const ParseLimits& limits, Workspace& workspace) {
    Workspace::Impl& ws = *workspace.impl_;
    detail::parse_text_into(ws.doc, text, limits, ws.parse_stack, detail::ParseMode::write_only);
    ws.sha256_blocks.start();
    char* chunk = ws.chunk_for(std::max(text.size(), detail::OutputSink::kMinBlockCapacity));
    detail::OutputSink sink(chunk, ws.chunk_size, ws.sha256_blocks);
    detail::write_document(ws.doc, sink, ws.write_stack, nullptr, nullptr);
    return sink.finish_blocks();
}

}  // namespace opledger::core
