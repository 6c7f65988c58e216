// RFC 8785 output: ordering, escaping, whitespace, and compare_utf16.
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

TEST(Writer, RemovesWhitespaceAndKeepsArrayOrder) {
    EXPECT_EQ(canon("[ 3 , 1 , 2 ]"), "[3,1,2]");
    EXPECT_EQ(canon("{ \"b\" : [ { \"d\" : 1 , \"c\" : 2 } ] , \"a\" : { } }"), "{\"a\":{},\"b\":[{\"c\":2,\"d\":1}]}");
}

TEST(Writer, Rfc8785SortingExample) {
    // RFC 8785 §3.2.3: names "\u20ac", "\r", "\ufb33", "1", "\ud83d\ude00", "\u0080", "\u00f6".
    const std::string input =
        "{\"\\u20ac\":\"Euro Sign\",\"\\r\":\"Carriage Return\",\"\\ufb33\":\"Hebrew Letter Dalet With Dagesh\","
        "\"1\":\"One\",\"\\ud83d\\ude00\":\"Emoji: Grinning Face\",\"\\u0080\":\"Control\","
        "\"\\u00f6\":\"Latin Small Letter O With Diaeresis\"}";
    const std::string expected =
        "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xC2\x80\":\"Control\","
        "\"\xC3\xB6\":\"Latin Small Letter O With Diaeresis\",\"\xE2\x82\xAC\":\"Euro Sign\","
        "\"\xF0\x9F\x98\x80\":\"Emoji: Grinning Face\",\"\xEF\xAC\xB3\":\"Hebrew Letter Dalet With Dagesh\"}";
    EXPECT_EQ(canon(input), expected);
}

TEST(Writer, Rfc8785StringEscaping) {
    // Only \" \\ \b \f \n \r \t and \u00xx (lowercase) for other controls.
    EXPECT_EQ(canon("\"\\u0022\\u005c\\u0008\\u000c\\u000a\\u000d\\u0009\""), "\"\\\"\\\\\\b\\f\\n\\r\\t\"");
    EXPECT_EQ(canon("\"\\u0000\\u0001\\u001F\\u001e\""), "\"\\u0000\\u0001\\u001f\\u001e\"");
    // Everything else raw: '/', DEL, U+2028, non-ASCII.
    EXPECT_EQ(canon("\"\\/\\u007f\\u2028\\u00e9\""), "\"/\x7F\xE2\x80\xA8\xC3\xA9\"");
    EXPECT_EQ(canon("\"\\u0041\\u20AC\""), "\"A\xE2\x82\xAC\"");
    // RFC 8785 §3.2.2.2 example.
    EXPECT_EQ(canon("{\"string\":\"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\"}"),
              "{\"string\":\"\xE2\x82\xAC$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}

TEST(Writer, Rfc8785FullExample) {
    // RFC 8785 §3.2.2 input and §3.2.3 output (the "numbers" array and the literals).
    const std::string input =
        "{\n  \"numbers\": [333333333.33333329, 1E30, 4.50,\n              2e-3, 0.000000000000000000000000001],\n"
        "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
        "  \"literals\": [null, true, false]\n}";
    // 333333333.33333329 is not the exact decimal of its double, so by the ledger's
    // exactness rule (refuse, never round) it is rejected; RFC 8785 itself would round it.
    expect_json_error([&] { canon(input); }, JsonErrorKind::inexact_number, std::size_t{16});
    std::string exact = input;
    exact.replace(exact.find("333333333.33333329"), 18, "333333333.3333333");
    EXPECT_EQ(canon(exact),
              "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
              "\"string\":\"\xE2\x82\xAC$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}

TEST(Writer, EscapedKeysAreSortedByTheirValue) {
    EXPECT_EQ(canon("{\"b\":1,\"\\u0061\":2,\"\\n\":3}"), "{\"\\n\":3,\"a\":2,\"b\":1}");
}

TEST(Writer, OutputIsIdempotent) {
    const std::string once = canon("{\"z\":[1.0,\"\\u0001\",{\"y\":-0,\"x\":1e21}],\"\\u00e9\":null}");
    EXPECT_EQ(once, "{\"z\":[1,\"\\u0001\",{\"x\":1e+21,\"y\":0}],\"\xC3\xA9\":null}");
    EXPECT_EQ(canon(once), once);
}

TEST(Writer, WriteCanonicalAppends) {
    const Document document = parse_json_text("[1]", ParseLimits{});
    std::string out = "prefix:";
    document.write_canonical(out);
    EXPECT_EQ(out, "prefix:[1]");
}

TEST(CompareUtf16, EdgeCases) {
    EXPECT_EQ(compare_utf16("", ""), 0);
    EXPECT_LT(compare_utf16("", "a"), 0);
    EXPECT_GT(compare_utf16("ab", "a"), 0);
    EXPECT_LT(compare_utf16("a", "b"), 0);
    EXPECT_EQ(compare_utf16("same-long-name-0123456789", "same-long-name-0123456789"), 0);
    EXPECT_LT(compare_utf16("same-long-name-0123456788", "same-long-name-0123456789"), 0);
    // U+FFFF (EF BF BF) vs U+10000 (F0 90 80 80): UTF-16 D800 < FFFF, so the emoji side first.
    EXPECT_GT(compare_utf16("\xEF\xBF\xBF", "\xF0\x90\x80\x80"), 0);
    EXPECT_LT(compare_utf16("\xF0\x9F\x98\x80", "\xEE\x80\x80"), 0);  // U+1F600 < U+E000 in UTF-16
    // U+D7FF (ED 9F BF) stays before supplementary characters, as in code point order.
    EXPECT_LT(compare_utf16("\xED\x9F\xBF", "\xF0\x90\x80\x80"), 0);
    // Within the same class, plain code point order.
    EXPECT_LT(compare_utf16("\xE2\x82\xAC", "\xEF\xAC\xB3"), 0);
    EXPECT_LT(compare_utf16("\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"), 0);
    EXPECT_LT(compare_utf16("\x7F", "\xC2\x80"), 0);
    // The difference after a long equal prefix (past an 8-byte block).
    EXPECT_GT(compare_utf16("0123456789\xEF\xBF\xBF", "0123456789\xF0\x90\x80\x80"), 0);
    EXPECT_LT(compare_utf16("01234567\xF0\x90\x80\x80", "01234567\xEE\x80\x80"), 0);
}

}  // namespace
}  // namespace opledger::core::test
