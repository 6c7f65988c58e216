// RFC 8785 §3.2.3: member names are sorted by their UTF-16 code units.
// For valid UTF-8, byte order equals code point order, and code point order equals
// UTF-16 order except between U+E000..U+FFFF (UTF-8 lead byte 0xEE/0xEF) and
// supplementary characters (lead 0xF0..0xF4, UTF-16 high surrogates 0xD800..):
// there the supplementary character sorts first. So one byte comparison at the
// first difference, with that single correction, gives the UTF-16 order.
#include "core/jcs.hpp"
#include "core/utf16_order.hpp"

namespace opledger::core {

int compare_utf16(std::string_view a, std::string_view b) noexcept { return detail::utf16_order(a, b); }

}  // namespace opledger::core
