// Strict JSON text parser (RFC 8259 plus the canonical form's rules). Iterative: open arrays/objects
// live on a heap stack, so input nesting never consumes machine stack.
// UTF-8 is validated for the whole input up front (SIMD); since every structural
// character is ASCII, that also proves every string's bytes valid.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/interrupts.hpp"
#include "core/number_format.hpp"
#include "core/string_scan.hpp"
#include "core/utf8.hpp"
#include "core/workspace_impl.hpp"

namespace opledger::core {
namespace detail {
namespace {

[[noreturn]] void fail(std::size_t offset, const std::string& message) {
    throw JsonError(JsonErrorKind::invalid_text, message, offset);
}

std::string describe_byte(char c) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) return std::string("unexpected character '") + c + "'";
    static constexpr char hex[] = "0123456789abcdef";
    return std::string("unexpected byte 0x") + hex[byte >> 4] + hex[byte & 0xF];
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}


bool is_whitespace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// An escape that RFC 8785 output would spell the same way: \" \\ \b \f \n \r \t, or
// \u00xx in lowercase hex for a control without a short form. Returns its length, or 0.
std::size_t canonical_escape_length(const char* p, std::size_t available) {
    if (available < 2) return 0;
    switch (p[1]) {
        case '"': case '\\': case 'b': case 'f': case 'n': case 'r': case 't': return 2;
        case 'u': break;
        default: return 0;
    }
    if (available < 6 || p[2] != '0' || p[3] != '0' || (p[4] != '0' && p[4] != '1')) return 0;
    const char low = p[5];
    const bool hex = (low >= '0' && low <= '9') || (low >= 'a' && low <= 'f');
    if (!hex || (p[4] == '0' && (low == '8' || low == '9' || low == 'a' || low == 'c' || low == 'd'))) return 0;
    return 6;
}

class TextParser {
public:
    TextParser(Document::Impl& doc, std::string_view text, const ParseLimits& limits,
               std::pmr::vector<ParseFrame>& open, ParseMode mode)
        : doc_(doc), tape_(doc), text_(text.data()), size_(text.size()), max_depth_(limits.max_depth),
          open_(open), raw_strings_(mode == ParseMode::write_only) {
        open_.clear();
    }

    // One loop with explicit states (goto) over a local cursor: no call or member
    // round trip per token, and open containers live on open_, never the machine stack.
    void parse() {
        if (size_ > kMaxInputBytes) fail(0, "input too large (4 GiB or more)");
        if (const auto bad = find_invalid_utf8({text_, size_})) fail(*bad, "invalid UTF-8 byte sequence");
        // Agent payloads average 15-30 input bytes per node; a rough first guess
        // saves most regrowth. It is not capped: a reserved but untouched page
        // costs nothing, while regrowing a large tape copies it and faults in fresh
        // pages again (the dominant cost of 500 MB documents on this kind of VM).
        doc_.tape.reserve(size_ / 16 + 8);
        std::size_t pos = 0;
        const std::size_t size = size_;
        const char* const text = text_;
        char c;

    value:
        pos = skip_whitespace(pos);
        if (pos >= size) end_of_input(pos, "a value");
        c = text[pos];
    value_at:  // c = text[pos], not whitespace
        switch (c) {
            case '"':
                pos = parse_string_value(pos);
                goto after_value;
            case '{':
            case '[': {
                const bool is_object = c == '{';
                if (open_.size() >= max_depth_)
                    throw JsonError(JsonErrorKind::too_deep,
                                    "nesting depth exceeds the limit of " + std::to_string(max_depth_), pos);
                const std::size_t node = tape_.open(is_object ? NodeType::object : NodeType::array);
                ParseFrame& frame = open_.emplace_back();  // in place: see TapeWriter::key
                frame.node = static_cast<std::uint32_t>(node);
                frame.count = 1;  // counted now: empty containers are closed below
                frame.is_object = is_object;
                pos = skip_whitespace(pos + 1);
                if (pos >= size) end_of_input(pos, is_object ? "'\"' or '}'" : "a value or ']'");
                if (text[pos] == (is_object ? '}' : ']')) {
                    ++pos;
                    open_.back().count = 0;
                    close_innermost();
                    goto after_value;
                }
                if (is_object) goto member_name;
                goto value;
            }
            case 't': pos = parse_literal(pos, "true", 4, NodeType::true_value); goto after_value;
            case 'f': pos = parse_literal(pos, "false", 5, NodeType::false_value); goto after_value;
            case 'n': pos = parse_literal(pos, "null", 4, NodeType::null_value); goto after_value;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    pos = parse_number(pos);
                    goto after_value;
                }
                fail(pos, describe_byte(c));
        }

