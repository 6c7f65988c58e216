// RFC 6901 pointers: parsing, exclude/redact while writing, and Document::diff.
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

std::string write_with(std::string_view text, const std::vector<std::string>& exclude,
                       const std::vector<std::string>& redact) {
    const PointerSet excluded = PointerSet::parse(exclude);
    const PointerSet redacted = PointerSet::parse(redact);
    WriteOptions options;
    options.exclude = &excluded;
    options.redact = &redacted;
    return parse_json_text(text, ParseLimits{}).canonical(options);
}

Document doc(std::string_view text) { return parse_json_text(text, ParseLimits{}); }

TEST(PointerSet, RejectsMalformedPointers) {
    for (const char* bad : {"a", "/~2", "/~", "/a~", "a/b", "/x/~a"}) {
        SCOPED_TRACE(bad);
        expect_json_error([&] { PointerSet::parse({bad}); }, JsonErrorKind::invalid_pointer, std::nullopt);
    }
    EXPECT_TRUE(PointerSet::parse({}).empty());
    EXPECT_FALSE(PointerSet::parse({""}).empty());
    EXPECT_FALSE(PointerSet::parse({"/", "/a/~0~1", "/-"}).empty());
}

TEST(PointerSet, ExcludeMembersAndElements) {
    const std::string text = "{\"a\":1,\"trace_id\":\"t-1\",\"b\":{\"c\":[10,20,30],\"d\":2}}";
    EXPECT_EQ(write_with(text, {"/trace_id"}, {}), "{\"a\":1,\"b\":{\"c\":[10,20,30],\"d\":2}}");
    EXPECT_EQ(write_with(text, {"/b/c/1"}, {}), "{\"a\":1,\"b\":{\"c\":[10,30],\"d\":2},\"trace_id\":\"t-1\"}");
    EXPECT_EQ(write_with(text, {"/b/c/0", "/b/c/2", "/a"}, {}), "{\"b\":{\"c\":[20],\"d\":2},\"trace_id\":\"t-1\"}");
    EXPECT_EQ(write_with(text, {"/b"}, {}), "{\"a\":1,\"trace_id\":\"t-1\"}");
    // Non-matching pointers change nothing: missing member, bad index spellings.
    EXPECT_EQ(write_with(text, {"/zz", "/b/c/01", "/b/c/-", "/b/c/9", "/a/x"}, {}), canon(text));
    EXPECT_EQ(write_with(text, {""}, {}), "") << "excluding the root leaves nothing";
}

TEST(PointerSet, EscapedTokensMatchUnescapedNames) {
    const std::string text = "{\"a/b\":1,\"m~n\":2,\"\":3,\"k\":4}";
    EXPECT_EQ(write_with(text, {"/a~1b", "/m~0n"}, {}), "{\"\":3,\"k\":4}");
    EXPECT_EQ(write_with(text, {"/"}, {}), "{\"a/b\":1,\"k\":4,\"m~n\":2}") << "\"/\" names the empty key";
}

TEST(PointerSet, RedactWritesPlaceholder) {
    const std::string text = "{\"card\":{\"pan\":\"4111\",\"cvv\":123},\"items\":[{\"secret\":[1,2]},{\"x\":1}]}";
    EXPECT_EQ(write_with(text, {}, {"/card/cvv", "/items/0/secret"}),
              "{\"card\":{\"cvv\":\"[REDACTED]\",\"pan\":\"4111\"},\"items\":[{\"secret\":\"[REDACTED]\"},{\"x\":1}]}");
    EXPECT_EQ(write_with(text, {}, {""}), "\"[REDACTED]\"");
    EXPECT_EQ(write_with(text, {"/card"}, {"/card/cvv"}), "{\"items\":[{\"secret\":[1,2]},{\"x\":1}]}")
        << "exclude wins over redact";
    EXPECT_EQ(write_with(text, {"/card/pan"}, {"/card/cvv"}), "{\"card\":{\"cvv\":\"[REDACTED]\"},\"items\":"
                                                              "[{\"secret\":[1,2]},{\"x\":1}]}");
}

TEST(Diff, ReportsMissingChangedAndRetypedMembersInCanonicalOrder) {
    const Document a = doc("{\"z\":1,\"a\":{\"x\":[1,2],\"y\":\"s\"},\"only_a\":true,\"n\":1.0}");
    const Document b = doc("{\"a\":{\"x\":[1,3],\"y\":2},\"z\":1,\"only_b\":null,\"n\":1}");
    EXPECT_EQ(Document::diff(a, b), (std::vector<std::string>{"/a/x/1", "/a/y", "/only_a", "/only_b"}));
    EXPECT_TRUE(Document::diff(a, a).empty());
}

TEST(Diff, ArraysOfDifferentLengthAreReportedWhole) {
    EXPECT_EQ(Document::diff(doc("{\"l\":[1,2]}"), doc("{\"l\":[1,2,3]}")), (std::vector<std::string>{"/l"}));
    EXPECT_EQ(Document::diff(doc("[1]"), doc("{}")), (std::vector<std::string>{""}));
    EXPECT_EQ(Document::diff(doc("true"), doc("false")), (std::vector<std::string>{""}));
}

TEST(Diff, IgnoreAndLimitAndEscaping) {
    const Document a = doc("{\"a/b\":1,\"m~\":2,\"t\":3,\"u\":[0,{\"v\":1}]}");
    const Document b = doc("{\"a/b\":2,\"m~\":3,\"t\":4,\"u\":[0,{\"v\":2}]}");
    EXPECT_EQ(Document::diff(a, b), (std::vector<std::string>{"/a~1b", "/m~0", "/t", "/u/1/v"}));
    const PointerSet ignore = PointerSet::parse({"/t", "/u/1"});
    EXPECT_EQ(Document::diff(a, b, &ignore), (std::vector<std::string>{"/a~1b", "/m~0"}));
    EXPECT_EQ(Document::diff(a, b, nullptr, 2), (std::vector<std::string>{"/a~1b", "/m~0"}));
    EXPECT_TRUE(Document::diff(a, b, nullptr, 0).empty());
    const PointerSet all = PointerSet::parse({""});
    EXPECT_TRUE(Document::diff(a, b, &all).empty());
    const PointerSet missing = PointerSet::parse({"/only"});
    EXPECT_TRUE(Document::diff(doc("{\"only\":1}"), doc("{}"), &missing).empty());
}

TEST(Diff, DeepDocumentsDoNotRecurse) {
    ParseLimits limits;
    limits.max_depth = 200000;
    const std::string deep_a = std::string(200000, '[') + "1" + std::string(200000, ']');
    const std::string deep_b = std::string(200000, '[') + "2" + std::string(200000, ']');
    const auto found = Document::diff(parse_json_text(deep_a, limits), parse_json_text(deep_b, limits));
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].size(), 400000u);  // "/0" per level
}

}  // namespace
}  // namespace opledger::core::test
