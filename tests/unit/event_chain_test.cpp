// The event hash chain and the receipt primitives (src/core/ledger/event_chain.*).
#include <string>

#include "core/jcs.hpp"
#include "core/ledger/event_chain.hpp"
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

using namespace opledger::core::ledger;

ChainEvent sample() {
    ChainEvent e;
    e.operation_id = "op-\xc3\xa9";
    e.seq = 2;
    e.at = 1764763200123456LL;
    e.kind = "succeed";
    e.status_before = "pending";
    e.status_after = "succeeded";
    e.attempt = 1;
    e.worker = "w\"1";
    e.detail_canonical = R"({"a":1,"result":{"x":[true,null]}})";
    e.role = "app";
    e.tenant = "";
    return e;
}

TEST(EventChain, CanonicalFormIsItsOwnRfc8785Form) {
    const std::string text = event_canonical(sample(), std::string_view("00ff"));
    EXPECT_EQ(canonicalize_text(text, ParseLimits{}), text);
    EXPECT_NE(text.find(R"("detail":{"a":1,"result":{"x":[true,null]}})"), std::string::npos);
    EXPECT_NE(text.find(R"("prev":"00ff")"), std::string::npos);
    EXPECT_NE(text.find(R"("decision":null)"), std::string::npos);
}

TEST(EventChain, NullDetailAndNoPrev) {
    ChainEvent e = sample();
    e.detail_canonical = {};
    const std::string text = event_canonical(e, std::nullopt);
    EXPECT_EQ(canonicalize_text(text, ParseLimits{}), text);
    EXPECT_NE(text.find(R"("detail":null,"kind")"), std::string::npos);
    EXPECT_NE(text.find(R"("prev":null)"), std::string::npos);
}

TEST(EventChain, EveryFieldAndThePreviousHashChangeTheHash) {
    const std::string base = event_hash(sample(), std::string_view("aa"));
    EXPECT_EQ(base.size(), 64u);
    EXPECT_EQ(base, event_hash(sample(), std::string_view("aa")));
    EXPECT_NE(base, event_hash(sample(), std::string_view("ab")));
    EXPECT_NE(base, event_hash(sample(), std::nullopt));
    ChainEvent e = sample();
    e.seq = 3;
    EXPECT_NE(base, event_hash(e, std::string_view("aa")));
    e = sample();
    e.detail_canonical = R"({"a":2,"result":{"x":[true,null]}})";
    EXPECT_NE(base, event_hash(e, std::string_view("aa")));
    e = sample();
    e.login = "alice";
    EXPECT_NE(base, event_hash(e, std::string_view("aa")));
    e = sample();
    e.at += 1;
    EXPECT_NE(base, event_hash(e, std::string_view("aa")));
}

TEST(EventChain, HashIsSha256OfTheCanonicalForm) {
    const std::string text = event_canonical(sample(), std::nullopt);
    const Sha256Digest d = sha256(text);
    EXPECT_EQ(event_hash(sample(), std::nullopt),
              to_hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())));
}

TEST(EventChain, HexRoundTripsAndRefusesJunk) {
    EXPECT_EQ(to_hex(std::string("\x00\xff\x10", 3)), "00ff10");
    EXPECT_EQ(*from_hex("00FF10"), std::string("\x00\xff\x10", 3));
    EXPECT_FALSE(from_hex("0"));
    EXPECT_FALSE(from_hex("zz"));
}

TEST(Receipt, MembersAreSortedAndDuplicatesRefused) {
    EXPECT_EQ(receipt_canonical({{"b", "1"}, {"a", canonical_string("x\n")}}), "{\"a\":\"x\\n\",\"b\":1}");
    EXPECT_THROW(receipt_canonical({{"a", "1"}, {"a", "2"}}), std::invalid_argument);
}

TEST(Receipt, Base64UrlRoundTripsEveryLength) {
    std::string bytes;
    for (int n = 0; n < 70; ++n) {
        const std::string text = base64url_encode(bytes);
        EXPECT_EQ(text.find('='), std::string::npos);
        EXPECT_EQ(*base64url_decode(text), bytes);
        bytes.push_back(static_cast<char>(n * 37 + 200));
    }
    EXPECT_FALSE(base64url_decode("A"));
    EXPECT_FALSE(base64url_decode("AB+/"));
    EXPECT_FALSE(base64url_decode("AB"));  // nonzero leftover bits: not the canonical encoding
    EXPECT_EQ(*base64url_decode("AA"), std::string(1, '\0'));
}

TEST(Receipt, Ed25519SignsAndVerifies) {
    const Ed25519KeyPair pair = ed25519_generate();
    EXPECT_EQ(pair.private_key.size(), 32u);
    EXPECT_EQ(pair.public_key.size(), 32u);
    const std::string sig = ed25519_sign(pair.private_key, "message");
    EXPECT_EQ(sig.size(), 64u);
    EXPECT_TRUE(ed25519_verify(pair.public_key, "message", sig));
    EXPECT_FALSE(ed25519_verify(pair.public_key, "messagf", sig));
    const Ed25519KeyPair other = ed25519_generate();
    EXPECT_FALSE(ed25519_verify(other.public_key, "message", sig));
    std::string bad = sig;
    bad[10] ^= 1;
    EXPECT_FALSE(ed25519_verify(pair.public_key, "message", bad));
    EXPECT_FALSE(ed25519_verify("short", "message", sig));
}