    member_name:  // pos is at (or before whitespace before) the name of a new member
        pos = skip_whitespace(pos);
        if (pos >= size) end_of_input(pos, "'\"'");
    member_name_at:  // pos < size, not whitespace
        if (text[pos] != '"') fail(pos, describe_byte(text[pos]) + ", expected '\"'");
        {
            const std::size_t offset = pos;
            const StringBytes name = parse_string(pos);
            // A name left in place is preceded by its opening quote and everything before.
            const bool in_text = name.data == text + offset + 1;
            tape_.key(name.data, name.size, name.needs_escape, offset, in_text ? offset + 1 : 0);
            pos = name.next;
        }
        // ":" and json.dumps' ": " followed by the value, without the general whitespace skip.
        if (size - pos >= 3 && text[pos] == ':') {
            pos += text[pos + 1] == ' ' ? 2 : 1;
            c = text[pos];
            if (static_cast<unsigned char>(c) > ' ') goto value_at;
            goto value;
        }
        pos = skip_whitespace(pos);
        if (pos >= size) end_of_input(pos, "':'");
        if (text[pos] != ':') fail(pos, describe_byte(text[pos]) + ", expected ':'");
        ++pos;
        goto value;

    after_value:  // a complete value: ',' continues the container, a bracket closes it
        interrupts_.tick();
        if (open_.empty()) goto done;
        {
            ParseFrame& top = open_.back();
            // "," and json.dumps' ", " followed by the next member or element, without the
            // general whitespace skip.
            if (size - pos >= 3 && text[pos] == ',') {
                ++top.count;
                pos += text[pos + 1] == ' ' ? 2 : 1;
                c = text[pos];
                const bool spaced = static_cast<unsigned char>(c) <= ' ';  // more whitespace: the general path
                if (top.is_object) {
                    if (spaced) goto member_name;
                    goto member_name_at;
                }
                if (spaced) goto value;
                goto value_at;
            }
            pos = skip_whitespace(pos);
            if (pos >= size) end_of_input(pos, top.is_object ? "',' or '}'" : "',' or ']'");
            c = text[pos++];
            if (c == ',') {
                ++top.count;
                if (top.is_object) goto member_name;
                goto value;
            }
            const char closing = top.is_object ? '}' : ']';
            if (c != closing) fail(pos - 1, describe_byte(c) + ", expected ',' or '" + closing + "'");
            close_innermost();
            goto after_value;
        }

    done:
        pos = skip_whitespace(pos);
        if (pos != size) fail(pos, describe_byte(text[pos]) + " after the JSON value");
    }

private:
    std::size_t skip_whitespace(std::size_t pos) const {
        // Compact JSON has none and json.dumps style one space: test a byte before the
        // loop; pretty-printed indentation goes 8 spaces per step.
        if (pos >= size_ || static_cast<unsigned char>(text_[pos]) > ' ' || !is_whitespace(text_[pos])) return pos;
        if (++pos >= size_ || static_cast<unsigned char>(text_[pos]) > ' ') return pos;  // ": " and ", "
        while (pos + 8 <= size_) {
            std::uint64_t word;
            std::memcpy(&word, text_ + pos, 8);
            if (word != 0x2020202020202020ULL) break;
            pos += 8;
        }
        while (pos < size_ && is_whitespace(text_[pos])) ++pos;
        return pos;
    }

    [[noreturn]] void end_of_input(std::size_t pos, const char* expected) {
        fail(pos, std::string("unexpected end of input, expected ") + expected);
    }

