// RFC 8785 output: sorted members (order fixed while building), no whitespace,
// minimal string escapes. Iterative with an explicit stack so nesting depth never
// touches the machine stack; every byte is appended once, so writing is linear.
#include <algorithm>
#include <cstring>

#include "core/document_impl.hpp"
#include "core/interrupts.hpp"
#include "core/sha256_ni.hpp"
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
    const std::size_t framed = std::size_t{node.size} + 4;  // in size_t: no 32-bit wrap
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

// The walk with exclude/redact pointer sets; without them write_plain below runs.
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
            case NodeType::raw:
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
                cursors_.push_back(cursor);
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
            interrupts_.tick();
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
            {
                const PointerCursor& here = cursors_.back();
                if (here.active())
                    child = is_array ? here.element(position) : here.member(doc_.tape[key_index].text());
                if (child.excluded()) continue;
            }
            // Excluded members are skipped, so "not the first" is tracked, not derived.
            char separator = frame.wrote_any ? ',' : '\0';
            frame.wrote_any = true;
            if (!is_array) {
                put_quoted(out_, doc_.tape[key_index], separator, ':');
                separator = '\0';
            }
            if (child.redacted()) {
                if (separator) out_.write(&separator, 1);
                out_.write(kRedacted.data(), kRedacted.size());
                continue;
            }
            write_value(value_index, child, separator);
            if (stack_.size() != depth) return;  // pushed a container: `frame` may dangle now
        }
        out_.ensure(1);
        out_.put(is_array ? ']' : '}');
        stack_.pop_back();
        cursors_.pop_back();
    }

    const Document::Impl& doc_;
    OutputSink& out_;
    std::pmr::vector<WriteFrame>& stack_;
    std::vector<PointerCursor> cursors_;  // the cursor of each open container
    InterruptCountdown interrupts_;
};

// The rare and long cases of write_plain, out of line (it hands its cursor to the
// sink before and takes it back after).
[[gnu::noinline]] void sink_write(OutputSink& out, char separator, const char* data, std::size_t size) {
    if (separator) out.write(&separator, 1);
    out.write(data, size);
}

[[gnu::noinline]] void sink_quoted(OutputSink& out, const Node& node, char prefix, char suffix) {
    put_quoted(out, node, prefix, suffix);
}

[[gnu::noinline]] void sink_flush(OutputSink& out) { out.flush(); }

// write_plain<true> hashes a block only once the block after it is written too.
// The block's bytes were stored by many small writes; a 16-byte load of them while
// they are still in the store queue cannot be forwarded and waits until they are
// committed, i.e. until everything older has retired, including the previous
// block's whole SHA chain: hashing the newest block serialised writing and hashing
// again (no gain at all; one block of lag: writing+hashing -8%).
constexpr std::size_t kHashLagBlocks = 1;

// write_plain<true> runs a quarter of a block (16 rounds) per member/element rather
// than whole blocks: a whole block is ~120 SHA instructions waiting on one chain,
// and the out-of-order window filled up behind them before much of the writer's
// work could run (whole blocks: writing+hashing 0.67 ns per input byte; quarters:
// 0.58, SHA-256 of the output alone being 0.56). A quarter per member hashes 16
// bytes while the writer writes ~13 on the benchmark's payloads; with a backlog
// (long values) it runs two, and far behind it catches up with whole blocks.
constexpr std::size_t kHurryBytes = 1024;
constexpr std::size_t kCatchUpBytes = 4096;

