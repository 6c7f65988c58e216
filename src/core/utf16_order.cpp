// RFC 8785 §3.2.3: member names are sorted by their UTF-16 code units.
// For valid UTF-8, byte order equals code point order, and code point order equals
// UTF-16 order except between U+E000..U+FFFF (UTF-8 lead byte 0xEE/0xEF) and
// supplementary characters (lead 0xF0..0xF4, UTF-16 high surrogates 0xD800..):
// there the supplementary character sorts first. So one byte comparison at the
// first difference, with that single correction, gives the UTF-16 order.
#include <cstring>

#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core {
namespace {

std::size_t first_mismatch(const char* a, const char* b, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t x, y;
        std::memcpy(&x, a + i, 8);
        std::memcpy(&y, b + i, 8);
        if (x != y) return i + static_cast<std::size_t>(__builtin_ctzll(x ^ y) / 8);  // little endian
    }
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

bool is_upper_bmp_lead(unsigned char c) { return c == 0xEE || c == 0xEF; }
bool is_supplementary_lead(unsigned char c) { return c >= 0xF0; }

}  // namespace

int compare_utf16(std::string_view a, std::string_view b) noexcept {
    const std::size_t common = a.size() < b.size() ? a.size() : b.size();
    const std::size_t i = first_mismatch(a.data(), b.data(), common);
    if (i == common) return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    if (is_supplementary_lead(x) && is_upper_bmp_lead(y)) return -1;
    if (is_upper_bmp_lead(x) && is_supplementary_lead(y)) return 1;
    return x < y ? -1 : 1;
}

}  // namespace opledger::core