    void close_innermost() {
        const ParseFrame top = open_.back();
        open_.pop_back();
        if (top.is_object)
            tape_.close_object(top.node, top.count, true);
        else
            tape_.close_array(top.node, top.count);
    }

    // Returns the position after the literal.
    std::size_t parse_literal(std::size_t pos, const char* word, std::size_t length, NodeType type) {
        if (size_ - pos < length || std::memcmp(text_ + pos, word, length) != 0) fail(pos, "invalid literal");
        if (raw_strings_)
            tape_.scalar(NodeType::raw, word, length);  // word is a string literal: static storage
        else
            tape_.scalar(type);
        return pos + length;
    }

    // Returns the position after the number token.
    std::size_t parse_number(std::size_t pos) {
        // Fast path: a plain integer of at most 15 digits without a leading zero is a
        // double exactly and already canonical ("-0" and "0<digit>..." take the full path).
        {
            std::size_t i = pos + (text_[pos] == '-');
            const std::size_t digits = i;
            while (i < size_ && static_cast<unsigned char>(text_[i] - '0') < 10) ++i;
            const std::size_t count = i - digits;
            const bool integer_ok = count != 0 && count <= 15 && (text_[digits] != '0' || count == 1);
            if (integer_ok && (i == size_ || (text_[i] != '.' && text_[i] != 'e' && text_[i] != 'E')) &&
                (text_[digits] != '0' || digits == pos)) {
                tape_.scalar(number_type_, text_ + pos, i - pos);
                return i;
            }
            // Also plain decimals like 0.616 or -12.5: at most 15 significant digits (exact
            // in a double, so the shortest form has the same digits), no trailing zero, and
            // at least 1e-6 (ECMAScript switches to exponent form below that).
            if (integer_ok && i < size_ && text_[i] == '.') {
                const std::size_t fraction = ++i;
                while (i < size_ && static_cast<unsigned char>(text_[i] - '0') < 10) ++i;
                std::size_t leading_zeros = 0;
                if (text_[digits] == '0')
                    while (fraction + leading_zeros < i && text_[fraction + leading_zeros] == '0') ++leading_zeros;
                const std::size_t significant = (text_[digits] == '0' ? 0 : count) + (i - fraction - leading_zeros);
                if (i > fraction && text_[i - 1] != '0' && significant <= 15 && leading_zeros < 6 &&
                    (i == size_ || (text_[i] != 'e' && text_[i] != 'E'))) {
                    tape_.scalar(number_type_, text_ + pos, i - pos);
                    return i;
                }
            }
        }
        const std::size_t start = pos;
        const std::string_view rest(text_ + start, size_ - start);
        const std::size_t length = scan_number_token(rest);
        if (length == 0) diagnose_bad_number(start);
        if (rest[0] == '0' || (rest[0] == '-' && rest[1] == '0')) {
            const std::size_t after_zero = start + (rest[0] == '-' ? 2 : 1);
            if (after_zero < size_ && text_[after_zero] >= '0' && text_[after_zero] <= '9')
                fail(start, "leading zeros are not allowed in numbers");
        }
        const std::string_view token = rest.substr(0, length);
        if (is_short_canonical_integer(token)) {
            tape_.scalar(number_type_, token.data(), token.size());
            return start + length;
        }
        char* out = doc_.arena.allocate(kMaxCanonicalNumberLength);
        std::size_t written;
        try {
            written = format_canonical_number(token, out);
        } catch (const JsonError& error) {
            throw JsonError(error.kind(), error.what(), start, error.hint());
        }
        doc_.arena.give_back(kMaxCanonicalNumberLength - written);
        tape_.scalar(number_type_, out, written);
        return start + length;
    }

    [[noreturn]] void diagnose_bad_number(std::size_t start) {
        std::size_t i = start;
        if (text_[i] == '-') ++i;
        auto digit_at = [&](std::size_t k) { return k < size_ && text_[k] >= '0' && text_[k] <= '9'; };
        if (!digit_at(i)) fail(i, "expected a digit after '-'");
        while (digit_at(i)) ++i;
        if (i < size_ && text_[i] == '.') {
            if (!digit_at(++i)) fail(i, "expected a digit after the decimal point");
            while (digit_at(i)) ++i;
        }
        ++i;  // past 'e' / 'E'
        if (i < size_ && (text_[i] == '+' || text_[i] == '-')) ++i;
        fail(i, "expected a digit in the exponent");
    }

