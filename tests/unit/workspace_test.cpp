// Workspace: every retained byte comes from the caller's memory_resource, trim()
// gives it back, reuse does not grow it, and the workspace path (write-only parse,
// streamed output and hash) produces exactly what the Document path produces.
#include <cstdint>
#include <memory_resource>
#include <optional>
#include <string>
#include <vector>

#include "core/string_scan.hpp"
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

// Counts what is outstanding from new_delete_resource through this resource.
class CountingResource final : public std::pmr::memory_resource {
public:
    std::size_t outstanding() const { return outstanding_; }
    std::size_t allocations() const { return allocations_; }

private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override {
        outstanding_ += bytes;
        ++allocations_;
        return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
        outstanding_ -= bytes;
        std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    }
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

    std::size_t outstanding_ = 0;
    std::size_t allocations_ = 0;
};

// Deterministic generator of varied JSON texts: nesting, unsorted and same-shaped
// objects, escapes canonical and not, non-ASCII names, numbers on and off the fast path.
class JsonGenerator {
public:
    explicit JsonGenerator(std::uint64_t seed) : state_(seed) {}

    std::string document(int depth = 0) {
        std::string out;
        value(out, depth);
        return out;
    }

private:
    std::uint32_t next() {
        state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<std::uint32_t>(state_ >> 33);
    }
    std::size_t below(std::size_t n) { return next() % n; }

    void string(std::string& out) {
        static const char* const pieces[] = {"a", "tool", "na\xC3\xAFve", "\xE6\x9D\xB1\xE4\xBA\xAC", "\xF0\x9F\x98\x80",
                                             "\xEE\x80\x80", "\\n", "\\\"", "\\\\", "\\u001f", "\\u001F", "\\/",
                                             "\\u0041", "\\u00e9", "\\ud83d\\ude00", "\\b", "\\u0000", " ", "long_name"};
        out += '"';
        for (std::size_t i = below(6); i > 0; --i) out += pieces[below(sizeof pieces / sizeof pieces[0])];
        out += '"';
    }

    void number(std::string& out) {
        static const char* const numbers[] = {"0", "-0", "7", "-42", "0.616", "-0.5", "1.10", "1e2", "1E-7", "0.000001",
                                              "0.0000001", "123456789012.345", "0.1234567890123456", "295147905179352830000",
                                              "1e21", "-1.5e-300", "999999999999999"};
        out += numbers[below(sizeof numbers / sizeof numbers[0])];
    }

    void value(std::string& out, int depth) {
        const std::size_t kind = depth > 4 ? below(5) : below(8);
        switch (kind) {
            case 0: return string(out);
            case 1: return number(out);
            case 2: out += below(2) ? "true" : "false"; return;
            case 3: out += "null"; return;
            case 4: return string(out);
            case 5: {  // array, often of same-shaped objects
                out += "[ ";
                const std::size_t n = below(6);
                const bool rows = below(2) == 0;
                for (std::size_t i = 0; i < n; ++i) {
                    if (i) out += ", ";
                    if (rows)
                        out += "{\"zeta\": " + std::to_string(i) + ", \"alpha\": " + std::to_string(i * 3) +
                               ", \"mid\": true}";
                    else
                        value(out, depth + 1);
                }
                out += " ]";
                return;
            }
            default: {  // object with unique names (a counter suffix keeps them distinct)
                out += "{";
                const std::size_t n = below(7);
                for (std::size_t i = 0; i < n; ++i) {
                    if (i) out += ",\n  ";
                    std::string name;
                    string(name);
                    name.insert(name.size() - 1, "#" + std::to_string(n - i));
                    out += name + " : ";
                    value(out, depth + 1);
                }
                out += "}";
            }
        }
    }

    std::uint64_t state_;
};

TEST(Workspace, RetainedMemoryComesFromUpstreamAndTrimReturnsIt) {
    CountingResource upstream;
    {
        Workspace workspace(&upstream);
        std::string out;
        canonicalize_text(R"({"b": [1, 2.5, "x\ny"], "a": {"\u00e9": null}})", ParseLimits{}, workspace, out);
        EXPECT_EQ(out, "{\"a\":{\"\xC3\xA9\":null},\"b\":[1,2.5,\"x\\ny\"]}");
        EXPECT_GT(upstream.allocations(), 0u);
        EXPECT_GT(upstream.outstanding(), 0u);
        EXPECT_EQ(workspace.retained_bytes(), upstream.outstanding());

        const std::size_t before = workspace.retained_bytes();
        workspace.trim(before);  // nothing beyond the keep size: nothing returned
        EXPECT_EQ(workspace.retained_bytes(), before);
        workspace.trim(0);
        EXPECT_EQ(workspace.retained_bytes(), 0u);
        EXPECT_EQ(upstream.outstanding(), 0u);

        // Still usable after giving everything back.
        canonicalize_text("[3,1]", ParseLimits{}, workspace, out);
        EXPECT_EQ(out, "[3,1]");
        EXPECT_EQ(workspace.retained_bytes(), upstream.outstanding());
    }
    EXPECT_EQ(upstream.outstanding(), 0u);  // the destructor gives back the rest
}

