// RFC 6901 JSON Pointers: parsing into a trie and escaping tokens for output.
#include "core/pointer_impl.hpp"

#include "core/json_error.hpp"

namespace opledger::core {
namespace {

[[noreturn]] void throw_invalid_pointer(const std::string& pointer, const char* why) {
    throw JsonError(JsonErrorKind::invalid_pointer, std::string("invalid JSON pointer \"") + pointer + "\": " + why);
}

// Unescapes one reference token: "~0" -> "~", "~1" -> "/", any other "~" is invalid.
std::string unescape_token(const std::string& pointer, std::string_view raw) {
    std::string token;
    token.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] != '~') {
            token.push_back(raw[i]);
            continue;
        }
        if (i + 1 >= raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1'))
            throw_invalid_pointer(pointer, "'~' must be followed by '0' or '1'");
        token.push_back(raw[++i] == '0' ? '~' : '/');
    }
    return token;
}

void insert_pointer(std::deque<detail::PointerTrie>& nodes, const std::string& pointer) {
    if (!pointer.empty() && pointer[0] != '/') throw_invalid_pointer(pointer, "must be empty or start with '/'");
    detail::PointerTrie* node = &nodes.front();
    std::size_t start = 1;
    while (start <= pointer.size() && !pointer.empty()) {
        std::size_t slash = pointer.find('/', start);
        if (slash == std::string::npos) slash = pointer.size();
        const std::string_view raw = std::string_view(pointer).substr(start, slash - start);
        std::string token = unescape_token(pointer, raw);
        if (raw == "*") {
            if (!node->children.empty())
                throw_invalid_pointer(pointer, "a '*' token cannot share its level with named tokens of other pointers");
            if (node->any == nullptr) {
                nodes.emplace_back();
                node->any = &nodes.back();
            }
            node = const_cast<detail::PointerTrie*>(node->any);
            start = slash + 1;
            continue;
        }
        if (node->any != nullptr)
            throw_invalid_pointer(pointer, "a named token cannot share its level with another pointer's '*'");
        const auto found = node->children.find(token);
        if (found != node->children.end()) {
            node = const_cast<detail::PointerTrie*>(found->second);  // nodes are owned (mutable) by impl
        } else {
            nodes.emplace_back();
            detail::PointerTrie* created = &nodes.back();
            node->children.emplace(std::move(token), created);
            node = created;
        }
        start = slash + 1;
    }
    node->terminal = true;
}

}  // namespace

PointerSet::PointerSet() = default;
PointerSet::~PointerSet() = default;
PointerSet::PointerSet(PointerSet&&) noexcept = default;
PointerSet& PointerSet::operator=(PointerSet&&) noexcept = default;

PointerSet PointerSet::parse(const std::vector<std::string>& pointers) {
    PointerSet set;
    if (pointers.empty()) return set;
    set.impl_ = std::make_unique<Impl>();
    set.impl_->nodes.emplace_back();
    for (const std::string& pointer : pointers) insert_pointer(set.impl_->nodes, pointer);
    return set;
}

bool PointerSet::empty() const noexcept { return !impl_; }

PointerSet::Cursor PointerSet::root() const noexcept {
    Cursor c;
    if (impl_) c.node_ = &impl_->nodes.front();
    return c;
}

bool PointerSet::Cursor::terminal() const noexcept {
    return node_ != nullptr && static_cast<const detail::PointerTrie*>(node_)->terminal;
}

PointerSet::Cursor PointerSet::Cursor::member(std::string_view name) const noexcept {
    Cursor c;
    if (node_ != nullptr) c.node_ = static_cast<const detail::PointerTrie*>(node_)->child(name);
    return c;
}

PointerSet::Cursor PointerSet::Cursor::element(std::size_t index) const noexcept {
    Cursor c;
    if (node_ != nullptr) c.node_ = static_cast<const detail::PointerTrie*>(node_)->element(index);
    return c;
}

void append_pointer_token(std::string& pointer, std::string_view token) {
    detail::append_pointer_token(pointer, token);
}

namespace detail {

void append_pointer_token(std::string& pointer, std::string_view token) {
    pointer.push_back('/');
    for (char c : token) {
        if (c == '~')
            pointer.append("~0", 2);
        else if (c == '/')
            pointer.append("~1", 2);
        else
            pointer.push_back(c);
    }
}

}  // namespace detail
}  // namespace opledger::core
