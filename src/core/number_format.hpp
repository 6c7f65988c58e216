// Canonical number text (RFC 8785 §3.2.2.3, ECMAScript Number::toString) with the
// exactness rule: a number whose text is not exactly a double is refused, not rounded.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

// Longest canonical number: "-" + 17 digits + "e-324" style forms stay below this.
constexpr std::size_t kMaxCanonicalNumberLength = 32;

// Length of the JSON number token (RFC 8259 grammar) at the start of text, or 0
// if text does not start with one. Does not look at what follows the token.
std::size_t scan_number_token(std::string_view text) noexcept;

// True when a grammatical token is a plain integer of at most 15 digits other
// than "-0": every such integer is a double exactly and already canonical.
bool is_short_canonical_integer(std::string_view token) noexcept;

// Writes the canonical form of a grammatical number token into out (room for
// kMaxCanonicalNumberLength bytes) and returns its length. Throws
// JsonError(inexact_number) when the value would change; byte_offset is left empty.
std::size_t format_canonical_number(std::string_view token, char* out);

// The canonical form of a decimal number handed over as text by a caller that
// already parsed its value (numeric_out's "1.50", "-0", "1e5") into out (room for
// kMaxCanonicalNumberLength bytes); returns its length. Short integers are copied
// as they are. Throws JsonError(invalid_text) when the text is not a JSON number,
// and JsonError(inexact_number) as format_canonical_number does.
std::size_t format_decimal_text(std::string_view decimal_text, char* out);

// The same result computed always through the double (from_chars + shortest
// to_chars), bypassing the 15-digit shortcut; kept for differential tests.
std::size_t format_canonical_number_via_double(std::string_view token, char* out);

// ECMAScript Number::toString of a finite double into out (room for
// kMaxCanonicalNumberLength bytes); returns the length. -0 gives "0".
std::size_t format_double(double value, char* out) noexcept;

}  // namespace opledger::core::detail
