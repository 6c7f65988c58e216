// Inline form of compare_utf16 for the hot member sort (see utf16_order.cpp for
// why one byte comparison with a single correction gives the UTF-16 order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/no_postgres.hpp"

namespace opledger::core::detail {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "first_mismatch reads words little-endian");

inline std::size_t first_mismatch(const char* a, const char* b, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t x, y;
        std::memcpy(&x, a + i, 8);
        std::memcpy(&y, b + i, 8);
        if (x != y) return i + static_cast<std::size_t>(__builtin_ctzll(x ^ y) / 8);
    }
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

inline int utf16_order(std::string_view a, std::string_view b) noexcept {
    const std::size_t common = a.size() < b.size() ? a.size() : b.size();
    const std::size_t i = first_mismatch(a.data(), b.data(), common);
    if (i == common) return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    const bool x_upper_bmp = x == 0xEE || x == 0xEF, y_upper_bmp = y == 0xEE || y == 0xEF;
    if (x >= 0xF0 && y_upper_bmp) return -1;  // supplementary (surrogate pair) before U+E000..U+FFFF
    if (x_upper_bmp && y >= 0xF0) return 1;
    return x < y ? -1 : 1;
}

}  // namespace opledger::core::detail
