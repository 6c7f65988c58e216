#include "core/utf8.hpp"

#include <cstring>

#include <simdjson.h>

namespace opledger::core::detail {
namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid sequence starting at p (0 if invalid). Ranges per RFC 3629 §4.
std::size_t valid_sequence_length(const unsigned char* p, std::size_t available) {
    const unsigned char c = p[0];
    if (c < 0x80) return 1;
    std::size_t length;
    unsigned char second_min = 0x80, second_max = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        length = 3;
        if (c == 0xE0) second_min = 0xA0;  // overlong
        if (c == 0xED) second_max = 0x9F;  // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        length = 4;
        if (c == 0xF0) second_min = 0x90;  // overlong
        if (c == 0xF4) second_max = 0x8F;  // above U+10FFFF
    } else {
        return 0;
    }
    if (available < length) return 0;
    if (p[1] < second_min || p[1] > second_max) return 0;
    for (std::size_t i = 2; i < length; ++i)
        if (!is_continuation(p[i])) return 0;
    return length;
}

bool all_ascii8(const unsigned char* p) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    return (word & 0x8080808080808080ULL) == 0;
}

std::size_t scalar_find_invalid(const unsigned char* p, std::size_t size) {
    std::size_t i = 0;
    while (i < size) {
        if (i + 8 <= size && all_ascii8(p + i)) {
            i += 8;
            continue;
        }
        const std::size_t length = valid_sequence_length(p + i, size - i);
        if (length == 0) return i;
        i += length;
    }
    return size;
}

}  // namespace

std::optional<std::size_t> find_invalid_utf8(std::string_view bytes) noexcept {
    if (simdjson::validate_utf8(bytes.data(), bytes.size())) return std::nullopt;
    // Slow path only on failure: locate the offending byte for the error message.
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t offset = scalar_find_invalid(p, bytes.size());
    if (offset == bytes.size()) return std::nullopt;  // validators disagree: trust the precise one
    return offset;
}

std::size_t encode_utf8(std::uint32_t cp, char* out) noexcept {
    if (cp < 0x80) {
        out[0] = static_cast<char>(cp);
        return 1;
    }
    if (cp < 0x800) {
        out[0] = static_cast<char>(0xC0 | (cp >> 6));
        out[1] = static_cast<char>(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = static_cast<char>(0xE0 | (cp >> 12));
        out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out[2] = static_cast<char>(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = static_cast<char>(0xF0 | (cp >> 18));
    out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[3] = static_cast<char>(0x80 | (cp & 0x3F));
    return 4;
}

}  // namespace opledger::core::detail
