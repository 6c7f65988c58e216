// RFC 8785 output: sorted members (order fixed while building), no whitespace,
// minimal string escapes. Iterative with an explicit stack so nesting depth never
// touches the machine stack; every byte is appended once, so writing is linear.
#include <algorithm>
#include <cstring>

#include "core/document_impl.hpp"
#include "core/string_escape.hpp"
#include "core/string_scan.hpp"
#include "core/workspace_impl.hpp"

namespace opledger::core::detail {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

void append_escape(std::string& out, unsigned char c) {
    switch (c) {
        case '"': out.append("\\\"", 2); return;
        case '\\': out.append("\\\\", 2); return;
        case '\b': out.append("\\b", 2); return;
        case '\f': out.append("\\f", 2); return;
        case '\n': out.append("\\n", 2); return;
        case '\r': out.append("\\r", 2); return;
        case '\t': out.append("\\t", 2); return;
        default: {
            const char escape[6] = {'\\', 'u', '0', '0', kHexDigits[c >> 4], kHexDigits[c & 0xF]};
            out.append(escape, 6);
        }
    }
}

}  // namespace

bool needs_escaping(std::string_view utf8) noexcept {
    return find_string_special(utf8.data(), 0, utf8.size()) != utf8.size();
}

void append_quoted(std::string& out, std::string_view utf8, bool needs_escape) {
    out.push_back('"');
    if (!needs_escape) {
        out.append(utf8.data(), utf8.size());
    } else {
        std::size_t start = 0;
        while (start < utf8.size()) {
            const std::size_t special = find_string_special(utf8.data(), start, utf8.size());
            out.append(utf8.data() + start, special - start);
            if (special == utf8.size()) break;
            append_escape(out, static_cast<unsigned char>(utf8[special]));
            start = special + 1;
        }
    }
    out.push_back('"');
}

namespace {

// `prefix` ('\0' for none) and `suffix` ('\0' for none) frame the literal: the
// writer glues ',' before and ':' after member names without another room check.
inline void put_quoted(OutputSink& out, const Node& node, char prefix, char suffix) {
    const std::size_t framed = node.size + 4;
    if (!node.needs_escape && out.has_room(framed)) {  // the common case: one check, one copy
        if (prefix) out.put(prefix);
        out.put('"');
        out.put(node.data, node.size);
        out.put('"');
        if (suffix) out.put(suffix);
        return;
    }
    out.ensure(2);
    if (prefix) out.put(prefix);
    out.put('"');
    put_string_body(out, node.text(), node.needs_escape);
    out.ensure(2);
    out.put('"');
    if (suffix) out.put(suffix);
}

constexpr std::string_view kRedacted = "\"[REDACTED]\"";

// Where a pointer set stands at one value while walking; null when no pointer of
// the set reaches below this value.
struct PointerCursor {
    const PointerTrie* exclude = nullptr;
    const PointerTrie* redact = nullptr;

    PointerCursor member(std::string_view name) const {
        return {exclude ? exclude->child(name) : nullptr, redact ? redact->child(name) : nullptr};
    }
    PointerCursor element(std::size_t index) const {
        return {exclude ? exclude->element(index) : nullptr, redact ? redact->element(index) : nullptr};
    }
    bool excluded() const { return exclude && exclude->terminal; }
    bool redacted() const { return redact && redact->terminal; }
    bool active() const { return exclude || redact; }
};

// kPointers: whether exclude/redact sets are in play. The common case (none)
// compiles without any cursor bookkeeping in the per-node path.
template <bool kPointers>
class Writer {
public:
    Writer(const Document::Impl& doc, OutputSink& out, std::pmr::vector<WriteFrame>& stack)
        : doc_(doc), out_(out), stack_(stack) {
        stack_.clear();
    }

