// Public API of the canonical-JSON core (RFC 8785). No PostgreSQL header may be
// included from src/core: this library is unit-tested and fuzzed on its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_error.hpp"

namespace opledger::core {

// A parsed JSON value (a compact tape / tree). Strings are held unescaped as UTF-8.
// Object members keep input order; the writer sorts them. Duplicate member names
// are rejected when the document is built (text parser and builder alike).
class Document;

using Sha256Digest = std::array<std::uint8_t, 32>;

struct ParseLimits {
    // Deepest nesting of arrays/objects accepted; one more level raises too_deep.
    std::size_t max_depth = 1000;
};

// Strict RFC 8259 parse of JSON text plus the canonical form's own rules (no duplicates, valid
// UTF-8, no lone surrogates, no NaN/Infinity, no trailing garbage, exact numbers).
// Throws JsonError with byte_offset set.
Document parse_json_text(std::string_view text, const ParseLimits& limits);

// Builds a Document from events, for callers that already hold a parsed value
// (the PostgreSQL layer walks jsonb with it; no detour through text).
// number() takes a decimal number in JSON grammar (e.g. numeric_out's "1.50", "-0", "1e5").
// Throws JsonError (duplicate names -> invalid_text; inexact numbers -> inexact_number).
class DocumentBuilder {
public:
    // Whether key() and string() must check that their bytes are valid UTF-8. The
    // PostgreSQL layer skips the check for jsonb from a UTF-8 database, whose
    // strings PostgreSQL has validated already.
    enum class Utf8 { verify, already_valid };

    // The document's buffers come from `memory` (the PostgreSQL layer passes a pool
    // kept in a memory context, so that small documents reuse memory call after call).
    // The Document returned by finish() must not outlive that resource.
    explicit DocumentBuilder(const ParseLimits& limits, Utf8 utf8 = Utf8::verify,
                             std::pmr::memory_resource* memory = std::pmr::get_default_resource());
    ~DocumentBuilder();
    DocumentBuilder(const DocumentBuilder&) = delete;
    DocumentBuilder& operator=(const DocumentBuilder&) = delete;

    // copy: the builder keeps its own copy of a name or string. borrow: the caller
    // promises the bytes stay valid and unchanged until the Document is destroyed
    // (jsonb read in place), and the builder keeps a view.
    enum class Storage { copy, borrow };

    // Expected number of values, so that the tape is sized once.
    void reserve(std::size_t values);

    void begin_object();
    void key(std::string_view utf8_name, Storage storage = Storage::copy);  // valid UTF-8; checked
    void end_object();
    void begin_array();
    void end_array();
    void string(std::string_view utf8, Storage storage = Storage::copy);    // valid UTF-8; checked
    void number(std::string_view decimal_text);
    void boolean(bool value);
    void null();

    Document finish();  // exactly one complete top-level value must have been built

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A set of RFC 6901 JSON Pointers, compiled for fast matching while writing.
// parse() rejects malformed pointers ("a", "/~2", "/~") with JsonError(invalid_pointer).
// The empty pointer "" (the whole document) is allowed.
class PointerSet {
public:
    PointerSet();
    ~PointerSet();
    PointerSet(PointerSet&&) noexcept;
    PointerSet& operator=(PointerSet&&) noexcept;
    // A "*" reference token matches any member or element at its level; it cannot
    // share a level with named tokens of other pointers of the set (that would need
    // backtracking to match), which parse rejects as invalid_pointer.
    static PointerSet parse(const std::vector<std::string>& pointers);
    bool empty() const noexcept;

    // A place in the set while walking a document: at the root, then one member or
    // element further per step. Trivially copyable (a walk may keep them anywhere).
    class Cursor {
    public:
        bool valid() const noexcept { return node_ != nullptr; }
        bool terminal() const noexcept;  // a pointer of the set ends here
        Cursor member(std::string_view name) const noexcept;
        Cursor element(std::size_t index) const noexcept;

    private:
        friend class PointerSet;
        const void* node_ = nullptr;
    };
    Cursor root() const noexcept;  // invalid for an empty set

private:
    friend class Document;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Appends "/" and the RFC 6901 escaped form of one reference token to pointer.
void append_pointer_token(std::string& pointer, std::string_view token);

// Options for writing the canonical form.
struct WriteOptions {
    const PointerSet* exclude = nullptr;  // members/elements at these pointers are left out
    const PointerSet* redact = nullptr;   // values at these pointers are written as "[REDACTED]"
};

class Document {
public:
    Document();
    explicit Document(std::pmr::memory_resource* memory);  // an empty document whose buffers come from memory
    ~Document();
    Document(Document&&) noexcept;
    Document& operator=(Document&&) noexcept;

