// SHA-256 and HMAC-SHA256 through OpenSSL 3 EVP. OpenSSL objects are held in
// unique_ptr so every exit path frees them; failures become std::runtime_error.
#include <memory>
#include <stdexcept>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "core/jcs.hpp"
#include "core/no_postgres.hpp"
#include "core/openssl_util.hpp"
#include "core/sha256_stream.hpp"

namespace opledger::core {
namespace {

struct MacDeleter {
    void operator()(EVP_MAC* mac) const { EVP_MAC_free(mac); }
};
struct MacContextDeleter {
    void operator()(EVP_MAC_CTX* context) const { EVP_MAC_CTX_free(context); }
};

}  // namespace

namespace detail {

const EVP_MD* sha256_algorithm() {
    static const EVP_MD* const algorithm = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (algorithm == nullptr) throw_openssl_error("EVP_MD_fetch(SHA256)");
    return algorithm;
}

}  // namespace detail

Sha256Digest sha256(std::string_view bytes) {
    Sha256Digest digest{};
    unsigned int length = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, detail::sha256_algorithm(), nullptr) != 1 ||
        length != digest.size())
        detail::throw_openssl_error("EVP_Digest(SHA-256)");
    return digest;
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view bytes) {
    const std::unique_ptr<EVP_MAC, MacDeleter> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
    if (!mac) detail::throw_openssl_error("EVP_MAC_fetch(HMAC)");
    const std::unique_ptr<EVP_MAC_CTX, MacContextDeleter> context(EVP_MAC_CTX_new(mac.get()));
    if (!context) detail::throw_openssl_error("EVP_MAC_CTX_new");
    char digest_name[] = "SHA256";
    const OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
        OSSL_PARAM_construct_end(),
    };
    // A null key means "keep the previous key" to EVP_MAC_init; an empty key must
    // still be set, so point at a dummy byte with length 0.
    static const unsigned char kNoKey = 0;
    const auto* key_bytes = key.empty() ? &kNoKey : reinterpret_cast<const unsigned char*>(key.data());
    if (EVP_MAC_init(context.get(), key_bytes, key.size(), params) != 1)
        detail::throw_openssl_error("EVP_MAC_init(HMAC-SHA256)");
    if (EVP_MAC_update(context.get(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) != 1)
        detail::throw_openssl_error("EVP_MAC_update");
    Sha256Digest digest{};
    std::size_t length = 0;
    if (EVP_MAC_final(context.get(), digest.data(), &length, digest.size()) != 1 || length != digest.size())
        detail::throw_openssl_error("EVP_MAC_final");
    return digest;
}

}  // namespace opledger::core

namespace opledger::core::detail {

// Without a kept context, one is created per digest: EVP_Digest (the one-shot sha256
// above) does the same internally, and nothing outlives the call.
Sha256Stream::Sha256Stream() : context_(EVP_MD_CTX_new()) {
    if (!context_) throw_openssl_error("EVP_MD_CTX_new");
    if (EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), sha256_algorithm(), nullptr) != 1) {
        EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
        throw_openssl_error("EVP_DigestInit_ex(SHA-256)");
    }
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Sha256Stream::update(const char* data, std::size_t size) {
    if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data, size) != 1)
        throw_openssl_error("EVP_DigestUpdate");
}

Sha256Digest Sha256Stream::finish() {
    Sha256Digest digest{};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest.data(), &length) != 1 ||
        length != digest.size())
        throw_openssl_error("EVP_DigestFinal_ex");
    return digest;
}

}  // namespace opledger::core::detail