// The digest of write_plain<true>: the state lives in registers while the writer
// compresses blocks itself, and goes back to the sink's Sha256Blocks (OpenSSL's
// context) whenever the sink may hash (a flush) and at the end.
class InlineDigest {
public:
#if defined(OPLEDGER_HAVE_SHA_NI)
    explicit InlineDigest(Sha256Blocks* digest) : digest_(digest) {
        if (digest_) take();
    }
    // Once per member, with `hashed` the first byte not hashed yet: a quarter of the
    // oldest block that has the next one written behind it (two when behind), or,
    // when the writer got far ahead (long values), all such blocks.
    void step(const char*& hashed, const char* cursor) {
        const std::size_t backlog = static_cast<std::size_t>(cursor - hashed);
        if (quarter_ == 0 && backlog < (kHashLagBlocks + 1) * Sha256Blocks::kBlockBytes) return;
        if (backlog >= kCatchUpBytes) {
            settle(hashed);
            const std::size_t whole =
                static_cast<std::size_t>(cursor - hashed) / Sha256Blocks::kBlockBytes - kHashLagBlocks;
            for (std::size_t i = 0; i < whole; ++i, hashed += Sha256Blocks::kBlockBytes)
                sha_ni::compress(state_, hashed);
            added_ += whole;
            return;
        }
        quarter(hashed);
        if (backlog >= kHurryBytes) quarter(hashed);
    }
    // Before the sink may hash (or at the end): completes a block begun by step()
    // and hands the state to the sink's digest.
    void give(const char*& hashed) {
        settle(hashed);
        alignas(16) std::uint32_t h[8];
        sha_ni::store_state(state_, h);
        digest_->import_state(h, added_);
        added_ = 0;
    }
    void take() {
        alignas(16) std::uint32_t h[8];
        digest_->export_state(h);
        state_ = sha_ni::load_state(h);
    }

private:
    void quarter(const char*& hashed) {
        sha_ni::compress_quarter(state_, part_, hashed, quarter_);
        if (++quarter_ == 4) {
            quarter_ = 0;
            ++added_;
            hashed += Sha256Blocks::kBlockBytes;
        }
    }
    void settle(const char*& hashed) {
        while (quarter_ != 0) quarter(hashed);
    }

    Sha256Blocks* digest_;
    sha_ni::State state_{};  // (zero until take(); write_plain<false> never uses it)
    sha_ni::PartialBlock part_{};
    unsigned quarter_ = 0;  // the next quarter of the block at `hashed` (0: not begun)
    std::size_t added_ = 0;
#else
    explicit InlineDigest(Sha256Blocks*) {}
    void step(const char*&, const char*) {}
    void give(const char*&) {}
    void take() {}
#endif
};