TEST(Workspace, TrimKeepsAtMostTheKeepSize) {
    CountingResource upstream;
    Workspace workspace(&upstream);
    std::string big = "[";
    for (int i = 0; i < 50000; ++i) big += (i ? ",\"v\\u00e9" : "\"v\\u00e9") + std::to_string(i) + "\"";
    big += "]";
    std::string out;
    canonicalize_text(big, ParseLimits{}, workspace, out);
    ASSERT_GT(workspace.retained_bytes(), 256u * 1024);
    workspace.trim(64 * 1024);
    EXPECT_LE(workspace.retained_bytes(), 64u * 1024);
    EXPECT_EQ(workspace.retained_bytes(), upstream.outstanding());
}

TEST(Workspace, RepeatedCallsDoNotGrowRetainedMemory) {
    CountingResource upstream;
    Workspace workspace(&upstream);
    JsonGenerator generator(7);
    std::string text = "[";
    for (int i = 0; i < 200; ++i) text += (i ? "," : "") + generator.document();
    text += "]";
    std::string out;
    canonicalize_text(text, ParseLimits{}, workspace, out);
    (void)canonical_sha256_text(text, ParseLimits{}, workspace);
    const std::size_t retained = workspace.retained_bytes();
    const std::size_t allocations = upstream.allocations();
    for (int i = 0; i < 20; ++i) {
        canonicalize_text(text, ParseLimits{}, workspace, out);
        (void)canonical_sha256_text(text, ParseLimits{}, workspace);
    }
    EXPECT_EQ(workspace.retained_bytes(), retained);
    EXPECT_EQ(upstream.allocations(), allocations);  // reused, not reallocated
}

TEST(Workspace, ErrorsLeaveTheWorkspaceUsableAndOutCleared) {
    Workspace workspace;
    std::string out = "stale";
    EXPECT_THROW(canonicalize_text("{\"a\":1,\"a\":2}", ParseLimits{}, workspace, out), JsonError);
    EXPECT_THROW(canonicalize_text("[1e400]", ParseLimits{}, workspace, out), JsonError);
    EXPECT_THROW((void)canonical_sha256_text("[\"\\ud800\"]", ParseLimits{}, workspace), JsonError);
    canonicalize_text("{\"b\":1,\"a\":[]}", ParseLimits{}, workspace, out);
    EXPECT_EQ(out, "{\"a\":[],\"b\":1}");
}

TEST(Workspace, MatchesTheDocumentPathAndStreamedHashMatches) {
    Workspace workspace;
    JsonGenerator generator(42);
    int valid = 0;
    for (int i = 0; i < 3000; ++i) {
        const std::string text = generator.document();
        std::string expected;
        try {
            expected = parse_json_text(text, ParseLimits{}).canonical();
        } catch (const JsonError& error) {  // e.g. an inexact number or a lone surrogate: same error both ways
            EXPECT_THROW(canonicalize_text(text, ParseLimits{}), JsonError) << text;
            EXPECT_THROW((void)canonical_sha256_text(text, ParseLimits{}, workspace), JsonError) << text;
            continue;
        }
        ++valid;
        std::string out;
        canonicalize_text(text, ParseLimits{}, workspace, out);
        ASSERT_EQ(out, expected) << text;
        ASSERT_EQ(canonicalize_text(text, ParseLimits{}), expected) << text;
        ASSERT_EQ(canonical_sha256_text(text, ParseLimits{}, workspace), sha256(expected)) << text;
    }
    EXPECT_GT(valid, 1000);
}

TEST(Workspace, StreamsOutputLargerThanItsBuffer) {
    // One string far larger than the staging buffer, and many members around it.
    std::string text = "{\"z\":\"" + std::string(200000, 'x') + "\\n\",\"a\":[";
    for (int i = 0; i < 20000; ++i) text += (i ? "," : "") + std::to_string(i) + ".5";
    text += "],\"m\":\"" + std::string(70000, 'y') + "\\u0041\"}";
    const std::string expected = parse_json_text(text, ParseLimits{}).canonical();
    ASSERT_GT(expected.size(), 300000u);
    Workspace workspace;
    std::string out;
    canonicalize_text(text, ParseLimits{}, workspace, out);
    EXPECT_EQ(out, expected);
    EXPECT_EQ(canonical_sha256_text(text, ParseLimits{}, workspace), sha256(expected));
}

