// UTF-8 helpers shared by the parser, the builder and the writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

// Offset of the first byte that starts an invalid UTF-8 sequence (RFC 3629: no
// overlongs, no surrogates, nothing above U+10FFFF), or nullopt if all is valid.
// Uses a SIMD validator for the common all-valid case.
std::optional<std::size_t> find_invalid_utf8(std::string_view bytes) noexcept;

// Appends the UTF-8 encoding of a Unicode scalar value (not a surrogate) at out;
// returns the number of bytes written (1..4). out must have room for 4 bytes.
std::size_t encode_utf8(std::uint32_t code_point, char* out) noexcept;

}  // namespace opledger::core::detail
