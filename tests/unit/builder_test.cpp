// DocumentBuilder builds the same documents as the text parser and enforces the
// same rules.
#include <memory_resource>
#include <stdexcept>
#include <string>

#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

TEST(Builder, MatchesTheParser) {
    DocumentBuilder builder{ParseLimits{}};
    builder.begin_object();
    builder.key("b");
    builder.begin_array();
    builder.number("1.50");
    builder.number("-0");
    builder.number("1e5");
    builder.string("line\nbreak \"q\" \x01 \xC3\xA9");
    builder.boolean(true);
    builder.boolean(false);
    builder.null();
    builder.begin_object();
    builder.end_object();
    builder.end_array();
    builder.key("\xE2\x82\xAC");
    builder.number("12");
    builder.key("\xF0\x9F\x98\x80");
    builder.null();
    builder.key("a");
    builder.string("");
    builder.end_object();
    const std::string built = builder.finish().canonical();
    const std::string parsed = canon(
        "{\"b\":[1.50,-0,1e5,\"line\\nbreak \\\"q\\\" \\u0001 \\u00e9\",true,false,null,{}],"
        "\"\\u20ac\":12,\"\\ud83d\\ude00\":null,\"a\":\"\"}");
    EXPECT_EQ(built, parsed);
    EXPECT_EQ(built,
              "{\"a\":\"\",\"b\":[1.5,0,100000,\"line\\nbreak \\\"q\\\" \\u0001 \xC3\xA9\",true,false,null,{}],"
              "\"\xE2\x82\xAC\":12,\"\xF0\x9F\x98\x80\":null}");
}

TEST(Builder, ScalarRootAndEquivalentDiff) {
    DocumentBuilder builder{ParseLimits{}};
    builder.number("295147905179352830000");
    const Document built = builder.finish();
    EXPECT_EQ(built.canonical(), "295147905179352830000");
    EXPECT_TRUE(Document::diff(built, parse_json_text("2.9514790517935283e20", ParseLimits{})).empty());
}

TEST(Builder, DuplicateNamesAreRejected) {
    DocumentBuilder builder{ParseLimits{}};
    builder.begin_object();
    builder.key("a");
    builder.number("1");
    builder.key("a");
    builder.number("2");
    const std::string message =
        expect_json_error([&] { builder.end_object(); }, JsonErrorKind::invalid_text, std::nullopt);
    EXPECT_EQ(message, "duplicate object member name \"a\"");
}

TEST(Builder, InexactAndMalformedNumbers) {
    DocumentBuilder builder{ParseLimits{}};
    builder.begin_array();
    expect_json_error([&] { builder.number("9007199254740993"); }, JsonErrorKind::inexact_number, std::nullopt);
    expect_json_error([&] { builder.number("NaN"); }, JsonErrorKind::invalid_text, std::nullopt);
    expect_json_error([&] { builder.number("1."); }, JsonErrorKind::invalid_text, std::nullopt);
}

TEST(Builder, InvalidUtf8IsRejected) {
    DocumentBuilder builder{ParseLimits{}};
    builder.begin_object();
    expect_json_error([&] { builder.key("\xED\xA0\x80"); }, JsonErrorKind::invalid_text, std::nullopt);
    builder.key("k");
    expect_json_error([&] { builder.string("\xC3"); }, JsonErrorKind::invalid_text, std::nullopt);
}

// Input that the caller has validated already (jsonb from a UTF-8 database) is not
// checked again; the output is the same as with checking.
TEST(Builder, AlreadyValidUtf8SkipsTheCheckOnly) {
    const auto build = [](DocumentBuilder::Utf8 utf8) {
        DocumentBuilder builder{ParseLimits{}, utf8};
        builder.begin_object();
        builder.key("caf\xC3\xA9");
        builder.string("\xF0\x9F\x98\x80 \"quoted\"");
        builder.end_object();
        return builder.finish().canonical();
    };
    EXPECT_EQ(build(DocumentBuilder::Utf8::verify), build(DocumentBuilder::Utf8::already_valid));
    EXPECT_EQ(build(DocumentBuilder::Utf8::verify), "{\"caf\xC3\xA9\":\"\xF0\x9F\x98\x80 \\\"quoted\\\"\"}");
    DocumentBuilder trusting{ParseLimits{}, DocumentBuilder::Utf8::already_valid};
    EXPECT_NO_THROW(trusting.string("\xC3"));  // not checked: the caller vouched for it
}

// Borrowed names and strings are written from the caller's bytes (no copy), and a
// reserved, pooled builder gives the same document as a plain one.
TEST(Builder, BorrowedStringsAndReserveGiveTheSameDocument) {
    std::string name = "b";
    std::string text = "tab\there";
    const auto build = [&](DocumentBuilder::Storage storage, std::pmr::memory_resource* memory) {
        DocumentBuilder builder{ParseLimits{}, DocumentBuilder::Utf8::verify, memory};
        builder.reserve(16);
        builder.begin_object();
        builder.key(name, storage);
        builder.string(text, storage);
        builder.key("a", storage);
        builder.number("1.50");
        builder.end_object();
        return builder.finish();
    };
    std::pmr::monotonic_buffer_resource pool;
    const Document copied = build(DocumentBuilder::Storage::copy, std::pmr::get_default_resource());
    const Document borrowed = build(DocumentBuilder::Storage::borrow, &pool);
    EXPECT_EQ(copied.canonical(), "{\"a\":1.5,\"b\":\"tab\\there\"}");
    EXPECT_EQ(borrowed.canonical(), copied.canonical());
    text[0] = 'T';  // a borrowed string is a view: the caller's bytes are what gets written
    EXPECT_EQ(borrowed.canonical(), "{\"a\":1.5,\"b\":\"Tab\\there\"}");
    EXPECT_EQ(copied.canonical(), "{\"a\":1.5,\"b\":\"tab\\there\"}");
}

TEST(Builder, DepthLimit) {
    ParseLimits limits;
    limits.max_depth = 2;
    DocumentBuilder builder{limits};
    builder.begin_array();
    builder.begin_object();
    builder.key("x");
    expect_json_error([&] { builder.begin_array(); }, JsonErrorKind::too_deep, std::nullopt);
}

TEST(Builder, MillionDeepArrayWritesIteratively) {
    const std::size_t depth = 1000000;
    ParseLimits limits;
    limits.max_depth = depth;
    DocumentBuilder builder{limits};
    for (std::size_t i = 0; i < depth; ++i) builder.begin_array();
    for (std::size_t i = 0; i < depth; ++i) builder.end_array();
    const std::string out = builder.finish().canonical();
    EXPECT_EQ(out, std::string(depth, '[') + std::string(depth, ']'));
}

TEST(Builder, MisuseIsALogicError) {
    {
        DocumentBuilder builder{ParseLimits{}};
        EXPECT_THROW(builder.finish(), std::logic_error);
    }
    {
        DocumentBuilder builder{ParseLimits{}};
        builder.begin_object();
        EXPECT_THROW(builder.null(), std::logic_error);  // value without key
        EXPECT_THROW(builder.end_array(), std::logic_error);
    }
    {
        DocumentBuilder builder{ParseLimits{}};
        builder.null();
        EXPECT_THROW(builder.null(), std::logic_error);  // second root
        EXPECT_THROW(builder.key("k"), std::logic_error);
    }
}

}  // namespace
}  // namespace opledger::core::test
