#include "core/number_format.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/jcs.hpp"

namespace opledger::core::detail {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The decimal value of a token as sign * 0.DIGITS * 10^point, with DIGITS free of
// leading and trailing zeros (empty for zero). DIGITS is described as spans of the
// token so a huge token is never copied.
struct DecimalValue {
    bool negative = false;
    std::string_view integer_part;   // digits before '.', leading zeros included
    std::string_view fraction_part;  // digits after '.'
    std::size_t skip_leading = 0;    // zeros to drop from integer_part+fraction_part
    std::size_t significant = 0;     // number of significant digits after skipping
    std::int64_t point = 0;          // decimal exponent of the 0.DIGITS form
    bool exponent_saturated = false; // exponent too large to represent exactly

    char digit(std::size_t i) const {  // i-th significant digit
        const std::size_t k = skip_leading + i;
        return k < integer_part.size() ? integer_part[k] : fraction_part[k - integer_part.size()];
    }
};

// Exponents beyond this cannot matter: doubles span about 10^-324 .. 10^309, and
// a token has at most ~2^30 digits, so saturating here keeps all arithmetic exact.
constexpr std::int64_t kExponentCap = std::int64_t{1} << 50;

std::int64_t parse_saturated_exponent(std::string_view digits, bool& saturated) {
    std::int64_t value = 0;
    for (char c : digits) {
        value = value * 10 + (c - '0');
        if (value > kExponentCap) {
            saturated = true;
            return kExponentCap;
        }
    }
    return value;
}

DecimalValue decompose(std::string_view token) {
    DecimalValue v;
    std::size_t i = 0;
    if (token[i] == '-') { v.negative = true; ++i; }
    const std::size_t int_begin = i;
    while (i < token.size() && is_digit(token[i])) ++i;
    v.integer_part = token.substr(int_begin, i - int_begin);
    if (i < token.size() && token[i] == '.') {
        const std::size_t frac_begin = ++i;
        while (i < token.size() && is_digit(token[i])) ++i;
        v.fraction_part = token.substr(frac_begin, i - frac_begin);
    }
    std::int64_t exponent = 0;
    if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
        ++i;
        bool exponent_negative = false;
        if (token[i] == '+' || token[i] == '-') exponent_negative = token[i++] == '-';
        exponent = parse_saturated_exponent(token.substr(i), v.exponent_saturated);
        if (exponent_negative) exponent = -exponent;
    }
    const std::size_t total = v.integer_part.size() + v.fraction_part.size();
    while (v.skip_leading < total && v.digit(0) == '0') ++v.skip_leading;
    std::size_t end = total;
    while (end > v.skip_leading) {
        const std::size_t k = end - 1;
        const char c = k < v.integer_part.size() ? v.integer_part[k] : v.fraction_part[k - v.integer_part.size()];
        if (c != '0') break;
        --end;
    }
    v.significant = end - v.skip_leading;
    v.point = static_cast<std::int64_t>(v.integer_part.size()) - static_cast<std::int64_t>(v.skip_leading) + exponent;
    return v;
}

// The number itself is never shown: it may be a secret (a card number sent as a
// number). The caller adds where it is (a byte offset or a JSON Pointer).
[[noreturn]] void throw_inexact(std::string_view) {
    throw JsonError(JsonErrorKind::inexact_number, "number cannot be represented exactly as a double", std::nullopt,
                    "send the value as a JSON string to keep it exactly");
}

// Shortest round-trip digits and ECMAScript exponent n of a finite non-zero double.
struct ShortestDigits {
    char digits[24];
    std::size_t count = 0;
    std::int64_t point = 0;
};

ShortestDigits shortest_digits(double value) {
    char buffer[40];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
    ShortestDigits s;
    const char* p = buffer;
    if (*p == '-') ++p;
    for (; p < result.ptr && *p != 'e'; ++p)
        if (*p != '.') s.digits[s.count++] = *p;
    while (s.count > 1 && s.digits[s.count - 1] == '0') --s.count;
    int exponent = 0;
    std::from_chars(p + 1 + (p[1] == '+' ? 1 : 0), result.ptr, exponent);
    s.point = exponent + 1;
    return s;
}

// ECMAScript Number::toString layout of sign, digits d1..dk and exponent n
// (value = 0.d1..dk * 10^n).
std::size_t lay_out(bool negative, const char* digits, std::size_t k, std::int64_t n, char* out) {
    char* p = out;
    if (negative) *p++ = '-';
    const auto kk = static_cast<std::int64_t>(k);
    if (kk <= n && n <= 21) {
        std::memcpy(p, digits, k);
        p += k;
        std::memset(p, '0', static_cast<std::size_t>(n - kk));
        p += n - kk;
    } else if (0 < n && n <= 21) {
        std::memcpy(p, digits, static_cast<std::size_t>(n));
        p += n;
        *p++ = '.';
        std::memcpy(p, digits + n, static_cast<std::size_t>(kk - n));
        p += kk - n;
    } else if (-6 < n && n <= 0) {
        *p++ = '0';
        *p++ = '.';
        std::memset(p, '0', static_cast<std::size_t>(-n));
        p += -n;
        std::memcpy(p, digits, k);
        p += k;
    } else {
        *p++ = digits[0];
        if (k > 1) {
            *p++ = '.';
            std::memcpy(p, digits + 1, k - 1);
            p += k - 1;
        }
        *p++ = 'e';
        *p++ = n - 1 < 0 ? '-' : '+';
        const std::int64_t e = n - 1 < 0 ? 1 - n : n - 1;
        p = std::to_chars(p, out + kMaxCanonicalNumberLength, e).ptr;
    }
    return static_cast<std::size_t>(p - out);
}

}  // namespace

