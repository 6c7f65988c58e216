// RFC 8785 §3.2.2.3 number serialisation and the exactness rule (refuse a
// number whose text is not exactly a double).
#include <cstring>
#include <cstdint>

#include "core/number_format.hpp"
#include "test_helpers.hpp"

namespace opledger::core::test {
namespace {

double from_bits(std::uint64_t bits) {
    double value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

struct AppendixB {
    std::uint64_t bits;
    const char* expected;
};

// RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript serialisation.
const AppendixB kAppendixB[] = {
    {0x0000000000000000, "0"},
    {0x8000000000000000, "0"},
    {0x0000000000000001, "5e-324"},
    {0x8000000000000001, "-5e-324"},
    {0x7fefffffffffffff, "1.7976931348623157e+308"},
    {0xffefffffffffffff, "-1.7976931348623157e+308"},
    {0x4340000000000000, "9007199254740992"},
    {0xc340000000000000, "-9007199254740992"},
    {0x4430000000000000, "295147905179352830000"},
    {0x44b52d02c7e14af5, "9.999999999999997e+22"},
    {0x44b52d02c7e14af6, "1e+23"},
    {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
    {0x444b1ae4d6e2ef4e, "999999999999999700000"},
    {0x444b1ae4d6e2ef4f, "999999999999999900000"},
    {0x444b1ae4d6e2ef50, "1e+21"},
    {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
    {0x3eb0c6f7a0b5ed8d, "0.000001"},
    {0x41b3de4355555553, "333333333.3333332"},
    {0x41b3de4355555554, "333333333.33333325"},
    {0x41b3de4355555555, "333333333.3333333"},
    {0x41b3de4355555556, "333333333.3333334"},
    {0x41b3de4355555557, "333333333.33333343"},
    {0xbecbf647612f3696, "-0.0000033333333333333333"},
    {0x43143ff3c1cb0959, "1424953923781206.2"},
};

TEST(NumberFormat, AppendixBFromDoubleBits) {
    for (const auto& row : kAppendixB) {
        SCOPED_TRACE(row.expected);
        const double value = from_bits(row.bits);
        char buffer[detail::kMaxCanonicalNumberLength];
        EXPECT_EQ(std::string(buffer, detail::format_double(value, buffer)), row.expected);
        // And the expected text denotes that very double (zero: up to its sign).
        const double reparsed = std::strtod(row.expected, nullptr);
        EXPECT_EQ(reparsed, value);
        if (value != 0) EXPECT_EQ(std::memcmp(&reparsed, &value, sizeof value), 0);
    }
}

TEST(NumberFormat, AppendixBThroughParsing) {
    for (const auto& row : kAppendixB) {
        SCOPED_TRACE(row.expected);
        EXPECT_EQ(canon(row.expected), row.expected);
        EXPECT_EQ(canon(std::string("[") + row.expected + "]"), std::string("[") + row.expected + "]");
    }
}

TEST(NumberFormat, OtherSpellingsOfAppendixBValues) {
    EXPECT_EQ(canonical_number("-0"), "0");
    EXPECT_EQ(canonical_number("-0.0e-5"), "0");
    EXPECT_EQ(canonical_number("1E23"), "1e+23");
    EXPECT_EQ(canonical_number("10e22"), "1e+23");
    EXPECT_EQ(canonical_number("1000000000000000000000"), "1e+21");
    EXPECT_EQ(canonical_number("0.000001"), "0.000001");
    EXPECT_EQ(canonical_number("1e-6"), "0.000001");
    EXPECT_EQ(canonical_number("1e-7"), "1e-7");
    EXPECT_EQ(canonical_number("9.007199254740992E15"), "9007199254740992");
    EXPECT_EQ(canonical_number("29514790517935283e4"), "295147905179352830000");
}

TEST(NumberFormat, ExactValuesAccepted) {
    EXPECT_EQ(canonical_number("0.1"), "0.1");
    EXPECT_EQ(canonical_number("10.10"), "10.1");
    EXPECT_EQ(canonical_number("1E2"), "100");
    EXPECT_EQ(canonical_number("1.0"), "1");
    EXPECT_EQ(canonical_number("-1.50"), "-1.5");
    EXPECT_EQ(canonical_number("123456789012345"), "123456789012345");
    EXPECT_EQ(canonical_number("-123456789012345"), "-123456789012345");
    EXPECT_EQ(canonical_number("1234567890123456"), "1234567890123456");
    EXPECT_EQ(canonical_number("0.0000001"), "1e-7");
    EXPECT_EQ(canonical_number("123e-2"), "1.23");
    EXPECT_EQ(canonical_number("0e99999999999999999999"), "0") << "zero with a huge exponent is still zero";
    EXPECT_EQ(canonical_number("0.00000000000000000000000000000000000000000000000000000001e56"), "1");
}

TEST(NumberFormat, InexactValuesRejected) {
    for (const char* token : {"9007199254740993", "1.00000000000000000001", "1e400", "-1e400", "1e-400",
                              "1e99999999999999999999", "1e-99999999999999999999", "0.30000000000000000001",
                              "295147905179352825856", "123456789012345678901234567890", "2e-324",
                              // the double's 17-digit spelling differs in value from its shortest form
                              "4.9406564584124654e-324", "333333333.33333329"}) {
        SCOPED_TRACE(token);
        try {
            canonical_number(token);
            ADD_FAILURE() << "accepted";
        } catch (const JsonError& error) {
            EXPECT_EQ(error.kind(), JsonErrorKind::inexact_number);
            EXPECT_EQ(error.hint(), "send the value as a JSON string to keep it exactly");
        }
    }
}

TEST(NumberFormat, InexactNumberInTextCarriesOffset) {
    // Where, never what: the number may be a secret (a card number sent as a number).
    const std::string message = text_error("{\"a\": [1, 9007199254740993]}", 10, JsonErrorKind::inexact_number);
    EXPECT_EQ(message.find("9007199254740993"), std::string::npos);
}

TEST(NumberFormat, HugeDigitStringsDoNotOverflow) {
    const std::string digits(100000, '7');
    EXPECT_THROW(canonical_number(digits), JsonError);
    EXPECT_EQ(canonical_number("0." + std::string(100000, '0') + "1e100001"), "1");
    EXPECT_EQ(canonical_number("1" + std::string(100000, '0') + "e-100000"), "1");
}

// The 15-significant-digit shortcut must agree with the full double round trip.
TEST(NumberFormat, ShortcutAgreesWithDoubleRoundTrip) {
    std::uint64_t state = 12345;
    auto next = [&state] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return state >> 20;
    };
    char fast[detail::kMaxCanonicalNumberLength], slow[detail::kMaxCanonicalNumberLength];
    int accepted = 0;
    for (int i = 0; i < 200000; ++i) {
        const int digits = 1 + static_cast<int>(next() % 15);
        std::string token = (next() & 1) ? "-" : "";
        for (int d = 0; d < digits; ++d) token.push_back(static_cast<char>('0' + next() % 10));
        if (next() & 1) token.insert(token.size() - static_cast<std::size_t>(next() % digits), ".");
        token += "e" + std::to_string(static_cast<long>(next() % 600) - 300);
        if (detail::scan_number_token(token) != token.size()) continue;  // e.g. leading zeros
        SCOPED_TRACE(token);
        const auto run = [&token](auto format, char* buffer) -> std::string {
            try {
                return std::string(buffer, format(token, buffer));
            } catch (const JsonError&) {
                return "<inexact>";
            }
        };
        const std::string a = run(detail::format_canonical_number, fast);
        const std::string b = run(detail::format_canonical_number_via_double, slow);
        ASSERT_EQ(a, b);
        accepted += a != "<inexact>";
    }
    EXPECT_GT(accepted, 100000);  // most samples really exercised the shortcut
}

TEST(NumberFormat, MalformedTokensAreInvalidText) {
    for (const char* token : {"", "+1", ".5", "1.", "01", "1e", "1e+", "-", "NaN", "Infinity", "1 "}) {
        SCOPED_TRACE(token);
        expect_json_error([&] { canonical_number(token); }, JsonErrorKind::invalid_text, std::size_t{0});
    }
}

}  // namespace
}  // namespace opledger::core::test