    struct StringBytes {
        const char* data;
        std::size_t size;
        bool needs_escape;
        std::size_t next;  // position after the closing quote
    };

    // Returns the position after the string.
    std::size_t parse_string_value(std::size_t pos) {
        const StringBytes s = raw_strings_ ? parse_string_keeping_escapes(pos) : parse_string(pos);
        if (raw_strings_ && s.data == text_ + pos + 1)  // still the input spelling: quotes included, it is canonical
            tape_.scalar(NodeType::raw, text_ + pos, s.size + 2);
        else
            tape_.scalar(NodeType::string, s.data, s.size, s.needs_escape);
        return s.next;
    }

    // Write-only parse: a string whose escapes are all canonical stays a view of its
    // input spelling (the writer copies it verbatim, needs_escape false); any other
    // escape (\/, \u0041, \u00E9, uppercase hex, ...) falls back to unescaping.
    StringBytes parse_string_keeping_escapes(std::size_t quote) {
        const std::size_t start = quote + 1;
        std::size_t first_special;
        if (size_ - start >= 16) {
            // Short strings end within 16 bytes; longer ones (prose) go to the 64-byte scan.
            if (const unsigned mask = string_special_mask16(text_ + start)) {
                first_special = start + static_cast<std::size_t>(__builtin_ctz(mask));
            } else {
                const std::size_t end = find_canonical_string_end(text_, start + 16, size_);
                if (end != kNoCanonicalEnd) return {text_ + start, end - start, false, end + 1};
                first_special = find_string_special(text_, start + 16, size_);
            }
        } else {
            first_special = find_string_special(text_, start, size_);
        }
        if (first_special < size_ && text_[first_special] == '\\') {
            const std::size_t end = find_canonical_string_end(text_, first_special, size_);
            if (end != kNoCanonicalEnd) return {text_ + start, end - start, false, end + 1};
        }
        std::size_t i = first_special;
        while (i < size_) {
            const auto c = static_cast<unsigned char>(text_[i]);
            if (c == '"') return {text_ + start, i - start, false, i + 1};
            if (c < 0x20) break;  // the full path reports it
            const std::size_t length = canonical_escape_length(text_ + i, size_ - i);
            if (length == 0) break;
            i = find_string_special(text_, i + length, size_);
        }
        return parse_escaped_string(start, first_special);
    }

    // quote is the opening quote's position. Strings without escapes stay views into the text.
    StringBytes parse_string(std::size_t quote) {
        const std::size_t start = quote + 1;
        const std::size_t special = find_string_special(text_, start, size_);
        if (special < size_ && text_[special] == '"') return {text_ + start, special - start, false, special + 1};
        return parse_escaped_string(start, special);
    }

    // Index of the closing quote of a string starting at start; first_special is
    // the first '"', '\\' or control at or after start.
    std::size_t find_string_end(std::size_t start, std::size_t first_special) {
        std::size_t i = first_special;
        while (true) {
            if (i >= size_) fail(start - 1, "unterminated string");
            const auto c = static_cast<unsigned char>(text_[i]);
            if (c == '"') return i;
            if (c < 0x20) fail(i, "unescaped control character in string");
            i = find_string_special(text_, i + 2, size_);  // skip the backslash and the escaped byte
            if (i > size_) i = size_;
        }
    }

    StringBytes parse_escaped_string(std::size_t start, std::size_t first_special) {
        if (first_special < size_ && static_cast<unsigned char>(text_[first_special]) < 0x20)
            fail(first_special, "unescaped control character in string");
        const std::size_t end = find_string_end(start, first_special);
        // Unescaping never makes a string longer, so the raw length is enough room.
        char* out = doc_.arena.allocate(end - start);
        std::size_t written = 0;
        escape_produced_special_ = false;
        std::size_t i = start;
        while (i < end) {
            const std::size_t special = find_string_special(text_, i, end);
            std::memcpy(out + written, text_ + i, special - i);
            written += special - i;
            if (special == end) break;
            i = decode_escape(special, out, written);
        }
        doc_.arena.give_back((end - start) - written);
        // Raw runs cannot hold '"', '\\' or controls; only escapes can produce them.
        return {out, written, escape_produced_special_, end + 1};
    }

