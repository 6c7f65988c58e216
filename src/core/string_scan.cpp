// find_canonical_string_end (see string_scan.hpp): one SSE2 version (x86-64 baseline)
// and one AVX-512BW version, picked once from the CPU. The bit logic per 64-byte step
// is shared plain integer code; the target attribute is per function, so nothing
// compiled for a newer CPU can leak into code that runs on an older one.
#include <atomic>
#include <cstdint>

#include "core/string_scan.hpp"

namespace opledger::core::detail {
namespace {

struct StepBits {
    std::uint64_t ends;        // unescaped quotes
    std::uint64_t before_end;  // bytes before the first of them (all when none)
    std::uint64_t letters;     // escaped bytes before it: each must be one of " \ b f n r t
};

// A run of backslashes escapes the next byte when its length is odd; the borrow of
// one subtraction marks that for every run at once (odd- and even-aligned runs differ
// in where it stops). escaped_carry (bit 0): the step's first byte is escaped.
inline StepBits step_bits(std::uint64_t quotes, std::uint64_t backslashes, std::uint64_t& escaped_carry) {
    constexpr std::uint64_t kOddBits = 0xAAAAAAAAAAAAAAAAULL;
    const std::uint64_t starts = backslashes & ~escaped_carry;
    const std::uint64_t escape_and_terminal = (((starts << 1) | kOddBits) - starts) ^ kOddBits;
    const std::uint64_t escaped = escape_and_terminal ^ (backslashes | escaped_carry);
    escaped_carry = (escape_and_terminal & backslashes) >> 63;
    const std::uint64_t ends = quotes & ~escaped;
    const std::uint64_t before_end = ends ? (ends & (0 - ends)) - 1 : ~std::uint64_t{0};
    return {ends, before_end, escaped & before_end};
}

using Finder = std::size_t (*)(const char*, std::size_t, std::size_t) noexcept;

}  // namespace
}  // namespace opledger::core::detail

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace opledger::core::detail {
namespace {

std::size_t find_end_sse2(const char* begin, std::size_t from, std::size_t size) noexcept {
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), max_control = _mm_set1_epi8(0x1F);
    std::uint64_t escaped_carry = 0;
    for (std::size_t i = from; size - i >= 64; i += 64) {
        std::uint64_t quotes = 0, backslashes = 0, controls = 0;
        for (int k = 0; k < 4; ++k) {
            const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(begin + i + 16 * k));
            const auto bits = [k](__m128i mask) {
                return static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(mask))) << (16 * k);
            };
            quotes |= bits(_mm_cmpeq_epi8(chunk, quote));
            backslashes |= bits(_mm_cmpeq_epi8(chunk, backslash));
            controls |= bits(_mm_cmpeq_epi8(_mm_min_epu8(chunk, max_control), chunk));
        }
        const StepBits step = step_bits(quotes, backslashes, escaped_carry);
        if (controls & step.before_end) return kNoCanonicalEnd;
        if (step.letters) {
            std::uint64_t allowed = 0;
            for (int k = 0; k < 4; ++k) {
                const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(begin + i + 16 * k));
                const __m128i ok = _mm_or_si128(
                    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(c, quote), _mm_cmpeq_epi8(c, backslash)),
                                 _mm_or_si128(_mm_cmpeq_epi8(c, _mm_set1_epi8('b')), _mm_cmpeq_epi8(c, _mm_set1_epi8('f')))),
                    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(c, _mm_set1_epi8('n')), _mm_cmpeq_epi8(c, _mm_set1_epi8('r'))),
                                 _mm_cmpeq_epi8(c, _mm_set1_epi8('t'))));
                allowed |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(ok))) << (16 * k);
            }
            if (step.letters & ~allowed) return kNoCanonicalEnd;
        }
        if (step.ends) return i + static_cast<std::size_t>(__builtin_ctzll(step.ends));
    }
    return kNoCanonicalEnd;
}

// One 64-byte load and compares straight into mask registers: about a third of the
// SSE2 version's instructions per step.
__attribute__((target("avx512f,avx512bw,bmi"))) std::size_t find_end_avx512(const char* begin, std::size_t from,
                                                                             std::size_t size) noexcept {
    const __m512i quote = _mm512_set1_epi8('"'), backslash = _mm512_set1_epi8('\\'), space = _mm512_set1_epi8(0x20);
    std::uint64_t escaped_carry = 0;
    for (std::size_t i = from; size - i >= 64; i += 64) {
        const __m512i chunk = _mm512_loadu_si512(begin + i);
        const std::uint64_t quotes = _mm512_cmpeq_epi8_mask(chunk, quote);
        const std::uint64_t backslashes = _mm512_cmpeq_epi8_mask(chunk, backslash);
        const std::uint64_t controls = _mm512_cmplt_epu8_mask(chunk, space);
        const StepBits step = step_bits(quotes, backslashes, escaped_carry);
        if (controls & step.before_end) return kNoCanonicalEnd;
        if (step.letters) {
            const std::uint64_t allowed =
                quotes | backslashes | _mm512_cmpeq_epi8_mask(chunk, _mm512_set1_epi8('b')) |
                _mm512_cmpeq_epi8_mask(chunk, _mm512_set1_epi8('f')) | _mm512_cmpeq_epi8_mask(chunk, _mm512_set1_epi8('n')) |
                _mm512_cmpeq_epi8_mask(chunk, _mm512_set1_epi8('r')) | _mm512_cmpeq_epi8_mask(chunk, _mm512_set1_epi8('t'));
            if (step.letters & ~allowed) return kNoCanonicalEnd;
        }
        if (step.ends) return i + static_cast<std::size_t>(_tzcnt_u64(step.ends));
    }
    return kNoCanonicalEnd;
}

Finder best_finder() noexcept {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("bmi"))
        return find_end_avx512;
    return find_end_sse2;
}

constexpr Finder kPortableFinder = find_end_sse2;

}  // namespace
}  // namespace opledger::core::detail

#else  // elsewhere: no fast path, the caller walks the escapes

namespace opledger::core::detail {
namespace {

std::size_t find_end_none(const char*, std::size_t, std::size_t) noexcept { return kNoCanonicalEnd; }
Finder best_finder() noexcept { return find_end_none; }
constexpr Finder kPortableFinder = find_end_none;

}  // namespace
}  // namespace opledger::core::detail

#endif

namespace opledger::core::detail {
namespace {

std::atomic<bool> g_portable{false};

}  // namespace

std::size_t find_canonical_string_end(const char* begin, std::size_t from, std::size_t size) noexcept {
    static const Finder best = best_finder();  // CPU features do not change while running
    const Finder finder = g_portable.load(std::memory_order_relaxed) ? kPortableFinder : best;
    return finder(begin, from, size);
}

void use_portable_string_scan_for_testing(bool portable) noexcept {
    g_portable.store(portable, std::memory_order_relaxed);
}

}  // namespace opledger::core::detail
