#include "core/canonical_stream.hpp"

#include <algorithm>

#include "core/number_format.hpp"
#include "core/sha256_stream.hpp"
#include "core/string_escape.hpp"
#include "core/string_scan.hpp"
#include "core/utf16_order.hpp"

namespace opledger::core {

// The stream's buffer, seen as an OutputSink for the shared escaping code. The
// sink's own buffer pointers are synced back when it goes out of scope.
class CanonicalStream::SinkView {
public:
    explicit SinkView(CanonicalStream& stream)
        : stream_(stream),
          sink_(stream.buffer_, kBufferBytes, &CanonicalStream::consume, &stream, stream.cursor_) {}
    ~SinkView() { stream_.cursor_ = sink_.cursor(); }
    detail::OutputSink& sink() { return sink_; }

private:
    CanonicalStream& stream_;
    detail::OutputSink sink_;
};

CanonicalStream::CanonicalStream(std::string& out) : text_(&out) {}

CanonicalStream::CanonicalStream() : digest_(std::make_unique<detail::Sha256Stream>()) {}

CanonicalStream::~CanonicalStream() = default;

void CanonicalStream::consume(void* self, const char* data, std::size_t size) {
    auto& stream = *static_cast<CanonicalStream*>(self);
    if (stream.digest_) return stream.digest_->update(data, size);
    stream.text_->append(data, size);
}

void CanonicalStream::flush() {
    if (cursor_ != buffer_) consume(this, buffer_, static_cast<std::size_t>(cursor_ - buffer_));
    cursor_ = buffer_;
}

void CanonicalStream::quoted(std::string_view utf8, char prefix, char suffix) {
    const std::size_t special = detail::find_string_special(utf8.data(), 0, utf8.size());
    if (special == utf8.size() && static_cast<std::size_t>(end_ - cursor_) >= utf8.size() + 4) {
        // The common case: one check, one copy.
        if (prefix) *cursor_++ = prefix;
        *cursor_++ = '"';
        detail::OutputSink::copy_bytes(cursor_, utf8.data(), utf8.size());
        cursor_ += utf8.size();
        *cursor_++ = '"';
        if (suffix) *cursor_++ = suffix;
        return;
    }
    SinkView view(*this);
    detail::OutputSink& sink = view.sink();
    sink.ensure(2);
    if (prefix) sink.put(prefix);
    sink.put('"');
    detail::put_string_body(sink, utf8, special != utf8.size());
    sink.ensure(2);
    sink.put('"');
    if (suffix) sink.put(suffix);
}

void CanonicalStream::number(std::string_view decimal_text) {
    ensure(detail::kMaxCanonicalNumberLength + 1);
    char* at = cursor_ + (need_comma_ ? 1 : 0);
    const std::size_t written = detail::format_decimal_text(decimal_text, at);  // may throw: nothing counted yet
    if (need_comma_) *cursor_ = ',';
    cursor_ = at + written;
    need_comma_ = true;
}

void CanonicalStream::finish() { flush(); }

Sha256Digest CanonicalStream::finish_sha256() {
    flush();
    return digest_->finish();
}

void sort_members_utf16(const std::string_view* names, std::uint32_t* order, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) order[i] = static_cast<std::uint32_t>(i);
    const auto before = [names](std::uint32_t a, std::uint32_t b) {
        return detail::utf16_order(names[a], names[b]) < 0;
    };
    // Objects are small; insertion sort beats std::sort's set-up there, and an
    // input that is already in order (common) costs one comparison per member.
    if (count <= 16) {
        for (std::size_t i = 1; i < count; ++i) {
            const std::uint32_t moving = order[i];
            std::size_t j = i;
            for (; j > 0 && before(moving, order[j - 1]); --j) order[j] = order[j - 1];
            order[j] = moving;
        }
        return;
    }
    std::sort(order, order + count, before);
}

}  // namespace opledger::core
