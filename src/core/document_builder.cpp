// DocumentBuilder: builds the same tape as the text parser from value events
// (the PostgreSQL layer feeds it while walking jsonb). Event misuse is a
// programming error (std::logic_error); data errors are JsonError.
#include <cstring>
#include <stdexcept>

#include "core/document_impl.hpp"
#include "core/number_format.hpp"
#include "core/utf8.hpp"

namespace opledger::core {

struct DocumentBuilder::Impl {
    struct Open {
        std::size_t node;
        std::size_t count;
        bool is_object;
        bool key_pending;  // objects: a key was given, its value is next
    };

    Impl(Document document, Document::Impl& doc, const ParseLimits& limits, bool verify_utf8)
        : document(std::move(document)), doc(doc), tape(doc), max_depth(limits.max_depth), verify_utf8(verify_utf8) {}

    Document document;
    Document::Impl& doc;
    detail::TapeWriter tape;
    std::size_t max_depth;
    bool verify_utf8;
    std::vector<Open> open;
    bool complete = false;

    void before_value() {
        if (doc.tape.size() >= detail::kMaxInputBytes)
            throw JsonError(JsonErrorKind::invalid_text, "input too large (4 GiB or more)");
        if (complete) throw std::logic_error("DocumentBuilder: a value after the complete document");
        if (open.empty()) return;
        Open& top = open.back();
        if (top.is_object) {
            if (!top.key_pending) throw std::logic_error("DocumentBuilder: object value without a key");
            top.key_pending = false;
        } else {
            ++top.count;
        }
    }

    void after_value() {
        if (open.empty()) complete = true;
    }

    const char* store(std::string_view bytes, Storage storage) {
        if (bytes.size() > detail::kMaxInputBytes)
            throw JsonError(JsonErrorKind::invalid_text, "input too large (4 GiB or more)");
        doc.size_hint += bytes.size() + 3;
        if (storage == Storage::borrow) return bytes.data();
        char* stored = doc.arena.allocate(bytes.size());
        if (!bytes.empty()) std::memcpy(stored, bytes.data(), bytes.size());
        return stored;
    }

    void check_utf8(std::string_view bytes, const char* what) const {
        if (verify_utf8 && detail::find_invalid_utf8(bytes))
            throw JsonError(JsonErrorKind::invalid_text, std::string("invalid UTF-8 byte sequence in ") + what);
    }

    void open_container(detail::NodeType type) {
        before_value();
        if (open.size() >= max_depth)
            throw JsonError(JsonErrorKind::too_deep, "nesting depth exceeds the limit of " + std::to_string(max_depth));
        open.push_back(Open{tape.open(type), 0, type == detail::NodeType::object, false});
        doc.size_hint += 2;
    }

    Open close_container(bool is_object) {
        if (open.empty() || open.back().is_object != is_object || open.back().key_pending)
            throw std::logic_error(is_object ? "DocumentBuilder: end_object does not match"
                                             : "DocumentBuilder: end_array does not match");
        const Open top = open.back();
        open.pop_back();
        return top;
    }
};

DocumentBuilder::DocumentBuilder(const ParseLimits& limits, Utf8 utf8, std::pmr::memory_resource* memory) {
    Document document(memory);
    Document::Impl& doc = *document.impl_;  // stays put when the Document is moved
    impl_ = std::make_unique<Impl>(std::move(document), doc, limits, utf8 == Utf8::verify);
}

DocumentBuilder::~DocumentBuilder() = default;

void DocumentBuilder::begin_object() { impl_->open_container(detail::NodeType::object); }

void DocumentBuilder::reserve(std::size_t values) {
    impl_->doc.tape.reserve(impl_->doc.tape.size() + values);
    impl_->doc.members.reserve(impl_->doc.members.size() + values / 2);
}

void DocumentBuilder::key(std::string_view utf8_name, Storage storage) {
    if (impl_->open.empty() || !impl_->open.back().is_object || impl_->open.back().key_pending)
        throw std::logic_error("DocumentBuilder: key outside an object or twice in a row");
    impl_->check_utf8(utf8_name, "member name");
    Impl::Open& top = impl_->open.back();
    ++top.count;
    top.key_pending = true;
    impl_->tape.key(impl_->store(utf8_name, storage), utf8_name.size(), detail::needs_escaping(utf8_name), 0);
}

void DocumentBuilder::end_object() {
    const Impl::Open top = impl_->close_container(true);
    impl_->tape.close_object(top.node, top.count, false);
    impl_->after_value();
}

void DocumentBuilder::begin_array() { impl_->open_container(detail::NodeType::array); }

void DocumentBuilder::end_array() {
    const Impl::Open top = impl_->close_container(false);
    impl_->tape.close_array(top.node, top.count);
    impl_->after_value();
}

void DocumentBuilder::string(std::string_view utf8, Storage storage) {
    impl_->check_utf8(utf8, "string");
    impl_->before_value();
    impl_->tape.scalar(detail::NodeType::string, impl_->store(utf8, storage), utf8.size(), detail::needs_escaping(utf8));
    impl_->after_value();
}

void DocumentBuilder::number(std::string_view decimal_text) {
    char* out = impl_->doc.arena.allocate(detail::kMaxCanonicalNumberLength);
    const std::size_t written = detail::format_decimal_text(decimal_text, out);
    impl_->doc.arena.give_back(detail::kMaxCanonicalNumberLength - written);
    impl_->before_value();
    impl_->doc.size_hint += written + 1;
    impl_->tape.scalar(detail::NodeType::number, out, written);
    impl_->after_value();
}

void DocumentBuilder::boolean(bool value) {
    impl_->before_value();
    impl_->tape.scalar(value ? detail::NodeType::true_value : detail::NodeType::false_value);
    impl_->doc.size_hint += 6;
    impl_->after_value();
}

void DocumentBuilder::null() {
    impl_->before_value();
    impl_->tape.scalar(detail::NodeType::null_value);
    impl_->doc.size_hint += 5;
    impl_->after_value();
}

Document DocumentBuilder::finish() {
    if (!impl_->complete) throw std::logic_error("DocumentBuilder: finish() before one complete value");
    impl_->complete = false;
    impl_->doc.pending_keys.shrink_to_fit();  // empty once every object is closed
    return std::move(impl_->document);
}

}  // namespace opledger::core
