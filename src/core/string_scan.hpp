// Finds the next byte inside a JSON string that ends the fast path: '"', '\\' or
// a control character (< 0x20). 16 bytes per step with SSE2 (baseline on x86-64),
// so no special compile flags or runtime dispatch are needed; scalar elsewhere.
#pragma once

#include <cstddef>

#include "core/no_postgres.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace opledger::core::detail {

inline bool is_string_special(unsigned char c) { return c == '"' || c == '\\' || c < 0x20; }

// Index of the first special byte in [begin + from, begin + size), or size if none.
inline std::size_t find_string_special(const char* begin, std::size_t from, std::size_t size) noexcept {
    std::size_t i = from;
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i max_control = _mm_set1_epi8(0x1F);
    // unsigned c <= 0x1F  <=>  min(c, 0x1F) == c
    const auto special_mask = [&](std::size_t at) {
        const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(begin + at));
        const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(chunk, max_control), chunk);
        const __m128i special =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(chunk, quote), _mm_cmpeq_epi8(chunk, backslash)), control);
        return static_cast<unsigned>(_mm_movemask_epi8(special));
    };
    // The first 16 bytes alone (most names and short values end there), then 32 per
    // step: half the loop branches on long text.
    if (i + 16 <= size) {
        const unsigned mask = special_mask(i);
        if (mask != 0) return i + static_cast<std::size_t>(__builtin_ctz(mask));
        i += 16;
    }
    for (; i + 32 <= size; i += 32) {
        const unsigned mask = special_mask(i) | (special_mask(i + 16) << 16);
        if (mask != 0) return i + static_cast<std::size_t>(__builtin_ctz(mask));
    }
    if (i + 16 <= size) {
        const unsigned mask = special_mask(i);
        if (mask != 0) return i + static_cast<std::size_t>(__builtin_ctz(mask));
        i += 16;
    }
#endif
    for (; i < size; ++i)
        if (is_string_special(static_cast<unsigned char>(begin[i]))) return i;
    return size;
}

}  // namespace opledger::core::detail