// RFC 8032 section 7.1, test 1: the empty message.
TEST(Receipt, Ed25519MatchesRfc8032Vector) {
    const std::string priv = *from_hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
    const std::string pub = *from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    const std::string sig = ed25519_sign(priv, "");
    EXPECT_EQ(to_hex(sig),
              "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
    EXPECT_TRUE(ed25519_verify(pub, "", sig));
}

TEST(Receipt, UtcTimeFormatsMicrosecondsAndRefusesFarYears) {
    EXPECT_EQ(utc_time(0), "1970-01-01T00:00:00.000000Z");
    EXPECT_EQ(utc_time(1764763200123456LL), "2025-12-03T12:00:00.123456Z");
    EXPECT_EQ(utc_time(951782400000001LL), "2000-02-29T00:00:00.000001Z");  // a leap day
    EXPECT_EQ(utc_time(-1), "1969-12-31T23:59:59.999999Z");
    EXPECT_EQ(utc_time(253402300799999999LL), "9999-12-31T23:59:59.999999Z");
    EXPECT_THROW(utc_time(253402300800000000LL), std::out_of_range);
}

ReceiptFacts sample_facts() {
    ReceiptFacts f;
    f.kind = "succeeded";
    f.operation_id = "op-1";
    f.tenant = "";
    f.tool = "payments.refund";
    f.status = "succeeded";
    f.fingerprint_alg = "jcs-sha256/1";
    f.args_fingerprint = "ab";
    f.outcome_fingerprint = "cd";
    f.attempt = 1;
    f.resolved_by = std::nullopt;
    f.approved_by = "approver";
    f.at = 1000000;
    f.finished_at = 1000000;
    f.seq = 2;
    f.chain_head = "ef";
    f.key_id = "ed25519-0011";
    return f;
}

// The exact bytes a receipt's signature covers: every verifier rebuilds them from
// the receipt's members (RFC 8785 of the object without "signature").
TEST(Receipt, SignedBytesAreTheCanonicalObjectWithoutTheSignature) {
    EXPECT_EQ(receipt_canonical(receipt_members(sample_facts())),
              R"({"approved_at":null,"approved_by":"approver","args_fingerprint":"ab","at":"1970-01-01T00:00:01.000000Z",)"
              R"("attempt":1,"chain_head":"ef","fingerprint_alg":"jcs-sha256/1",)"
              R"("finished_at":"1970-01-01T00:00:01.000000Z","key_id":"ed25519-0011","kind":"succeeded",)"
              R"("operation_id":"op-1","outcome_fingerprint":"cd","resolved_by":null,"seq":2,)"
              R"("status":"succeeded","tenant":"","tool":"payments.refund","v":1})");
}

TEST(Receipt, SignedReceiptVerifiesAndAnyChangedFactDoesNot) {
    const Ed25519KeyPair pair = ed25519_generate();
    const std::string receipt = signed_receipt(sample_facts(), pair.private_key);
    const std::string signed_bytes = receipt_canonical(receipt_members(sample_facts()));
    // The receipt is the signed object with "signature" in its sorted place.
    const std::string marker = R"(,"signature":")";
    const std::size_t at = receipt.find(marker);
    ASSERT_NE(at, std::string::npos);
    const std::size_t end = receipt.find('"', at + marker.size());
    ASSERT_NE(end, std::string::npos);
    const std::string sig_text = receipt.substr(at + marker.size(), end - at - marker.size());
    EXPECT_EQ(receipt.substr(0, at) + receipt.substr(end + 1), signed_bytes);
    const std::optional<std::string> sig = base64url_decode(sig_text);
    ASSERT_TRUE(sig.has_value());
    EXPECT_TRUE(ed25519_verify(pair.public_key, signed_bytes, *sig));
    ReceiptFacts other = sample_facts();
    other.operation_id = "op-2";
    EXPECT_FALSE(ed25519_verify(pair.public_key, receipt_canonical(receipt_members(other)), *sig));
}

// signed_receipt writes the receipt in one pass in a fixed member order; the sorting
// reference (receipt_canonical) must give the same bytes, with every optional fact
// present or absent and with texts that need escaping.
TEST(Receipt, OnePassTextEqualsTheSortedMembersWithTheSignature) {
    const Ed25519KeyPair pair = ed25519_generate();
    ReceiptFacts bare = sample_facts();
    bare.outcome_fingerprint.reset();
    bare.attempt.reset();
    bare.approved_by.reset();
    bare.resolved_by.reset();
    bare.approved_at.reset();
    bare.finished_at.reset();
    ReceiptFacts full = sample_facts();
    full.resolved_by = "r\u00e9solveur \"x\"";
    full.approved_at = 1700000000123456LL;
    full.tenant = "t\n\u2028";
    full.operation_id = "op/\x01";
    for (const ReceiptFacts& f : {sample_facts(), bare, full}) {
        const std::string receipt = signed_receipt(f, pair.private_key);
        ReceiptMembers members = receipt_members(f);
        const std::string unsigned_text = receipt_canonical(members);
        const std::optional<std::string> sig = base64url_decode(
            receipt.substr(receipt.find(R"("signature":")") + 13, 86));
        ASSERT_TRUE(sig.has_value());
        EXPECT_TRUE(ed25519_verify(pair.public_key, unsigned_text, *sig));
        members.emplace_back("signature", canonical_string(base64url_encode(*sig)));
        EXPECT_EQ(receipt, receipt_canonical(members));
    }
}

}  // namespace
}  // namespace opledger::core::test