// The walk without pointer sets (the write-only path and most Document writes), as
// one loop whose output cursor and innermost-container state are locals: kept in
// memory (sink, frames), the compiler reloaded them after every byte stored through
// char*, which may alias anything. `stack` holds the enclosing containers only.
//
// kHashBlocks (the sink is in block mode and the CPU has SHA-NI): the output is
// hashed while it is written, a little per member/element (InlineDigest::step).
// SHA-NI's block function is one long dependency chain that leaves most execution
// ports idle; interleaved, it runs in the shadow of the writer's work instead of
// after each 32 KB of output.
template <bool kHashBlocks>
void write_plain(const Document::Impl& doc, OutputSink& out, std::pmr::vector<WriteFrame>& stack) {
    const Node* const tape = doc.tape.data();
    const std::uint32_t* const members = doc.members.data();
    stack.clear();
    char* cursor = out.cursor();
    const char* const limit = out.limit();  // fixed: flushing only moves the cursor back
    const auto room = [&cursor, limit] { return static_cast<std::size_t>(limit - cursor); };
    InlineDigest digest(kHashBlocks ? out.blocks() : nullptr);
    const char* hashed = out.consumed();  // kHashBlocks: output before this is hashed
    // Around every out-of-line sink call: it may flush (moving both pointers and
    // hashing through the sink's digest).
    const auto give = [&] {
        out.set_cursor(cursor);
        if constexpr (kHashBlocks) {
            digest.give(hashed);
            out.set_consumed(hashed);
        }
    };
    const auto take = [&] {
        cursor = out.cursor();
        if constexpr (kHashBlocks) {
            hashed = out.consumed();
            digest.take();
        }
    };

    // The innermost open container.
    std::uint32_t container = 0, position = 0, count = 0, next_child = 0, first_member = 0;
    bool is_array = false;

    const Node* value = tape;
    char separator = '\0';
    InterruptCountdown interrupts;
    goto write_value;  // the root

next_member:
    if constexpr (kHashBlocks) digest.step(hashed, cursor);
    interrupts.tick();  // a throw abandons the sink's output, which is never used then
    if (position == count) {
        if (room() < 1) {
            give();
            sink_flush(out);
            take();
        }
        *cursor++ = is_array ? ']' : '}';
        if (stack.empty()) goto done;
        {
            const WriteFrame& outer = stack.back();
            container = outer.node;
            position = outer.position;
            next_child = outer.next_child;
            stack.pop_back();
        }
        count = tape[container].size;
        is_array = tape[container].type == NodeType::array;
        first_member = tape[container].container.first_member;
        goto next_member;
    }
    separator = position != 0 ? ',' : '\0';
    if (is_array) {
        value = tape + next_child;
        next_child = is_container(value->type) ? value->container.end : next_child + 1;
    } else {
        const Node& key = tape[members[first_member + position]];
        if (!key.needs_escape && room() >= std::size_t{key.size} + 4) {
            *cursor = ',';
            cursor += separator != '\0';
            *cursor++ = '"';
            OutputSink::copy_bytes(cursor, key.data, key.size);
            cursor += key.size;
            *cursor++ = '"';
            *cursor++ = ':';
        } else {
            give();
            sink_quoted(out, key, separator, ':');
            take();
        }
        separator = '\0';
        value = &key + 1;
    }
    ++position;

write_value:  // *value after `separator` ('\0' for none)
    {
        const char* verbatim = nullptr;  // scalars written as they are stored
        std::size_t length = 0;
        switch (value->type) {
            case NodeType::raw:
            case NodeType::number:
                verbatim = value->data;
                length = value->size;
                break;
            case NodeType::null_value:
                verbatim = "null";
                length = 4;
                break;
            case NodeType::false_value:
                verbatim = "false";
                length = 5;
                break;
            case NodeType::true_value:
                verbatim = "true";
                length = 4;
                break;
            case NodeType::string:
            case NodeType::key:
                if (!value->needs_escape && room() >= std::size_t{value->size} + 3) {
                    *cursor = ',';
                    cursor += separator != '\0';
                    *cursor++ = '"';
                    OutputSink::copy_bytes(cursor, value->data, value->size);
                    cursor += value->size;
                    *cursor++ = '"';
                } else {
                    give();
                    sink_quoted(out, *value, separator, '\0');
                    take();
                }
                goto next_member_or_done;
            case NodeType::array:
            case NodeType::object:
                if (room() < 2) {
                    give();
                    sink_flush(out);
                    take();
                }
                *cursor = ',';
                cursor += separator != '\0';
                *cursor++ = value->type == NodeType::array ? '[' : '{';
                if (value != tape) {  // not the root: keep the enclosing container's state
                    WriteFrame& outer = stack.emplace_back();  // in place: no store-forwarding stall
                    outer.node = container;
                    outer.position = position;
                    outer.next_child = next_child;
                    outer.wrote_any = true;
                }
                container = static_cast<std::uint32_t>(value - tape);
                position = 0;
                count = value->size;
                is_array = value->type == NodeType::array;
                next_child = container + 1;
                first_member = is_array ? 0 : value->container.first_member;
                goto next_member;
        }
        if (room() >= length + 1) {
            *cursor = ',';
            cursor += separator != '\0';
            OutputSink::copy_bytes(cursor, verbatim, length);
            cursor += length;
        } else {
            give();
            sink_write(out, separator, verbatim, length);
            take();
        }
    }

next_member_or_done:
    if (value != tape) goto next_member;  // else the root was a scalar

done:
    give();
}

}  // namespace

void write_document(const Document::Impl& doc, OutputSink& out, std::pmr::vector<WriteFrame>& stack,
                    const PointerTrie* exclude, const PointerTrie* redact) {
    if (doc.tape.empty()) return;
    if (exclude || redact)
        Writer(doc, out, stack).write_root(PointerCursor{exclude, redact});
    else if (out.blocks() && sha_ni::available())
        write_plain<true>(doc, out, stack);
    else
        write_plain<false>(doc, out, stack);  // a block-mode sink then hashes at each flush
}

}  // namespace opledger::core::detail
