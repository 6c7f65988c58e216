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
};

}  // namespace opledger::core::detail
