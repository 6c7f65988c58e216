// SHA-256 compression with the x86 SHA extensions (SHA-NI), a whole 64-byte block or
// a quarter of one (16 rounds) at a time, for the writer that hashes its output
// while writing it (write_plain in canonical_writer.cpp).
//
// Why not OpenSSL's block function (which also uses SHA-NI): reachable only through
// SHA256_Update/SHA256_Transform, one call per block costs ~41 ns on this project's
// EPYC against ~36 ns inline, because every call re-loads, re-shuffles and stores
// the state and does the length bookkeeping; that ~5 ns is about as much as the
// writer work it was meant to hide, and a whole block per call cannot be spread
// over the writer's loop. Inline, the state stays in registers across the loop and
// a quarter block runs per member in the shadow of the writer's own instructions
// (bench/RESULTS.md, core round 4). OpenSSL still does everything else (set-up,
// partial blocks, padding, the final digest: Sha256Blocks) and is the only path on
// CPUs without SHA-NI; the unit tests check this code against OpenSSL's EVP SHA-256
// on every length 0..300 and larger ones.
//
// The instructions are written as inline asm rather than intrinsics: intrinsics
// need a target("sha,ssse3") attribute on every function they are inlined into,
// which would be the whole writer, and then its portable instantiation too. Only
// sha_ni::available() callers may run this code.
#pragma once

#include <cstdint>

#include "core/no_postgres.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPLEDGER_HAVE_SHA_NI 1
#include <emmintrin.h>
#endif

namespace opledger::core::detail::sha_ni {

// True when the CPU has SHA-NI and SSSE3 (pshufb, palignr); checked once.
bool available() noexcept;

// Tests only: true makes available() answer false, so the OpenSSL-only path of
// block-mode writing can be checked on a machine with SHA-NI.
void disable_for_testing(bool disabled) noexcept;

#if defined(OPLEDGER_HAVE_SHA_NI)

// The eight state words as sha256rnds2 wants them: abef = {F, E, B, A} and
// cdgh = {H, G, D, C} (lowest 32-bit lane first).
struct State {
    __m128i abef;
    __m128i cdgh;
};

// From and to the standard order h[0..7] = A..H (as in OpenSSL's SHA256_CTX).
inline State load_state(const std::uint32_t* h) noexcept {
    return {_mm_set_epi32(static_cast<int>(h[0]), static_cast<int>(h[1]), static_cast<int>(h[4]),
                          static_cast<int>(h[5])),
            _mm_set_epi32(static_cast<int>(h[2]), static_cast<int>(h[3]), static_cast<int>(h[6]),
                          static_cast<int>(h[7]))};
}

inline void store_state(const State& state, std::uint32_t* h) noexcept {
    alignas(16) std::uint32_t abef[4], cdgh[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(abef), state.abef);
    _mm_store_si128(reinterpret_cast<__m128i*>(cdgh), state.cdgh);
    h[0] = abef[3];
    h[1] = abef[2];
    h[2] = cdgh[3];
    h[3] = cdgh[2];
    h[4] = abef[1];
    h[5] = abef[0];
    h[6] = cdgh[1];
    h[7] = cdgh[0];
}

namespace asm_ops {

// Two rounds: returns the new {F,E,B,A} from cdgh, abef and wk's low two lanes
// (W[t]+K[t], W[t+1]+K[t+1]). The instruction's third operand is always xmm0.
[[gnu::always_inline]] inline __m128i rounds2(__m128i cdgh, __m128i abef, __m128i wk) noexcept {
    register __m128i wk0 asm("xmm0") = wk;
    asm("sha256rnds2 %[wk], %[abef], %[cdgh]" : [cdgh] "+x"(cdgh) : [abef] "x"(abef), [wk] "x"(wk0));
    return cdgh;
}
// W[t-16..t-13] + sigma0(W[t-15..t-12]), from a = W[t-16..t-13], b = W[t-12..t-9].
[[gnu::always_inline]] inline __m128i msg1(__m128i a, __m128i b) noexcept {
    asm("sha256msg1 %[b], %[a]" : [a] "+x"(a) : [b] "x"(b));
    return a;
}
// Completes W[t..t+3] from a (everything but the sigma1 terms) and b = W[t-4..t-1].
[[gnu::always_inline]] inline __m128i msg2(__m128i a, __m128i b) noexcept {
    asm("sha256msg2 %[b], %[a]" : [a] "+x"(a) : [b] "x"(b));
    return a;
}
// Lanes 1..3 of lo followed by lane 0 of hi (palignr by 4 bytes).
[[gnu::always_inline]] inline __m128i align4(__m128i hi, __m128i lo) noexcept {
    asm("palignr $4, %[lo], %[hi]" : [hi] "+x"(hi) : [lo] "x"(lo));
    return hi;
}
// Big-endian 32-bit words into lanes (pshufb with a per-word byte reversal).
[[gnu::always_inline]] inline __m128i load_words(const char* p) noexcept {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i reverse = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    asm("pshufb %[reverse], %[v]" : [v] "+x"(v) : [reverse] "x"(reverse));
    return v;
}

}  // namespace asm_ops

// FIPS 180-4 round constants, four per group of four rounds.
alignas(16) inline constexpr std::uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// A block compressed a quarter (16 rounds) at a time: what carries over between
// quarters besides the working state.
struct PartialBlock {
    State start;   // the state before the block (added back after the last quarter)
    __m128i w[4];  // message schedule words of the latest four groups of four rounds
};

// Runs rounds 16*quarter .. 16*quarter+15 of the block at `block` on state (which
// between quarters holds working variables, not a digest state).
[[gnu::always_inline]] inline void compress_quarter(State& state, PartialBlock& part, const char* block,
                                                    unsigned quarter) noexcept {
    using namespace asm_ops;
    __m128i* const w = part.w;
    if (quarter == 0) {
        part.start = state;
        for (int i = 0; i < 4; ++i) w[i] = load_words(block + 16 * i);
    }
    __m128i abef = state.abef, cdgh = state.cdgh;
    const std::uint32_t* const constants = kRoundConstants + 16 * quarter;
#pragma GCC unroll 4
    for (int group = 0; group < 4; ++group) {  // w[group] holds W[t..t+3], t = 16*quarter + 4*group
        if (quarter != 0) {
            // W[t..t+3] = sigma1(W[t-2..]) + W[t-7..] + sigma0(W[t-15..]) + W[t-16..]; w[group]
            // held W[t-16..t-13] until now.
            const __m128i t = _mm_add_epi32(msg1(w[group], w[(group + 1) & 3]),
                                            align4(w[(group + 3) & 3], w[(group + 2) & 3]));
            w[group] = msg2(t, w[(group + 3) & 3]);
        }
        const __m128i wk =
            _mm_add_epi32(w[group], _mm_load_si128(reinterpret_cast<const __m128i*>(constants + 4 * group)));
        cdgh = rounds2(cdgh, abef, wk);                           // cdgh now holds the new abef
        abef = rounds2(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));  // the upper two lanes
    }
    if (quarter == 3) {
        abef = _mm_add_epi32(abef, part.start.abef);
        cdgh = _mm_add_epi32(cdgh, part.start.cdgh);
    }
    state.abef = abef;
    state.cdgh = cdgh;
}

// Compresses the 64 bytes at block into state.
[[gnu::always_inline]] inline void compress(State& state, const char* block) noexcept {
    PartialBlock part;
    for (unsigned quarter = 0; quarter < 4; ++quarter) compress_quarter(state, part, block, quarter);
}

#endif  // OPLEDGER_HAVE_SHA_NI

}  // namespace opledger::core::detail::sha_ni
