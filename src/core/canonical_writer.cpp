// RFC 8785 output: sorted members (order fixed while building), no whitespace,
// minimal string escapes. Iterative with an explicit stack so nesting depth never
// touches the machine stack; every byte is appended once, so writing is linear.
#include <cstring>

#include "core/document_impl.hpp"
#include "core/pointer_impl.hpp"
#include "core/string_scan.hpp"

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

class Writer {
public:
    Writer(const Document::Impl& doc, std::string& out) : doc_(doc), out_(out) {}

    void write_root(PointerCursor cursor) {
        if (cursor.excluded()) return;  // the whole document is left out: empty output
        if (cursor.redacted()) {
            out_.append(kRedacted);
            return;
        }
        write_value(0, cursor);
        while (!stack_.empty()) step();
    }

private:
    struct Frame {
        std::size_t node;
        std::size_t position;    // members/elements done so far
        std::size_t next_child;  // arrays: tape index of the next element
        PointerCursor cursor;
        bool wrote_any;
    };

    // Writes a scalar completely, or the opening bracket of a container and pushes it.
    void write_value(std::size_t index, PointerCursor cursor) {
        const Node& node = doc_.tape[index];
        switch (node.type) {
            case NodeType::null_value: out_.append("null", 4); return;
            case NodeType::false_value: out_.append("false", 5); return;
            case NodeType::true_value: out_.append("true", 4); return;
            case NodeType::number: out_.append(node.data, node.size); return;
            case NodeType::string:
            case NodeType::key: append_quoted(out_, node.text(), node.needs_escape); return;
            case NodeType::array:
            case NodeType::object:
                out_.push_back(node.type == NodeType::array ? '[' : '{');
                stack_.push_back(Frame{index, 0, index + 1, cursor.active() ? cursor : PointerCursor{}, false});
                return;
        }
    }

    void step() {
        Frame& frame = stack_.back();
        const Node& node = doc_.tape[frame.node];
        if (frame.position == node.size) {
            out_.push_back(node.type == NodeType::array ? ']' : '}');
            stack_.pop_back();
            return;
        }
        const std::size_t position = frame.position++;
        std::size_t value_index;
        PointerCursor child;
        std::size_t key_index = 0;
        if (node.type == NodeType::array) {
            value_index = frame.next_child;
            frame.next_child = doc_.next_sibling(value_index);
            if (frame.cursor.active()) child = frame.cursor.element(position);
        } else {
            key_index = doc_.members[node.first_member + position];
            value_index = key_index + 1;
            if (frame.cursor.active()) child = frame.cursor.member(doc_.tape[key_index].text());
        }
        if (child.excluded()) return;
        if (frame.wrote_any) out_.push_back(',');
        frame.wrote_any = true;
        if (node.type == NodeType::object) {
            const Node& key = doc_.tape[key_index];
            append_quoted(out_, key.text(), key.needs_escape);
            out_.push_back(':');
        }
        if (child.redacted()) {
            out_.append(kRedacted);
            return;
        }
        write_value(value_index, child);  // may push: `frame` is not used after this
    }

    const Document::Impl& doc_;
    std::string& out_;
    std::vector<Frame> stack_;
};

}  // namespace

void write_document(const Document::Impl& doc, std::string& out, const WriteOptions& options) {
    PointerCursor root;
    if (options.exclude) root.exclude = pointer_trie(*options.exclude);
    if (options.redact) root.redact = pointer_trie(*options.redact);
    Writer(doc, out).write_root(root);
}

}  // namespace opledger::core::detail
