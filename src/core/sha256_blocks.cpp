// The only user of OpenSSL's low-level SHA-256 API. It is deprecated since 3.0 in
// favour of EVP, but still shipped (Debian 12's libssl 3.0.x), and it is what the
// block-by-block writer needs: SHA256_CTX is a public struct whose state words and
// bit count can be handed to and taken back from an inline SHA-NI block function,
// and SHA256_Update with whole blocks and no pending partial block goes straight to
// OpenSSL's block function (EVP_MD_CTX is opaque, and EVP_DigestUpdate's per-call
// dispatch costs too much for small updates: a 256-byte staging buffer through EVP
// measured slower than the 32 KB one). The warning is silenced for this file only.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

#include "core/sha256_blocks.hpp"

#include <openssl/sha.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace opledger::core::detail {
namespace {

static_assert(sizeof(SHA256_CTX) == 112, "Sha256Blocks::context_ is sized for OpenSSL's SHA256_CTX");
static_assert(alignof(SHA256_CTX) <= 8);

SHA256_CTX* as_context(unsigned char* storage) { return reinterpret_cast<SHA256_CTX*>(storage); }
const SHA256_CTX* as_context(const unsigned char* storage) { return reinterpret_cast<const SHA256_CTX*>(storage); }

}  // namespace

void Sha256Blocks::start() {
    // SHA256_Init cannot fail for SHA256_CTX (it only stores constants), but check anyway.
    if (SHA256_Init(as_context(context_)) != 1) throw std::runtime_error("OpenSSL SHA256_Init failed");
}

void Sha256Blocks::blocks(const char* data, std::size_t count) {
    SHA256_Update(as_context(context_), data, count * kBlockBytes);
}

void Sha256Blocks::update(const char* data, std::size_t size) { SHA256_Update(as_context(context_), data, size); }

void Sha256Blocks::export_state(std::uint32_t* h) const {
    static_assert(sizeof(SHA_LONG) == sizeof(std::uint32_t));
    std::memcpy(h, as_context(context_)->h, 8 * sizeof(std::uint32_t));
}

// SHA256_CTX is a public struct: h holds the state words, Nl/Nh the message length
// in bits (low and high 32 bits), which SHA256_Final pads with. Blocks compressed
// outside OpenSSL are counted here as SHA256_Update would count them.
void Sha256Blocks::import_state(const std::uint32_t* h, std::size_t blocks_added) {
    SHA256_CTX& context = *as_context(context_);
    if (context.num != 0) throw std::logic_error("Sha256Blocks::import_state with a partial block pending");
    std::memcpy(context.h, h, 8 * sizeof(std::uint32_t));
    const std::uint64_t bits = ((std::uint64_t{context.Nh} << 32) | context.Nl) + std::uint64_t{blocks_added} * 512;
    context.Nl = static_cast<SHA_LONG>(bits & 0xffffffffu);
    context.Nh = static_cast<SHA_LONG>(bits >> 32);
}

Sha256Digest Sha256Blocks::finish(const char* data, std::size_t size) {
    SHA256_Update(as_context(context_), data, size);
    Sha256Digest digest{};
    SHA256_Final(digest.data(), as_context(context_));
    return digest;
}

}  // namespace opledger::core::detail
