// RFC 8785 output driven by events, for callers that already hold a parsed value
// and can visit each object's members in canonical order themselves. The
// PostgreSQL layer walks jsonb's binary layout in place this way: no Document, no
// tape, one pass. The Document writer and this stream share their escaping and
// number formatting, so both give the same bytes for the same value.
//
// The caller's side of the contract: member names of one object are distinct and
// come in the order sort_members_utf16 gives; strings are valid UTF-8.
//
// A public header (the PostgreSQL layer includes it after PostgreSQL's headers), so
// it uses no private core header: the short writes are inline here, the rest
// (flushing, escaping, numbers) is in canonical_stream.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/jcs.hpp"

namespace opledger::core {

namespace detail {
class Sha256Stream;
}

class CanonicalStream {
public:
    // Appends the canonical text to out (complete after finish()).
    explicit CanonicalStream(std::string& out);
    // Feeds the canonical text into a SHA-256 digest; finish_sha256() returns it.
    CanonicalStream();
    ~CanonicalStream();
    CanonicalStream(const CanonicalStream&) = delete;
    CanonicalStream& operator=(const CanonicalStream&) = delete;

    void begin_object() { open('{'); }
    void end_object() { close('}'); }
    void begin_array() { open('['); }
    void end_array() { close(']'); }

    // A member name: the separator before it and the ':' after it are written here.
    void name(std::string_view utf8) {
        const char separator = pending_separator();
        quoted(utf8, separator, ':');
        need_comma_ = false;
    }
    void string(std::string_view utf8) {
        quoted(utf8, pending_separator(), '\0');
        need_comma_ = true;
    }
    // A decimal number in JSON grammar (e.g. numeric_out's "1.50", "-0"). Throws
    // JsonError: invalid_text when it is not one, inexact_number when its canonical
    // (double) form would change its value.
    void number(std::string_view decimal_text);
    void boolean(bool value) { literal(value ? std::string_view("true") : std::string_view("false")); }
    void null() { literal("null"); }

    void finish();                // text target: flushes into the string
    Sha256Digest finish_sha256();  // digest target: flushes and returns the digest

private:
    static constexpr std::size_t kBufferBytes = 8 * 1024;

    char pending_separator() const { return need_comma_ ? ',' : '\0'; }
    // Makes room for n (<= 64) bytes in the buffer.
    void ensure(std::size_t n) {
        if (static_cast<std::size_t>(end_ - cursor_) < n) flush();
    }
    void open(char bracket) {
        ensure(2);
        if (need_comma_) *cursor_++ = ',';
        *cursor_++ = bracket;
        need_comma_ = false;
    }
    void close(char bracket) {
        ensure(1);
        *cursor_++ = bracket;
        need_comma_ = true;
    }
    void literal(std::string_view word) {
        ensure(6);
        if (need_comma_) *cursor_++ = ',';
        for (char c : word) *cursor_++ = c;
        need_comma_ = true;
    }
    // `prefix` / `suffix` are '\0' for none.
    void quoted(std::string_view utf8, char prefix, char suffix);
    void flush();
    static void consume(void* self, const char* data, std::size_t size);
    class SinkView;

    std::unique_ptr<detail::Sha256Stream> digest_;  // digest target only
    std::string* text_ = nullptr;                   // text target only
    char buffer_[kBufferBytes];
    char* cursor_ = buffer_;
    char* const end_ = buffer_ + kBufferBytes;
    bool need_comma_ = false;
};

// Sorts order[0..count) (indices into names) into RFC 8785 member order: by UTF-16
// code units of the names (which are UTF-8 here).
void sort_members_utf16(const std::string_view* names, std::uint32_t* order, std::size_t count);

}  // namespace opledger::core