    void write_root(PointerCursor cursor) {
        if (cursor.excluded()) return;  // the whole document is left out: empty output
        if (cursor.redacted()) return out_.write(kRedacted.data(), kRedacted.size());
        write_value(0, cursor, '\0');
        while (!stack_.empty()) step();
    }

private:
    // Writes a scalar completely (after `prefix`, a ',' or nothing), or the opening
    // bracket of a container and pushes it.
    void write_value(std::uint32_t index, PointerCursor cursor, char prefix) {
        const Node& node = doc_.tape[index];
        out_.ensure(6);
        if (prefix) out_.put(prefix);
        switch (node.type) {
            case NodeType::null_value: return out_.put("null", 4);
            case NodeType::false_value: return out_.put("false", 5);
            case NodeType::true_value: return out_.put("true", 4);
            case NodeType::number: return out_.write(node.data, node.size);
            case NodeType::string:
            case NodeType::key: return put_quoted(out_, node, '\0', '\0');
            case NodeType::array:
            case NodeType::object:
                out_.put(node.type == NodeType::array ? '[' : '{');
                {
                    WriteFrame& frame = stack_.emplace_back();  // in place: no store-forwarding stall
                    frame.node = index;
                    frame.position = 0;
                    frame.next_child = index + 1;
                    frame.wrote_any = false;
                }
                if constexpr (kPointers) cursors_.push_back(cursor);
                return;
        }
    }

    // Writes members/elements of the innermost container until one of them opens a
    // container (pushed; the loop resumes there) or the container ends.
    void step() {
        WriteFrame& frame = stack_.back();
        const Node& node = doc_.tape[frame.node];
        const bool is_array = node.type == NodeType::array;
        const std::size_t depth = stack_.size();
        while (frame.position < node.size) {
            const std::uint32_t position = frame.position++;
            std::uint32_t value_index;
            std::uint32_t key_index = 0;
            if (is_array) {
                value_index = frame.next_child;
                frame.next_child = static_cast<std::uint32_t>(doc_.next_sibling(value_index));
            } else {
                key_index = doc_.members[node.container.first_member + position];
                value_index = key_index + 1;
            }
            PointerCursor child;
            if constexpr (kPointers) {
                const PointerCursor& here = cursors_.back();
                if (here.active())
                    child = is_array ? here.element(position) : here.member(doc_.tape[key_index].text());
                if (child.excluded()) continue;
            }
            // Without pointer sets nothing is skipped, so "wrote any" is "not the first".
            char separator;
            if constexpr (kPointers) {
                separator = frame.wrote_any ? ',' : '\0';
                frame.wrote_any = true;
            } else {
                separator = position != 0 ? ',' : '\0';
            }
            if (!is_array) {
                put_quoted(out_, doc_.tape[key_index], separator, ':');
                separator = '\0';
            }
            if constexpr (kPointers) {
                if (child.redacted()) {
                    if (separator) out_.write(&separator, 1);
                    out_.write(kRedacted.data(), kRedacted.size());
                    continue;
                }
            }
            write_value(value_index, child, separator);
            if (stack_.size() != depth) return;  // pushed a container: `frame` may dangle now
        }
        out_.ensure(1);
        out_.put(is_array ? ']' : '}');
        stack_.pop_back();
        if constexpr (kPointers) cursors_.pop_back();
    }

    const Document::Impl& doc_;
    OutputSink& out_;
    std::pmr::vector<WriteFrame>& stack_;
    std::vector<PointerCursor> cursors_;  // kPointers only: the cursor of each open container
};

}  // namespace

void write_document(const Document::Impl& doc, OutputSink& out, std::pmr::vector<WriteFrame>& stack,
                    const PointerTrie* exclude, const PointerTrie* redact) {
    if (doc.tape.empty()) return;
    if (exclude || redact)
        Writer<true>(doc, out, stack).write_root(PointerCursor{exclude, redact});
    else
        Writer<false>(doc, out, stack).write_root(PointerCursor{});
}

}  // namespace opledger::core::detail