    // Appends the RFC 8785 canonical form to out.
    void write_canonical(std::string& out, const WriteOptions& options = {}) const;
    std::string canonical(const WriteOptions& options = {}) const;

    // JSON Pointers (RFC 6901, in canonical member order) of the places where the
    // two documents differ: a member present in one only, a value of another type
    // or value, arrays of different lengths (the array itself). Values under
    // `ignore` pointers are not compared. Returns at most max_pointers entries.
    static std::vector<std::string> diff(const Document& a, const Document& b,
                                         const PointerSet* ignore = nullptr,
                                         std::size_t max_pointers = 20);

    struct Impl;  // defined in the core's private headers

private:
    // Streams the canonical form to consume(target, bytes, size), in pieces.
    void write_to(void (*consume)(void*, const char*, std::size_t), void* target,
                  const WriteOptions& options) const;

    std::unique_ptr<Impl> impl_;
    friend class DocumentBuilder;
    friend Document parse_json_text(std::string_view, const ParseLimits&);
    friend Sha256Digest canonical_sha256(const Document&, const WriteOptions&);
};

// Long work calls an interrupt check now and then (every 65536 values parsed or
// written), so that the program embedding the core can stop a call on a very large
// document: the check may throw, and the exception leaves the call the way a
// JsonError does (every buffer is released; a Workspace stays usable). The
// PostgreSQL layer sets one that raises a pending query cancel. nullptr (the
// default): no checks. Process-wide; set it before any parse or write runs.
using InterruptCheck = void (*)();
void set_interrupt_check(InterruptCheck check) noexcept;

// Convenience: parse_json_text(text).canonical(), through a per-call Workspace.
std::string canonicalize_text(std::string_view text, const ParseLimits& limits);

// Reusable memory for parsing and writing: back-to-back calls reuse it instead of
// touching fresh pages (page faults dominate large documents on VMs otherwise).
// Every byte it holds comes from `upstream` (the PostgreSQL layer passes a resource
// backed by a memory context). Not thread-safe; one per thread/backend.
class Workspace {
public:
    explicit Workspace(std::pmr::memory_resource* upstream = std::pmr::get_default_resource());
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    // Gives back to upstream everything retained beyond keep_bytes (call between calls).
    void trim(std::size_t keep_bytes) noexcept;
    // Bytes currently held from upstream.
    std::size_t retained_bytes() const noexcept;
    struct Impl;

private:
    std::unique_ptr<Impl> impl_;  // Impl itself may be allocated normally; the big buffers go through upstream
    friend void canonicalize_text(std::string_view, const ParseLimits&, Workspace&, std::string&);
    friend Sha256Digest canonical_sha256_text(std::string_view, const ParseLimits&, Workspace&);
};

// Canonical form of JSON text into out (cleared first), using the workspace's memory.
// Throws JsonError like parse_json_text; the workspace stays usable after any throw.
void canonicalize_text(std::string_view text, const ParseLimits& limits, Workspace& workspace, std::string& out);

// Canonical number text for a JSON number token (ECMAScript Number.prototype.toString
// of the nearest double). Throws JsonError(inexact_number) when the decimal value of
// the input differs from the value of that output (e.g. 9007199254740993, 1e400).
std::string canonical_number(std::string_view json_number);

// Total order of member names by UTF-16 code units (RFC 8785 §3.2.3), on UTF-8 input.
int compare_utf16(std::string_view a, std::string_view b) noexcept;

Sha256Digest sha256(std::string_view bytes);                            // OpenSSL EVP

// SHA-256 of the canonical form of JSON text, streamed: the canonical bytes are never
// materialised in full (written through a small buffer into the digest).
Sha256Digest canonical_sha256_text(std::string_view text, const ParseLimits& limits, Workspace& workspace);
// The same for a Document (used for jsonb input and by the ledger), with WriteOptions.
Sha256Digest canonical_sha256(const Document& document, const WriteOptions& options = {});

Sha256Digest hmac_sha256(std::string_view key, std::string_view bytes);  // OpenSSL EVP_MAC

// UUID version 8 (RFC 9562): first 16 bytes of SHA-256(namespace_utf8 || 0x00 || canonical_parts),
// with version nibble 8 and variant 10xx set. A namespace cannot contain NUL (PostgreSQL text),
// so the separator makes the encoding unambiguous.
std::array<std::uint8_t, 16> derive_uuid_v8(std::string_view name_space, std::string_view canonical_parts);

}  // namespace opledger::core
