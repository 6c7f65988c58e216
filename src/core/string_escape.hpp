// RFC 8785 string escaping into an OutputSink, shared by the Document writer and
// the event-driven CanonicalStream: the same bytes must come out of both.
#pragma once

#include <string_view>

#include "core/no_postgres.hpp"
#include "core/output_sink.hpp"
#include "core/string_scan.hpp"

namespace opledger::core::detail {

// One escape sequence: the short forms RFC 8785 §3.2.2.2 prescribes, \u00XX otherwise.
inline void put_escape(OutputSink& out, unsigned char c) {
    static constexpr char kHexDigits[] = "0123456789abcdef";
    out.ensure(6);
    out.put('\\');
    switch (c) {
        case '"': return out.put('"');
        case '\\': return out.put('\\');
        case '\b': return out.put('b');
        case '\f': return out.put('f');
        case '\n': return out.put('n');
        case '\r': return out.put('r');
        case '\t': return out.put('t');
        default: {
            const char escape[5] = {'u', '0', '0', kHexDigits[c >> 4], kHexDigits[c & 0xF]};
            out.put(escape, 5);
        }
    }
}

// The string body (no quotes), escaped where RFC 8785 requires.
inline void put_string_body(OutputSink& out, std::string_view utf8, bool needs_escape) {
    if (!needs_escape) return out.write(utf8.data(), utf8.size());
    std::size_t start = 0;
    while (start < utf8.size()) {
        const std::size_t special = find_string_special(utf8.data(), start, utf8.size());
        out.write(utf8.data() + start, special - start);
        if (special == utf8.size()) break;
        put_escape(out, static_cast<unsigned char>(utf8[special]));
        start = special + 1;
    }
}

}  // namespace opledger::core::detail
