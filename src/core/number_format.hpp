// Canonical number text (RFC 8785 §3.2.2.3, ECMAScript Number::toString) with the
// SPEC §1 exactness rule.
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

// The same result computed always through the double (from_chars + shortest
// to_chars), bypassing the 15-digit shortcut; kept for differential tests.
std::size_t format_canonical_number_via_double(std::string_view token, char* out);

// ECMAScript Number::toString of a finite double into out (room for
// kMaxCanonicalNumberLength bytes); returns the length. -0 gives "0".
std::size_t format_double(double value, char* out) noexcept;

}  // namespace opledger::core::detail
