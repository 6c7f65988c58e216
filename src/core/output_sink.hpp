// Where the canonical writer puts its bytes: a fixed staging buffer that is handed
// to a consumer (a std::string, a SHA-256 context) whenever it fills up. Writing
// through a small buffer keeps the output cache-hot and means a hash never needs the
// canonical form materialised in full, nor fresh (page-faulting) memory for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

class OutputSink {
public:
    // consume(target, data, size) receives the output in order; it may throw.
    using Consume = void (*)(void* target, const char* data, std::size_t size);

    // Smallest useful buffer: ensure() is only ever asked for this much at once.
    static constexpr std::size_t kMinCapacity = 256;

    OutputSink(char* buffer, std::size_t capacity, Consume consume, void* target)
        : begin_(buffer), cursor_(buffer), limit_(buffer + capacity), consume_(consume), target_(target) {}
    // Resumes a buffer that already holds [buffer, cursor) unflushed.
    OutputSink(char* buffer, std::size_t capacity, Consume consume, void* target, char* cursor)
        : begin_(buffer), cursor_(cursor), limit_(buffer + capacity), consume_(consume), target_(target) {}
    OutputSink(const OutputSink&) = delete;
    OutputSink& operator=(const OutputSink&) = delete;

    bool has_room(std::size_t n) const { return static_cast<std::size_t>(limit_ - cursor_) >= n; }

    // Makes room for n (<= kMinCapacity) bytes for the put* calls below.
    void ensure(std::size_t n) {
        if (!has_room(n)) flush();
    }
    void put(char c) { *cursor_++ = c; }
    void put(const char* data, std::size_t size) {
        copy_bytes(cursor_, data, size);
        cursor_ += size;
    }

    // memcpy without a library call for the short runs that dominate JSON (names,
    // small values): two overlapping fixed-size moves never read outside [data, data+size).
    static void copy_bytes(char* to, const char* from, std::size_t size) {
        if (size >= 8 && size <= 16) {
            std::uint64_t head, tail;
            std::memcpy(&head, from, 8);
            std::memcpy(&tail, from + size - 8, 8);
            std::memcpy(to, &head, 8);
            std::memcpy(to + size - 8, &tail, 8);
        } else if (size >= 4 && size < 8) {
            std::uint32_t head, tail;
            std::memcpy(&head, from, 4);
            std::memcpy(&tail, from + size - 4, 4);
            std::memcpy(to, &head, 4);
            std::memcpy(to + size - 4, &tail, 4);
        } else if (size < 4) {
            for (std::size_t i = 0; i < size; ++i) to[i] = from[i];
        } else {
            std::memcpy(to, from, size);
        }
    }

    // Any number of bytes, without a prior ensure(): large runs bypass the buffer.
    void write(const char* data, std::size_t size) {
        if (has_room(size)) return put(data, size);
        flush();
        if (has_room(size)) return put(data, size);
        consume_(target_, data, size);
    }

    // Hands everything buffered to the consumer (call once at the end, too).
    void flush() {
        if (cursor_ != begin_) consume_(target_, begin_, static_cast<std::size_t>(cursor_ - begin_));
        cursor_ = begin_;
    }

    // For a writer that keeps the cursor in a local (see write_plain): bytes stored
    // through char* may alias any object in memory, so a cursor held in this object
    // would be reloaded after every byte. Take it, write below limit(), give it back
    // with set_cursor before calling anything else on the sink.
    char* cursor() const { return cursor_; }
    const char* limit() const { return limit_; }
    void set_cursor(char* cursor) { cursor_ = cursor; }

    // A consumer that appends to a std::string.
    static void append_to_string(void* target, const char* data, std::size_t size) {
        static_cast<std::string*>(target)->append(data, size);
    }

private:
    char* begin_;
    char* cursor_;
    char* limit_;
    Consume consume_;
    void* target_;
};

}  // namespace opledger::core::detail
