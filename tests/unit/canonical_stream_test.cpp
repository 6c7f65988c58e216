// CanonicalStream: the event-driven writer the PostgreSQL layer drives from jsonb.
// Its bytes must equal the Document writer's for the same value.
#include <algorithm>
#include <string>
#include <vector>

#include "core/canonical_stream.hpp"
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

std::string hex(const Sha256Digest& digest) {
    static const char kDigits[] = "0123456789abcdef";
    std::string out;
    for (auto byte : digest) {
        out.push_back(kDigits[byte >> 4]);
        out.push_back(kDigits[byte & 15]);
    }
    return out;
}

std::vector<std::uint32_t> order_of(const std::vector<std::string_view>& names) {
    std::vector<std::uint32_t> order(names.size());
    sort_members_utf16(names.data(), order.data(), names.size());
    return order;
}

TEST(CanonicalStream, WritesSeparatorsAndLiterals) {
    std::string out;
    CanonicalStream stream(out);
    stream.begin_object();
    stream.name("a");
    stream.begin_array();
    stream.null();
    stream.boolean(true);
    stream.boolean(false);
    stream.begin_object();
    stream.end_object();
    stream.begin_array();
    stream.end_array();
    stream.number("1.50");
    stream.end_array();
    stream.name("b");
    stream.string("x");
    stream.end_object();
    stream.finish();
    EXPECT_EQ(out, "{\"a\":[null,true,false,{},[],1.5],\"b\":\"x\"}");
}

TEST(CanonicalStream, EscapesLikeTheDocumentWriter) {
    const std::string raw = std::string("\"\\\b\f\n\r\t\x01\x1f/\x7f", 11) + "\xE2\x82\xAC";
    std::string out;
    CanonicalStream stream(out);
    stream.begin_object();
    stream.name(raw);
    stream.string(raw);
    stream.end_object();
    stream.finish();
    const std::string escaped = "\"\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f/\x7F\xE2\x82\xAC\"";
    EXPECT_EQ(out, "{" + escaped + ":" + escaped + "}");
    EXPECT_EQ(out, canon("{\"\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f/\\u007f\\u20ac\":"
                         "\"\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f/\\u007f\\u20ac\"}"));
}

TEST(CanonicalStream, FormatsNumbersAndRejectsInexactOnes) {
    std::string out;
    CanonicalStream stream(out);
    stream.begin_array();
    for (const char* number : {"0", "-0", "100", "1.50", "1e21", "1E-7", "123456789012345", "0.000001"})
        stream.number(number);
    stream.end_array();
    stream.finish();
    EXPECT_EQ(out, "[0,0,100,1.5,1e+21,1e-7,123456789012345,0.000001]");

    std::string ignored;
    CanonicalStream bad(ignored);
    expect_json_error([&] { bad.number("9007199254740993"); }, JsonErrorKind::inexact_number, std::nullopt);
    expect_json_error([&] { bad.number("NaN"); }, JsonErrorKind::invalid_text, std::nullopt);
    expect_json_error([&] { bad.number("1.5x"); }, JsonErrorKind::invalid_text, std::nullopt);
    expect_json_error([&] { bad.number(""); }, JsonErrorKind::invalid_text, std::nullopt);
}

TEST(CanonicalStream, DigestEqualsSha256OfTextAcrossBufferRefills) {
    // Enough output to refill the 8 KB buffer many times, with long strings that
    // bypass it and escapes that straddle its end.
    std::string text_out;
    CanonicalStream text(text_out);
    CanonicalStream digest;
    for (CanonicalStream* stream : {&text, &digest}) {
        stream->begin_array();
        for (int i = 0; i < 3000; ++i) {
            stream->string(std::string(static_cast<std::size_t>(i % 97), 'x') + "\n\"");
            stream->number(std::to_string(i) + ".25");
        }
        stream->string(std::string(100000, 'y'));
        stream->end_array();
    }
    text.finish();
    EXPECT_GT(text_out.size(), 200000u);
    EXPECT_EQ(hex(digest.finish_sha256()), hex(sha256(text_out)));
    EXPECT_EQ(text_out, canon(text_out));  // the output is canonical JSON already
}

TEST(SortMembersUtf16, Rfc8785SortingExample) {
    // RFC 8785 §3.2.3 names, in the order they are given there.
    const std::vector<std::string_view> names = {"\xE2\x82\xAC", "\r", "\xEF\xAC\xB3", "1",
                                                 "\xF0\x9F\x98\x80", "\xC2\x80", "\xC3\xB6"};
    EXPECT_EQ(order_of(names), (std::vector<std::uint32_t>{1, 3, 5, 6, 0, 4, 2}));
}

TEST(SortMembersUtf16, AgreesWithCompareUtf16OnWideObjects) {
    // More names than the insertion-sort cutoff, including prefixes of each other.
    std::vector<std::string> storage;
    for (int i = 0; i < 200; ++i) storage.push_back(std::string(static_cast<std::size_t>(i % 7), 'a') + std::to_string(i * 7919 % 1000));
    storage.push_back("");
    storage.push_back("\xF0\x9F\x98\x80");
    storage.push_back("\xEF\xAC\x80");
    const std::vector<std::string_view> names(storage.begin(), storage.end());
    const auto order = order_of(names);
    ASSERT_EQ(order.size(), names.size());
    for (std::size_t i = 1; i < order.size(); ++i)
        EXPECT_LT(compare_utf16(names[order[i - 1]], names[order[i]]), 0) << i;
    std::vector<std::uint32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint32_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], i);
}

}  // namespace
}  // namespace opledger::core::test
