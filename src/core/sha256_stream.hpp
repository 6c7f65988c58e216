// Incremental SHA-256 (OpenSSL EVP) for writers that stream canonical bytes
// straight into a digest instead of materialising them.
#pragma once

#include <cstddef>

#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core::detail {

class Sha256Stream {
public:
    Sha256Stream();
    // Uses (and on first use creates) a context kept by the caller, e.g. a Workspace:
    // creating and freeing an EVP context per digest is two allocations plus provider
    // set-up, a visible share of hashing a few KB. Free it with free_sha256_context.
    explicit Sha256Stream(void*& kept_context);
    ~Sha256Stream();
    Sha256Stream(const Sha256Stream&) = delete;
    Sha256Stream& operator=(const Sha256Stream&) = delete;
    void update(const char* data, std::size_t size);
    Sha256Digest finish();
    static void consume(void* self, const char* data, std::size_t size) {
        static_cast<Sha256Stream*>(self)->update(data, size);
    }

private:
    void* context_;  // EVP_MD_CTX, kept opaque so OpenSSL headers stay in sha256.cpp
    bool owned_;
};

void free_sha256_context(void* context) noexcept;

}  // namespace opledger::core::detail