    unsigned read_hex4(std::size_t at) {
        if (size_ - at < 4) fail(at - 2, "invalid \\u escape: expected 4 hex digits");
        unsigned value = 0;
        for (std::size_t k = 0; k < 4; ++k) {
            const int digit = hex_value(text_[at + k]);
            if (digit < 0) fail(at - 2, "invalid \\u escape: expected 4 hex digits");
            value = value * 16 + static_cast<unsigned>(digit);
        }
        return value;
    }

    // Decodes the escape at text_[backslash]; returns the index after it.
    std::size_t decode_escape(std::size_t backslash, char* out, std::size_t& written) {
        const char kind = text_[backslash + 1];
        char simple = 0;
        switch (kind) {
            case '"': simple = '"'; break;
            case '\\': simple = '\\'; break;
            case '/': simple = '/'; break;
            case 'b': simple = '\b'; break;
            case 'f': simple = '\f'; break;
            case 'n': simple = '\n'; break;
            case 'r': simple = '\r'; break;
            case 't': simple = '\t'; break;
            case 'u': return decode_unicode_escape(backslash, out, written);
            default: fail(backslash, "invalid escape sequence in string");
        }
        escape_produced_special_ |= is_string_special(static_cast<unsigned char>(simple));
        out[written++] = simple;
        return backslash + 2;
    }

    std::size_t decode_unicode_escape(std::size_t backslash, char* out, std::size_t& written) {
        std::uint32_t code_point = read_hex4(backslash + 2);
        std::size_t next = backslash + 6;
        if (code_point >= 0xDC00 && code_point <= 0xDFFF) fail(backslash, "lone low surrogate in \\u escape");
        if (code_point >= 0xD800 && code_point <= 0xDBFF) {
            if (size_ - next < 6 || text_[next] != '\\' || text_[next + 1] != 'u')
                fail(backslash, "lone high surrogate in \\u escape");
            const unsigned low = read_hex4(next + 2);
            if (low < 0xDC00 || low > 0xDFFF) fail(backslash, "lone high surrogate in \\u escape");
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
            next += 6;
        }
        escape_produced_special_ |= code_point < 0x80 && is_string_special(static_cast<unsigned char>(code_point));
        // A pair (12 input bytes) gives 4 output bytes; a single escape (6) at most 3.
        written += encode_utf8(code_point, out + written);
        return next;
    }

    Document::Impl& doc_;
    TapeWriter tape_;
    const char* text_;
    std::size_t size_;
    std::size_t max_depth_;
    std::pmr::vector<ParseFrame>& open_;
    // Write-only parse: scalars whose input spelling is canonical become raw nodes
    // (one verbatim copy in the writer, no per-type dispatch); see NodeType::raw.
    bool raw_strings_;
    InterruptCountdown interrupts_;
    NodeType number_type_ = raw_strings_ ? NodeType::raw : NodeType::number;
    bool escape_produced_special_ = false;  // the string being unescaped needs escaping on output
};

}  // namespace

void parse_text_into(Document::Impl& doc, std::string_view text, const ParseLimits& limits,
                     std::pmr::vector<ParseFrame>& stack, ParseMode mode) {
    doc.reset();
    doc.size_hint = text.size();
    TextParser(doc, text, limits, stack, mode).parse();
}

}  // namespace detail

Document parse_json_text(std::string_view text, const ParseLimits& limits) {
    Document document;
    // The document owns a copy of the text, so its string views outlive the caller's buffer.
    document.impl_->owned_text.assign(text.data(), text.size());
    std::pmr::vector<detail::ParseFrame> stack;
    detail::parse_text_into(*document.impl_, document.impl_->owned_text, limits, stack, detail::ParseMode::document);
    document.impl_->pending_keys.shrink_to_fit();  // empty after a complete parse
    return document;
}

}  // namespace opledger::core