TEST(Workspace, KeepsCanonicalEscapesAndRewritesOthers) {
    EXPECT_EQ(canon(R"(["a\u001fb\n\"\\\t\b\f\r"])"), R"(["a\u001fb\n\"\\\t\b\f\r"])");
    EXPECT_EQ(canon(R"(["\u001F", "\/", "\u0041", "\u00e9", "\u000a", "\u007f"])"),
              "[\"\\u001f\",\"/\",\"A\",\"\xC3\xA9\",\"\\n\",\"\x7F\"]");
    EXPECT_EQ(canon(R"(["\ud83d\ude00"])"), "[\"\xF0\x9F\x98\x80\"]");
}

// Strings with escapes around the 64-byte steps of the write-only parse's string scan
// (escapes found by bit arithmetic): escapes, backslash runs, other escapes and errors
// at every offset; bytes and errors must be those of the Document path. Returns how
// many texts were valid.
int check_long_strings_with_escapes() {
    Workspace workspace;
    const std::string fillers[] = {"", "a", std::string(62, 'b'), std::string(63, 'c'), std::string(64, 'd'),
                                   std::string(65, 'e'), std::string(129, 'f')};
    const std::string tails[] = {"\\\\",    "\\\"",    "\\\\\\\"", "\\\\\\\\",      "\\\\\\\\\\\"", "\\/",
                                 "\\u0041", "\\u001f", "\\u00e9",  "\\b\\f\\r\\t", "\x01",         "\xC3\xA9",
                                 "\\x",     "\\",      "\\\\\\"};
    const std::string trails[] = {"", std::string(70, 'z')};
    int valid = 0;
    for (std::size_t lead = 0; lead < 70; ++lead) {
        for (const std::string& filler : fillers) {
            for (const std::string& tail : tails) {
                for (const std::string& trail : trails) {
                    // A long next value, so that the 64-byte step holding the closing quote fits.
                    const std::string text = "[\"" + std::string(lead, 'a') + "\\n" + filler + tail + trail + "\", \"" +
                                             std::string(80, 'y') + "\"]";
                    std::string expected;
                    std::optional<std::size_t> error_offset;
                    bool ok = true;
                    try {
                        expected = parse_json_text(text, ParseLimits{}).canonical();
                    } catch (const JsonError& error) {
                        ok = false;
                        error_offset = error.byte_offset();
                    }
                    try {
                        std::string out;
                        canonicalize_text(text, ParseLimits{}, workspace, out);
                        EXPECT_TRUE(ok) << text;
                        EXPECT_EQ(out, expected) << text;
                        EXPECT_EQ(canonical_sha256_text(text, ParseLimits{}, workspace), sha256(expected)) << text;
                        ++valid;
                    } catch (const JsonError& error) {
                        EXPECT_FALSE(ok) << text;
                        EXPECT_EQ(error.byte_offset(), error_offset) << text;
                    }
                }
            }
        }
    }
    return valid;
}

TEST(Workspace, LongStringsWithEscapesMatchTheDocumentPath) {
    EXPECT_GT(check_long_strings_with_escapes(), 5000);  // the best scan for this CPU
    detail::use_portable_string_scan_for_testing(true);  // and the SSE2 one
    EXPECT_GT(check_long_strings_with_escapes(), 5000);
    detail::use_portable_string_scan_for_testing(false);
}

TEST(Workspace, DocumentHashMatchesWithOptions) {
    const Document document = parse_json_text(R"({"a":{"secret":"x","keep":[1,2]},"b":"\u0007"})", ParseLimits{});
    EXPECT_EQ(canonical_sha256(document), sha256(document.canonical()));
    const PointerSet exclude = PointerSet::parse({"/a/keep/0"});
    const PointerSet redact = PointerSet::parse({"/a/secret"});
    WriteOptions options;
    options.exclude = &exclude;
    options.redact = &redact;
    EXPECT_EQ(document.canonical(options), R"({"a":{"keep":[2],"secret":"[REDACTED]"},"b":"\u0007"})");
    EXPECT_EQ(canonical_sha256(document, options), sha256(document.canonical(options)));
    EXPECT_EQ(canonical_sha256(Document{}), sha256(""));
}

TEST(Workspace, DeepBuilderDocumentHashesIteratively) {
    DocumentBuilder builder(ParseLimits{2000000});
    const std::size_t depth = 1000000;
    for (std::size_t i = 0; i < depth; ++i) builder.begin_array();
    for (std::size_t i = 0; i < depth; ++i) builder.end_array();
    const Document document = builder.finish();
    EXPECT_EQ(canonical_sha256(document), sha256(std::string(depth, '[') + std::string(depth, ']')));
}

}  // namespace
}  // namespace opledger::core::test
