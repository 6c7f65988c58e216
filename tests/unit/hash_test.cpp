// SHA-256 / HMAC known answers and UUID v8 derivation.
#include <cstdio>

#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

template <std::size_t N>
std::string hex(const std::array<std::uint8_t, N>& bytes) {
    std::string out;
    char pair[3];
    for (auto b : bytes) {
        std::snprintf(pair, sizeof pair, "%02x", b);
        out += pair;
    }
    return out;
}

TEST(Sha256, KnownAnswers) {
    // FIPS 180-2 example "abc" and the empty message.
    EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(HmacSha256, Rfc4231TestCase2) {
    EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacSha256, KeyMattersAndEmptyKeyWorks) {
    EXPECT_NE(hmac_sha256("k1", "m"), hmac_sha256("k2", "m"));
    // HMAC-SHA256 with an empty key over an empty message (widely published value).
    EXPECT_EQ(hex(hmac_sha256("", "")), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(UuidV8, VersionVariantAndDeterminism) {
    const auto id = derive_uuid_v8("payments", "{\"order\":1}");
    EXPECT_EQ(id[6] >> 4, 8) << "version nibble";
    EXPECT_EQ(id[8] >> 6, 2) << "variant 10";
    EXPECT_EQ(id, derive_uuid_v8("payments", "{\"order\":1}"));
    EXPECT_NE(id, derive_uuid_v8("payments", "{\"order\":2}"));
    EXPECT_NE(id, derive_uuid_v8("payment", "s{\"order\":1}")) << "the separator keeps the split unambiguous";
    // Equals the first 16 bytes of SHA-256(namespace || 0x00 || parts) with the bits set.
    const auto digest = sha256(std::string("payments") + '\0' + "{\"order\":1}");
    for (std::size_t i = 0; i < 16; ++i) {
        if (i == 6)
            EXPECT_EQ(id[i], (digest[i] & 0x0F) | 0x80);
        else if (i == 8)
            EXPECT_EQ(id[i], (digest[i] & 0x3F) | 0x80);
        else
            EXPECT_EQ(id[i], digest[i]);
    }
}

TEST(CanonicalHash, KeyOrderWhitespaceAndNumberSpellingDoNotMatter) {
    EXPECT_EQ(sha256(canon("{\"b\": 1.0, \"a\": [1E2]}")), sha256(canon("{\"a\":[100],\"b\":1}")));
    EXPECT_NE(sha256(canon("{\"a\":1}")), sha256(canon("{\"a\":2}")));
}

}  // namespace
}  // namespace opledger::core::test
