// Strict text parsing: every rejection rule with its byte offset, and the limits.
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

TEST(Parser, AcceptsAllValueKinds) {
    EXPECT_EQ(canon(" { \"s\" : \"x\" , \"n\" : -1.5e3 , \"t\" : true , \"f\" : false , \"z\" : null , "
                    "\"a\" : [ ] , \"o\" : { } } "),
              "{\"a\":[],\"f\":false,\"n\":-1500,\"o\":{},\"s\":\"x\",\"t\":true,\"z\":null}");
    EXPECT_EQ(canon("\t\r\n42\n"), "42");
    EXPECT_EQ(canon("\"\""), "\"\"");
}

TEST(Parser, EmptyAndWhitespaceOnlyInputAreErrors) {
    text_error("", 0);
    text_error("  \n", 3);
}

TEST(Parser, TrailingGarbage) {
    EXPECT_NE(text_error("{} x", 3).find("unexpected character 'x'"), std::string::npos);
    text_error("[1]]", 3);
    text_error("1 2", 2);
}

TEST(Parser, StructuralErrorsCarryOffsets) {
    text_error("{\"a\" 1}", 5);
    text_error("{\"a\":1,}", 7);
    text_error("[1,]", 3);
    text_error("[1 2]", 3);
    text_error("{1:2}", 1);
    text_error("[", 1);
    text_error("{\"a\":", 5);
    text_error("[tru]", 1);
    text_error("[nul", 1);
    text_error("\u00a0", 0);  // non-breaking space is not JSON whitespace
    text_error("[\f]", 1);    // neither is form feed
}

TEST(Parser, NumberGrammar) {
    EXPECT_NE(text_error("[01]", 1).find("leading zeros"), std::string::npos);
    text_error("-01", 0);
    text_error("+1", 0);
    text_error(".5", 0);
    text_error("1.", 2);
    text_error("1.e5", 2);
    text_error("1e", 2);
    text_error("1e+", 3);
    text_error("-", 1);
    text_error("-a", 1);
    text_error("NaN", 0);
    text_error("Infinity", 0);
    text_error("-Infinity", 1);
    text_error("[1x]", 2);
    text_error("0x10", 1);
}

TEST(Parser, StringErrors) {
    EXPECT_NE(text_error("\"abc", 0).find("unterminated"), std::string::npos);
    EXPECT_NE(text_error("\"a\x01\"", 2).find("control"), std::string::npos);
    text_error("\"a\nb\"", 2);
    text_error("\"ab\\x\"", 3);
    text_error("\"\\u12\"", 1);
    text_error("\"\\u12G4\"", 1);
    text_error("\"abc\\", 0);
    text_error("\"0123456789abcdef0123456789\\q\"", 27);  // past the first SIMD block
}

TEST(Parser, LoneSurrogatesInEscapes) {
    EXPECT_NE(text_error("\"\\ud800\"", 1).find("lone high surrogate"), std::string::npos);
    EXPECT_NE(text_error("\"x\\udc00\"", 2).find("lone low surrogate"), std::string::npos);
    text_error("\"\\ud800\\u0041\"", 1);
    text_error("\"\\ud800x\"", 1);
    text_error("\"\\ud800\\ud800\"", 1);
    EXPECT_EQ(canon("\"\\ud83d\\ude00\""), "\"\xF0\x9F\x98\x80\"");
    EXPECT_EQ(canon("\"\\uDBFF\\uDFFF\""), "\"\xF4\x8F\xBF\xBF\"");
}

