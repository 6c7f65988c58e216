// Finds the next byte inside a JSON string that ends the fast path: '"', '\\' or
// a control character (< 0x20). 16 bytes per step with SSE2 (baseline on x86-64),
// so no special compile flags or runtime dispatch are needed; scalar elsewhere.
// Only find_canonical_string_end (long strings, string_scan.cpp) picks AVX-512 at run time.
#pragma once

#include <cstddef>

#include "core/no_postgres.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace opledger::core::detail {

inline bool is_string_special(unsigned char c) { return c == '"' || c == '\\' || c < 0x20; }

// Bit i set: p[i] is special, for the 16 bytes at p (all readable).
inline unsigned string_special_mask16(const char* p) noexcept {
#if defined(__SSE2__)
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(chunk, _mm_set1_epi8(0x1F)), chunk);
    const __m128i special = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(chunk, _mm_set1_epi8('"')), _mm_cmpeq_epi8(chunk, _mm_set1_epi8('\\'))), control);
    return static_cast<unsigned>(_mm_movemask_epi8(special));
#else
    unsigned mask = 0;
    for (int i = 0; i < 16; ++i)
        if (is_string_special(static_cast<unsigned char>(p[i]))) mask |= 1u << i;
    return mask;
#endif
}

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

// Closing quote of a string value whose escapes can all stay as written (RFC 8785
// spells \" \\ \b \f \n \r \t the same way), scanning from `from`, a position inside
// the string whose byte is not escaped (its first backslash, or the end of a stretch
// known to hold no special byte). Returns kNoCanonicalEnd when it cannot tell
// this way (fewer than 64 bytes left, a \u or other escape, a control character);
// the caller then walks the escapes one by one. 64 bytes per step, with the escapes
// of a step found by bit arithmetic (as in simdjson): prose with an escape every few
// words otherwise costs a mispredicted branch per escape. AVX-512 where the CPU has
// it (chosen at run time), SSE2 otherwise; string_scan.cpp.
constexpr std::size_t kNoCanonicalEnd = static_cast<std::size_t>(-1);
std::size_t find_canonical_string_end(const char* begin, std::size_t from, std::size_t size) noexcept;

// Tests only: true makes find_canonical_string_end use its SSE2 (x86-64 baseline)
// version even where AVX-512 is available, so both can be checked on one machine.
void use_portable_string_scan_for_testing(bool portable) noexcept;

}  // namespace opledger::core::detail
