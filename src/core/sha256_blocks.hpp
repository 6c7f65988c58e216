// SHA-256 of a stream fed in whole 64-byte blocks until the end, for OutputSink's
// block mode: the digest of canonical output that the writer hashes while writing
// it. The writer compresses blocks itself with SHA-NI (sha256_ni.hpp) and hands the
// state back and forth through export_state/import_state; this class keeps it
// between those stretches, hashes at the sink's flushes (whole blocks, so no partial
// block is ever pending inside OpenSSL) and pads and finishes. It uses OpenSSL's
// low-level SHA256_* functions for that (see sha256_blocks.cpp); all other hashing
// in the project stays on EVP.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core::detail {

class Sha256Blocks {
public:
    static constexpr std::size_t kBlockBytes = 64;

    Sha256Blocks() { start(); }
    Sha256Blocks(const Sha256Blocks&) = delete;
    Sha256Blocks& operator=(const Sha256Blocks&) = delete;

    // Begins a new digest (the object can be reused for any number of them).
    void start();
    // Hashes count whole blocks at data. While only whole blocks have been fed, the
    // data goes straight to the block function (no copy into the context).
    void blocks(const char* data, std::size_t count);
    // Any number of bytes (a partial block is kept in the context, so later whole
    // blocks are copied through it: feed whole blocks where it matters).
    void update(const char* data, std::size_t size);
    // Hashes the last size bytes and returns the digest of everything fed.
    Sha256Digest finish(const char* data, std::size_t size);

    // For a writer that compresses whole blocks itself (sha_ni::compress) between
    // these calls: the state words A..H, and back with how many blocks it added.
    // Only while no partial block is pending (true in OutputSink's block mode).
    void export_state(std::uint32_t* h) const;
    void import_state(const std::uint32_t* h, std::size_t blocks_added);

    // OutputSink consumer (see OutputSink's block mode).
    static void consume(void* self, const char* data, std::size_t size) {
        static_cast<Sha256Blocks*>(self)->update(data, size);
    }

private:
    // OpenSSL's SHA256_CTX (112 bytes; size checked in the .cpp), kept as raw storage
    // so the deprecated declarations stay out of every other file.
    alignas(8) unsigned char context_[112];
};

}  // namespace opledger::core::detail