TEST(Parser, InvalidUtf8AnywhereIsRejectedWithOffset) {
    const struct {
        std::string text;
        std::size_t offset;
    } cases[] = {
        {"\"a\xC3\"", 2},                  // truncated 2-byte sequence
        {"\"\xC0\xAF\"", 1},               // overlong '/'
        {"\"\xE0\x80\xAF\"", 1},           // overlong 3-byte
        {"\"\xF0\x80\x80\xAF\"", 1},       // overlong 4-byte
        {"\"ab\xED\xA0\x80\"", 3},         // UTF-8-encoded surrogate U+D800
        {"\"\xF4\x90\x80\x80\"", 1},       // U+110000
        {"\"\xF5\x80\x80\x80\"", 1},       // invalid lead byte
        {"\"\x80\"", 1},                   // lone continuation byte
        {"\"\xFF\"", 1},
        {"[1]\xFF", 3},                    // outside strings too
        {std::string(100, ' ') + "\"\xC3\x28\"", 101},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.offset);
        EXPECT_NE(text_error(c.text, c.offset).find("invalid UTF-8"), std::string::npos);
    }
}

TEST(Parser, ValidMultibyteUtf8IsKeptRaw) {
    const std::string text = "\"\xC3\xB6\xE2\x82\xAC\xF0\x9F\x98\x80\xEF\xBF\xBF\"";
    EXPECT_EQ(canon(text), text);
}

TEST(Parser, DuplicateMemberNames) {
    EXPECT_EQ(text_error("{\"a\":1,\"a\":2}", 7), "duplicate object member name \"a\"");
    // Equal after unescaping: detected through escapes.
    text_error("{\"a\":1,\"\\u0061\":2}", 7);
    text_error("{\"\\u0061\":1,\"a\":2}", 12);
    text_error("{\"x\":{\"b\":1,\"c\":2,\"b\":3}}", 18);
    text_error("{\"\\ud83d\\ude00\":1,\"\xF0\x9F\x98\x80\":2}", 18);
    // Same name in different objects is fine.
    EXPECT_EQ(canon("{\"a\":{\"a\":1},\"b\":{\"a\":2}}"), "{\"a\":{\"a\":1},\"b\":{\"a\":2}}");
}

TEST(Parser, DepthLimitIsEnforcedWithOffset) {
    EXPECT_EQ(canon("[[[1]]]", 3), "[[[1]]]");
    const std::string message =
        expect_json_error([] { canon("[[[[1]]]]", 3); }, JsonErrorKind::too_deep, std::size_t{3});
    EXPECT_NE(message.find("3"), std::string::npos);
    expect_json_error([] { canon("{\"a\":{\"b\":[]}}", 2); }, JsonErrorKind::too_deep, std::size_t{10});
    EXPECT_EQ(canon("1", 0), "1");
    expect_json_error([] { canon("[]", 0); }, JsonErrorKind::too_deep, std::size_t{0});
}

TEST(Parser, DeepNestingNeverUsesTheMachineStack) {
    const std::size_t depth = 1000000;
    const std::string text = std::string(depth, '[') + std::string(depth, ']');
    EXPECT_EQ(canon(text, depth), text);
    expect_json_error([&] { canon(text, depth - 1); }, JsonErrorKind::too_deep, depth - 1);
    const std::string unclosed = std::string(500000, '[') + "1";
    expect_json_error([&] { canon(unclosed, depth); }, JsonErrorKind::invalid_text, std::size_t{500001});
}

TEST(Parser, ParseJsonTextOwnsItsText) {
    std::string text = "{\"k\":\"value\",\"e\":\"a\\nb\"}";
    Document document = parse_json_text(text, ParseLimits{});
    text.assign(text.size(), 'X');  // the caller's buffer changes; the document must not
    EXPECT_EQ(document.canonical(), "{\"e\":\"a\\nb\",\"k\":\"value\"}");
    Document moved = std::move(document);
    EXPECT_EQ(moved.canonical(), "{\"e\":\"a\\nb\",\"k\":\"value\"}");
    EXPECT_EQ(document.canonical(), "");  // moved-from: no value
}

TEST(Parser, LargeInputsWithLongStrings) {
    std::string big = "[\"" + std::string(3 * 1024 * 1024, 'a') + "\",\"" + std::string(100000, 'b') + "\\n\"]";
    const std::string out = canon(big);
    EXPECT_EQ(out.size(), big.size());
    EXPECT_EQ(out, big);
}

}  // namespace
}  // namespace opledger::core::test
