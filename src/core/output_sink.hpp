// Where the canonical writer puts its bytes: a fixed staging buffer that is handed
// to a consumer (a std::string, a SHA-256 context) whenever it fills up. Writing
// through a small buffer keeps the output cache-hot and means a hash never needs the
// canonical form materialised in full, nor fresh (page-faulting) memory for it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/no_postgres.hpp"
#include "core/sha256_blocks.hpp"

namespace opledger::core::detail {

class OutputSink {
public:
    // consume(target, data, size) receives the output in order; it may throw.
    using Consume = void (*)(void* target, const char* data, std::size_t size);

    // Smallest useful buffer: ensure() is only ever asked for this much at once.
    static constexpr std::size_t kMinCapacity = 256;
    // Block mode keeps up to 63 bytes over a flush, so it needs that much more.
    static constexpr std::size_t kMinBlockCapacity = kMinCapacity + Sha256Blocks::kBlockBytes;

    OutputSink(char* buffer, std::size_t capacity, Consume consume, void* target)
        : begin_(buffer), cursor_(buffer), limit_(buffer + capacity), consume_(consume), target_(target) {}
    // Resumes a buffer that already holds [buffer, cursor) unflushed.
    OutputSink(char* buffer, std::size_t capacity, Consume consume, void* target, char* cursor)
        : begin_(buffer), cursor_(cursor), limit_(buffer + capacity), consume_(consume), target_(target) {}
    // Block mode, for a digest of the output: the writer may also hash blocks itself
    // while it writes (see write_plain), advancing consumed().
    // flush() hands over whole blocks only and moves the partial last one to the
    // front of the buffer, so the digest never holds a partial block (which would
    // make it copy every later block) until finish_blocks(). capacity must be at
    // least kMinBlockCapacity.
    OutputSink(char* buffer, std::size_t capacity, Sha256Blocks& blocks)
        : begin_(buffer), cursor_(buffer), limit_(buffer + capacity), consume_(Sha256Blocks::consume),
          target_(&blocks), blocks_(&blocks) {}
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

    // Any number of bytes, without a prior ensure(): large runs bypass the buffer
    // (in block mode they go through it, a buffer at a time, to keep blocks whole).
    void write(const char* data, std::size_t size) {
        if (has_room(size)) return put(data, size);
        if (!blocks_) {
            flush();
            if (has_room(size)) return put(data, size);
            return consume_(target_, data, size);
        }
        for (;;) {
            const std::size_t part = std::min(size, static_cast<std::size_t>(limit_ - cursor_));
            put(data, part);
            data += part;
            size -= part;
            if (size == 0) return;
            flush();
        }
    }

    // Hands everything buffered to the consumer (call once at the end, too); in
    // block mode, everything but a partial last block (see finish_blocks).
    void flush() {
        if (blocks_) return flush_blocks();
        if (cursor_ != begin_) consume_(target_, begin_, static_cast<std::size_t>(cursor_ - begin_));
        cursor_ = begin_;
    }

    // Block mode: hashes what is left and returns the digest of all output.
    Sha256Digest finish_blocks() {
        const Sha256Digest digest = blocks_->finish(consumed_, static_cast<std::size_t>(cursor_ - consumed_));
        consumed_ = cursor_ = begin_;
        return digest;
    }

    // For a writer that keeps the cursor in a local (see write_plain): bytes stored
    // through char* may alias any object in memory, so a cursor held in this object
    // would be reloaded after every byte. Take it, write below limit(), give it back
    // with set_cursor before calling anything else on the sink.
    char* cursor() const { return cursor_; }
    const char* limit() const { return limit_; }
    void set_cursor(char* cursor) { cursor_ = cursor; }
    // Block mode, likewise: the digest, and the first byte it has not been given
    // yet. A writer that hashes blocks itself keeps consumed() in a local too.
    Sha256Blocks* blocks() const { return blocks_; }
    const char* consumed() const { return consumed_; }
    void set_consumed(const char* consumed) { consumed_ = consumed; }

    // A consumer that appends to a std::string.
    static void append_to_string(void* target, const char* data, std::size_t size) {
        static_cast<std::string*>(target)->append(data, size);
    }

private:
    void flush_blocks() {
        const std::size_t whole = static_cast<std::size_t>(cursor_ - consumed_) / Sha256Blocks::kBlockBytes;
        if (whole != 0) blocks_->blocks(consumed_, whole);
        consumed_ += whole * Sha256Blocks::kBlockBytes;
        const std::size_t tail = static_cast<std::size_t>(cursor_ - consumed_);
        std::memmove(begin_, consumed_, tail);
        consumed_ = begin_;
        cursor_ = begin_ + tail;
    }

    char* begin_;
    char* cursor_;
    char* limit_;
    Consume consume_;
    void* target_;
    Sha256Blocks* blocks_ = nullptr;  // block mode only
    const char* consumed_ = begin_;   // block mode: output before this is hashed
};

}  // namespace opledger::core::detail