std::size_t scan_number_token(std::string_view text) noexcept {
    std::size_t i = 0;
    const std::size_t n = text.size();
    if (i < n && text[i] == '-') ++i;
    if (i >= n || !is_digit(text[i])) return 0;
    if (text[i] == '0') {
        ++i;
    } else {
        while (i < n && is_digit(text[i])) ++i;
    }
    if (i < n && text[i] == '.') {
        ++i;
        if (i >= n || !is_digit(text[i])) return 0;
        while (i < n && is_digit(text[i])) ++i;
    }
    if (i < n && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
        if (i >= n || !is_digit(text[i])) return 0;
        while (i < n && is_digit(text[i])) ++i;
    }
    return i;
}

std::size_t format_double(double value, char* out) noexcept {
    if (value == 0) {
        out[0] = '0';
        return 1;
    }
    const ShortestDigits shortest = shortest_digits(value);
    return lay_out(value < 0, shortest.digits, shortest.count, shortest.point, out);
}

bool is_short_canonical_integer(std::string_view token) noexcept {
    const std::size_t sign = token[0] == '-' ? 1 : 0;
    const std::size_t digits = token.size() - sign;
    if (digits > 15) return false;
    for (std::size_t i = sign; i < token.size(); ++i)
        if (!is_digit(token[i])) return false;
    return !(sign == 1 && token[1] == '0');  // "-0" must become "0"
}

namespace {

// A decimal with at most 15 significant digits (DBL_DIG) in the normal range maps
// to a double that no other such decimal maps to, so the shortest round-trip form
// of that double is those very digits: the canonical form is a pure re-layout.
constexpr std::size_t kDblDig = 15;
constexpr std::int64_t kSafePoint = 290;  // well inside the normal range (1e-307 .. 1e308)

bool has_exact_short_form(const DecimalValue& value) {
    return !value.exponent_saturated && value.significant <= kDblDig && value.point <= kSafePoint &&
           value.point >= -kSafePoint;
}

std::size_t format_canonical_number_impl(std::string_view token, char* out, bool allow_fast_path) {
    const DecimalValue value = decompose(token);
    if (value.significant == 0) {  // any spelling of zero, including -0 and 0e99999
        out[0] = '0';
        return 1;
    }
    char short_digits[kDblDig];
    if (allow_fast_path && has_exact_short_form(value)) {
        for (std::size_t i = 0; i < value.significant; ++i) short_digits[i] = value.digit(i);
        return lay_out(value.negative, short_digits, value.significant, value.point, out);
    }
    // A double has at most 17 significant digits in shortest form and lies within
    // 10^-324 .. 10^309; anything outside cannot survive the round trip.
    if (value.exponent_saturated || value.significant > 17 || value.point > 310 || value.point < -323)
        throw_inexact(token);

    char digits[24];
    for (std::size_t i = 0; i < value.significant; ++i) digits[i] = value.digit(i);
    // Rebuild a short equivalent literal so from_chars never sees a giant token.
    char literal[48];
    std::memcpy(literal, digits, value.significant);
    char* end = literal + value.significant;
    *end++ = 'e';
    end = std::to_chars(end, literal + sizeof literal,
                        value.point - static_cast<std::int64_t>(value.significant)).ptr;
    double parsed = 0;
    const auto result = std::from_chars(literal, end, parsed);
    if (result.ec != std::errc() || result.ptr != end || parsed == 0) throw_inexact(token);

    const ShortestDigits shortest = shortest_digits(parsed);
    if (shortest.count != value.significant || shortest.point != value.point ||
        std::memcmp(shortest.digits, digits, shortest.count) != 0)
        throw_inexact(token);
    return lay_out(value.negative, digits, value.significant, value.point, out);
}

}  // namespace

std::size_t format_canonical_number(std::string_view token, char* out) {
    return format_canonical_number_impl(token, out, true);
}

std::size_t format_decimal_text(std::string_view decimal_text, char* out) {
    if (decimal_text.empty() || scan_number_token(decimal_text) != decimal_text.size())
        throw JsonError(JsonErrorKind::invalid_text,
                        "invalid number \"" + std::string(decimal_text.substr(0, 40)) + "\"");
    if (!is_short_canonical_integer(decimal_text)) return format_canonical_number(decimal_text, out);
    std::memcpy(out, decimal_text.data(), decimal_text.size());
    return decimal_text.size();
}

std::size_t format_canonical_number_via_double(std::string_view token, char* out) {
    return format_canonical_number_impl(token, out, false);
}

}  // namespace opledger::core::detail

namespace opledger::core {

std::string canonical_number(std::string_view json_number) {
    if (json_number.empty() || detail::scan_number_token(json_number) != json_number.size())
        throw JsonError(JsonErrorKind::invalid_text, "invalid number \"" + std::string(json_number.substr(0, 40)) + "\"",
                        std::size_t{0});
    if (detail::is_short_canonical_integer(json_number)) return std::string(json_number);
    char buffer[detail::kMaxCanonicalNumberLength];
    return std::string(buffer, detail::format_canonical_number(json_number, buffer));
}

}  // namespace opledger::core
