// Member sorting through the fast paths (8-byte prefixes with the UTF-16 remap,
// already-sorted check, remembered shapes of same-shaped objects) against a plain
// std::sort with compare_utf16 as the reference.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

// Name pieces chosen to collide on prefixes: shared 8-byte heads, a real NUL byte
// against zero padding, U+E000 (lead 0xEE) against supplementary (0xF0), U+D7FF.
const std::string kPieces[] = {"a", "abcdefgh", std::string("\0", 1), "\xEE\x80\x80", "\xF0\x9F\x98\x80",
                               "\xED\x9F\xBF", "\x7F", "z", "abcdefghi"};

std::string json_name(const std::string& name) {
    std::string out = "\"";
    for (char c : name) out += c == '\0' ? std::string("\\u0000") : std::string(1, c);
    return out + "\"";
}

struct Case {
    std::string input;
    std::string expected;
};

Case object_case(std::vector<std::string> names) {
    Case c;
    c.input = "{";
    for (std::size_t i = 0; i < names.size(); ++i)
        c.input += (i ? "," : "") + json_name(names[i]) + ":" + std::to_string(i);
    c.input += "}";
    std::vector<std::size_t> order(names.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return compare_utf16(names[a], names[b]) < 0; });
    c.expected = "{";
    for (std::size_t i = 0; i < order.size(); ++i)
        c.expected += (i ? "," : "") + json_name(names[order[i]]) + ":" + std::to_string(order[i]);
    c.expected += "}";
    return c;
}

TEST(MemberOrder, MatchesReferenceSortOnCollidingPrefixes) {
    std::uint64_t state = 99;
    auto below = [&](std::size_t n) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<std::size_t>(state >> 33) % n;
    };
    for (int round = 0; round < 2000; ++round) {
        std::set<std::string> unique;
        const std::size_t count = 1 + below(round % 3 == 0 ? 30 : 9);  // small (shape cache) and large (std::sort)
        while (unique.size() < count) {
            std::string name;
            for (std::size_t k = 1 + below(4); k > 0; --k) name += kPieces[below(sizeof kPieces / sizeof kPieces[0])];
            unique.insert(name);
        }
        std::vector<std::string> names(unique.begin(), unique.end());
        for (std::size_t i = names.size(); i > 1; --i) std::swap(names[i - 1], names[below(i)]);
        const Case c = object_case(names);
        // Twice in one array: the second copy can be served by the remembered shape.
        ASSERT_EQ(canon("[" + c.input + "," + c.input + "]"), "[" + c.expected + "," + c.expected + "]") << c.input;
        ASSERT_EQ(parse_json_text(c.input, ParseLimits{}).canonical(), c.expected);
    }
}

TEST(MemberOrder, RememberedShapesDoNotLeakAcrossDifferentObjects) {
    // Same first and last names, different middle; then same names in another order.
    const Case a = object_case({"zeta", "beta", "alpha"});
    const Case b = object_case({"zeta", "gamma", "alpha"});
    const Case c = object_case({"alpha", "beta", "zeta"});
    const Case d = object_case({"beta", "zeta", "alpha"});
    EXPECT_EQ(canon("[" + a.input + "," + b.input + "," + a.input + "," + c.input + "," + d.input + "]"),
              "[" + a.expected + "," + b.expected + "," + a.expected + "," + c.expected + "," + d.expected + "]");
    // A duplicate is still found in an object shaped like a remembered one.
    text_error("[{\"b\":1,\"a\":2},{\"b\":1,\"b\":2}]", 22);
}

}  // namespace
}  // namespace opledger::core::test
