// Document::diff: a simultaneous walk of two documents in canonical member order,
// iterative like the writer so depth never touches the machine stack.
#include "core/document_impl.hpp"
#include "core/pointer_impl.hpp"

namespace opledger::core::detail {
namespace {

class Differ {
public:
    Differ(const Document::Impl& a, const Document::Impl& b, std::size_t max_pointers)
        : a_(a), b_(b), max_(max_pointers) {}

    std::vector<std::string> run(const PointerTrie* ignore) {
        if (max_ == 0 || (ignore && ignore->terminal)) return {};
        if (a_.tape.empty() || b_.tape.empty()) {
            if (a_.tape.empty() != b_.tape.empty()) report();
            return found_;
        }
        compare(0, 0, ignore);
        while (!stack_.empty() && found_.size() < max_) step();
        return found_;
    }

private:
    struct Frame {
        std::size_t a_node, b_node;
        std::size_t path_length;  // path_ length at this container
        const PointerTrie* ignore;
        std::size_t i = 0, j = 0;  // objects: sorted member positions; arrays: element position
        std::size_t a_next = 0, b_next = 0;  // arrays: tape index of the next elements
    };

    void report() {
        if (found_.size() < max_) found_.push_back(path_);
    }

    static bool same_scalar(const Node& x, const Node& y) {
        if (x.type != y.type) return false;
        if (x.type == NodeType::number || x.type == NodeType::string) return x.text() == y.text();
        return true;  // null, true, false
    }

    // Compares the values at a_index/b_index (path_ names them); containers of the
    // same kind and size are pushed for step().
    void compare(std::size_t a_index, std::size_t b_index, const PointerTrie* ignore) {
        const Node& x = a_.tape[a_index];
        const Node& y = b_.tape[b_index];
        if (!is_container(x.type) || x.type != y.type) {
            if (!same_scalar(x, y)) report();
            return;
        }
        if (x.type == NodeType::array && x.size != y.size) return report();
        Frame frame{a_index, b_index, path_.size(), ignore};
        frame.a_next = a_index + 1;
        frame.b_next = b_index + 1;
        stack_.push_back(frame);
    }

    const PointerTrie* child_ignore(const PointerTrie* ignore, std::string_view token) {
        return ignore ? ignore->child(token) : nullptr;
    }

    void step() {
        Frame& frame = stack_.back();
        path_.resize(frame.path_length);
        const Node& x = a_.tape[frame.a_node];
        if (x.type == NodeType::array) return step_array(frame, x.size);
        step_object(frame, x.size, b_.tape[frame.b_node].size);
    }

    void step_array(Frame& frame, std::size_t size) {
        if (frame.i == size) return stack_.pop_back();
        const std::size_t position = frame.i++;
        const std::size_t a_index = frame.a_next, b_index = frame.b_next;
        frame.a_next = a_.next_sibling(a_index);
        frame.b_next = b_.next_sibling(b_index);
        const PointerTrie* ignore = frame.ignore ? frame.ignore->element(position) : nullptr;
        if (ignore && ignore->terminal) return;
        append_pointer_token(path_, std::to_string(position));
        compare(a_index, b_index, ignore);  // may push: `frame` is not used after this
    }

    void step_object(Frame& frame, std::size_t a_size, std::size_t b_size) {
        if (frame.i == a_size && frame.j == b_size) return stack_.pop_back();
        const Node& a_object = a_.tape[frame.a_node];
        const Node& b_object = b_.tape[frame.b_node];
        const std::size_t a_key = frame.i < a_size ? a_.members[a_object.container.first_member + frame.i] : 0;
        const std::size_t b_key = frame.j < b_size ? b_.members[b_object.container.first_member + frame.j] : 0;
        int order;
        if (frame.i == a_size)
            order = 1;
        else if (frame.j == b_size)
            order = -1;
        else
            order = compare_utf16(a_.tape[a_key].text(), b_.tape[b_key].text());
        const std::string_view name = order <= 0 ? a_.tape[a_key].text() : b_.tape[b_key].text();
        const PointerTrie* ignore = child_ignore(frame.ignore, name);
        if (order < 0) ++frame.i;
        if (order > 0) ++frame.j;
        if (order == 0) ++frame.i, ++frame.j;
        if (ignore && ignore->terminal) return;
        append_pointer_token(path_, name);
        if (order != 0) return report();  // a member present in one document only
        compare(a_key + 1, b_key + 1, ignore);
    }

    const Document::Impl& a_;
    const Document::Impl& b_;
    std::size_t max_;
    std::string path_;
    std::vector<Frame> stack_;
    std::vector<std::string> found_;
};

}  // namespace

std::vector<std::string> diff_documents(const Document::Impl& a, const Document::Impl& b,
                                        const PointerTrie* ignore, std::size_t max_pointers) {
    return Differ(a, b, max_pointers).run(ignore);
}

}  // namespace opledger::core::detail
