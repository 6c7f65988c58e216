// libFuzzer target for the canonical-JSON core.
// Properties checked on every input:
//  * parsing either succeeds or throws JsonError (anything else aborts);
//  * canonical output is a fixed point: parse(write(x)) writes the same bytes;
//  * the same value rebuilt through DocumentBuilder writes the same bytes;
//  * hashing the output works;
//  * the workspace path (one Workspace reused across all inputs, write-only parse that
//    keeps canonical escapes verbatim) gives the same bytes and errors as the Document
//    path, and its streamed hash equals SHA-256 of the materialised canonical form
//    (with the SSE2 string scan on odd-sized inputs and the CPU's best one on even;
//    hashed block by block with SHA-NI while writing where the CPU has it, except for
//    sizes with bit 1 set, which hash at buffer flushes through OpenSSL only).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/document_impl.hpp"
#include "core/jcs.hpp"
#include "core/sha256_ni.hpp"
#include "core/string_scan.hpp"
#include "core/workspace_impl.hpp"

namespace {

using namespace opledger::core;

[[noreturn]] void fail(const char* what, const std::string& a, const std::string& b) {
    std::fprintf(stderr, "property violated: %s\n first:  %s\n second: %s\n", what, a.c_str(), b.c_str());
    std::abort();
}

// Replays a document's tape into a DocumentBuilder (iteratively, in input order).
Document rebuild(const Document::Impl& doc, const ParseLimits& limits) {
    using detail::NodeType;
    DocumentBuilder builder(limits);
    std::vector<std::pair<std::size_t, NodeType>> open;  // (end index, type)
    for (std::size_t i = 0; i < doc.tape.size(); ++i) {
        while (!open.empty() && open.back().first == i) {
            if (open.back().second == NodeType::array) builder.end_array(); else builder.end_object();
            open.pop_back();
        }
        const detail::Node& node = doc.tape[i];
        switch (node.type) {
            case NodeType::null_value: builder.null(); break;
            case NodeType::false_value: builder.boolean(false); break;
            case NodeType::true_value: builder.boolean(true); break;
            case NodeType::number: builder.number(node.text()); break;
            case NodeType::string: builder.string(node.text()); break;
            case NodeType::key: builder.key(node.text()); break;
            case NodeType::array: builder.begin_array(); open.emplace_back(node.container.end, node.type); break;
            case NodeType::object: builder.begin_object(); open.emplace_back(node.container.end, node.type); break;
            case NodeType::raw: fail("raw node in a Document (write-only tapes only)", "", "");
        }
    }
    while (!open.empty()) {
        if (open.back().second == NodeType::array) builder.end_array(); else builder.end_object();
        open.pop_back();
    }
    return builder.finish();
}

// Workspace-path results for text: canonical bytes and streamed hash, or the error.
struct WorkspaceResult {
    bool ok = false;
    std::string canonical;
    Sha256Digest digest{};
    JsonErrorKind kind{};
    std::optional<std::size_t> offset;
};

WorkspaceResult run_workspace(std::string_view text, const ParseLimits& limits) {
    static Workspace workspace;  // reused across inputs, as a backend reuses its own
    WorkspaceResult result;
    try {
        canonicalize_text(text, limits, workspace, result.canonical);
        result.digest = canonical_sha256_text(text, limits, workspace);
        result.ok = true;
    } catch (const JsonError& error) {
        result.kind = error.kind();
        result.offset = error.byte_offset();
    }
    if ((text.size() & 7) == 0) workspace.trim(4096);  // exercise giving memory back and regrowing
    return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    ParseLimits limits;
    limits.max_depth = 256;
    std::string first;
    // Odd sizes run the workspace path with the SSE2 string scan, even ones with the
    // best one for this CPU: both must match the Document path.
    detail::use_portable_string_scan_for_testing((size & 1) != 0);
    detail::sha_ni::disable_for_testing((size & 2) != 0);
    const WorkspaceResult via_workspace = run_workspace(text, limits);
    try {
        const Document document = parse_json_text(text, limits);
        first = document.canonical();
        if (!via_workspace.ok) fail("workspace path rejected a valid document", first, "");
        if (via_workspace.canonical != first) fail("workspace output differs", first, via_workspace.canonical);
        if (via_workspace.digest != sha256(first)) fail("streamed text hash differs", first, "");
        if (canonical_sha256(document) != sha256(first)) fail("streamed document hash differs", first, "");
        if ((size & 3) == 0) {  // every fourth input: rebuild through DocumentBuilder too
            Document::Impl tape;  // the same text parsed into a bare tape we can walk
            std::pmr::vector<detail::ParseFrame> stack;
            detail::parse_text_into(tape, text, limits, stack, detail::ParseMode::document);
            const std::string rebuilt = rebuild(tape, limits).canonical();
            if (rebuilt != first) fail("builder output differs", first, rebuilt);
        }
    } catch (const JsonError& error) {
        if (via_workspace.ok) fail("workspace path accepted an invalid document", via_workspace.canonical, error.what());
        if (via_workspace.kind != error.kind() || via_workspace.offset != error.byte_offset())
            fail("workspace path reports another error", error.what(), "");
        return 0;
    } catch (...) {
        std::abort();
    }
    try {
        const std::string second = canonicalize_text(first, limits);
        if (second != first) fail("canonical form is not a fixed point", first, second);
        const auto digest = sha256(second);
        if (digest != sha256(first)) std::abort();
    } catch (...) {
        fail("canonical output does not parse back", first, "");
    }
    return 0;
}
