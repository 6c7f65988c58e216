// Shared OpenSSL error handling for the core's hashing code.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

// Throws std::runtime_error naming the failed call and OpenSSL's queued reason.
[[noreturn]] inline void throw_openssl_error(const char* what) {
    const unsigned long code = ERR_get_error();
    ERR_clear_error();
    char reason[256] = "unknown error";
    if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
    throw std::runtime_error(std::string("OpenSSL ") + what + " failed: " + reason);
}

// SHA-256 fetched from OpenSSL's default provider once per process. OpenSSL 3
// otherwise looks the algorithm up (under a lock) on every EVP_Digest call with
// EVP_sha256(); its documentation recommends explicit fetching for speed. The
// object is OpenSSL's and lives as long as the library.
const EVP_MD* sha256_algorithm();

struct DigestContextDeleter {
    void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextDeleter>;

}  // namespace opledger::core::detail
