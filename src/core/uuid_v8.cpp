// Deterministic operation IDs: UUID version 8 (RFC 9562 §5.8) from
// SHA-256(namespace || 0x00 || canonical parts).
#include <openssl/evp.h>

#include "core/jcs.hpp"
#include "core/openssl_util.hpp"

namespace opledger::core {

std::array<std::uint8_t, 16> derive_uuid_v8(std::string_view name_space, std::string_view canonical_parts) {
    const detail::DigestContext context(EVP_MD_CTX_new());
    if (!context) detail::throw_openssl_error("EVP_MD_CTX_new");
    const unsigned char separator = 0;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(context.get(), name_space.data(), name_space.size()) != 1 ||
        EVP_DigestUpdate(context.get(), &separator, 1) != 1 ||
        EVP_DigestUpdate(context.get(), canonical_parts.data(), canonical_parts.size()) != 1 ||
        EVP_DigestFinal_ex(context.get(), digest, &length) != 1 || length != 32)
        detail::throw_openssl_error("SHA-256 digest for UUID v8");
    std::array<std::uint8_t, 16> uuid{};
    for (std::size_t i = 0; i < uuid.size(); ++i) uuid[i] = digest[i];
    uuid[6] = static_cast<std::uint8_t>((uuid[6] & 0x0F) | 0x80);  // version 8 in the high nibble of octet 6
    uuid[8] = static_cast<std::uint8_t>((uuid[8] & 0x3F) | 0x80);  // variant 10xx in octet 8
    return uuid;
}

}  // namespace opledger::core
