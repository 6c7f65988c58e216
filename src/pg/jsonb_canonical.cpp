#include "pg/jsonb_canonical.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pg/boundary.hpp"
#include "pg/interrupts.hpp"
#include "pg/jsonb_reader.hpp"

extern "C" {
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
}

// The layout read here is the one jsonb.h documents (PostgreSQL keeps it stable
// for pg_upgrade): a container header (count and kind), then one JEntry per child
// (objects: all keys, then all values), then the children's data. A JEntry holds
// the child's type and either its length or, every JB_OFFSET_STRIDE entries, its end
// offset. Numerics and nested containers start at the next int-aligned offset.
namespace opledger::pg {
namespace {

// numeric_out's text goes to this context, reset every kNumbersPerReset numbers and
// when the walk ends, so a document of millions of numbers holds little at a time.
constexpr int kNumbersPerReset = 4096;
// Values written between two checks for a query cancel (a few ms of work).
constexpr std::uint32_t kValuesPerInterruptCheck = 1u << 16;

MemoryContext number_text_context() {
    static MemoryContext context = nullptr;
    if (context == nullptr) {
        context = pg_call([] {
            return AllocSetContextCreate(TopMemoryContext, "opledger jsonb numbers", ALLOCSET_SMALL_SIZES);
        });
    }
    return context;
}

// Plain C-style code only: runs inside pg_call.
const char* numeric_text(Numeric number, MemoryContext context) {
    MemoryContext caller = MemoryContextSwitchTo(context);
    const char* text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(number)));
    MemoryContextSwitchTo(caller);
    return text;
}

// End offset of child `index` in its container's data area, given where it starts.
inline std::uint32_t child_end(const JsonbContainer* container, std::uint32_t index, std::uint32_t start) {
    const JEntry entry = container->children[index];
    return JBE_HAS_OFF(entry) ? JBE_OFFLENFLD(entry) : start + JBE_OFFLENFLD(entry);
}

struct Frame {
    const JsonbContainer* container;
    const char* data;            // where the children's data starts
    std::uint32_t count;         // elements, or members
    std::uint32_t position;      // elements/members written so far
    std::uint32_t next_offset;   // arrays: data offset of the next element
    std::uint32_t scratch;       // objects: index of offsets[2 * count + 1], then order[count], in scratch_
    bool is_object;
};

class JsonbCanonicalWalker {
public:
    JsonbCanonicalWalker(core::CanonicalStream& out, const core::ParseLimits& limits,
                         std::pmr::memory_resource* memory)
        : out_(out), max_depth_(limits.max_depth), stack_(memory), scratch_(memory), names_(memory),
          numbers_(number_text_context()) {}
    ~JsonbCanonicalWalker() { MemoryContextReset(numbers_); }
    JsonbCanonicalWalker(const JsonbCanonicalWalker&) = delete;
    JsonbCanonicalWalker& operator=(const JsonbCanonicalWalker&) = delete;

    void walk(const Jsonb* value) {
        const JsonbContainer* root = &value->root;
        if (JsonContainerIsScalar(root)) {
            // A top-level scalar is stored as a one-element array: write the element alone.
            const char* data = reinterpret_cast<const char*>(&root->children[1]);
            return write_child(root, data, 0, 0, child_end(root, 0, 0));
        }
        open(root);
        while (!stack_.empty()) step();
    }

private:
    // Writes child `index` of container (bytes [start, end) of data); a nested
    // container is opened and pushed, to be written by the loop in walk().
    void write_child(const JsonbContainer* container, const char* data, std::uint32_t index, std::uint32_t start,
                     std::uint32_t end) {
        const JEntry entry = container->children[index];
        switch (entry & JENTRY_TYPEMASK) {
            case JENTRY_ISSTRING:
                return out_.string(std::string_view(data + start, end - start));
            case JENTRY_ISNUMERIC:
                return write_number(reinterpret_cast<Numeric>(const_cast<char*>(data + INTALIGN(start))));
            case JENTRY_ISBOOL_FALSE:
                return out_.boolean(false);
            case JENTRY_ISBOOL_TRUE:
                return out_.boolean(true);
            case JENTRY_ISNULL:
                return out_.null();
            case JENTRY_ISCONTAINER:
                return open(reinterpret_cast<const JsonbContainer*>(data + INTALIGN(start)));
            default:
                throw SqlError(ERRCODE_DATA_CORRUPTED, "unexpected jsonb entry type",
                               "A jsonb entry of type " + std::to_string(entry & JENTRY_TYPEMASK) + " was found.");
        }
    }

    void write_number(Numeric number) {
        if (++numbers_since_reset_ == kNumbersPerReset) {
            MemoryContextReset(numbers_);
            numbers_since_reset_ = 0;
        }
        // numeric_out is exact decimal text; the stream decides whether the canonical
        // (double) form keeps that value.
        MemoryContext context = numbers_;
        const char* text = pg_call([number, context] { return numeric_text(number, context); });
        out_.number(text);
    }

    void open(const JsonbContainer* container) {
        if (stack_.size() >= max_depth_)
            throw core::JsonError(core::JsonErrorKind::too_deep,
                                  "nesting depth exceeds the limit of " + std::to_string(max_depth_));
        const std::uint32_t count = JsonContainerSize(container);
        Frame& frame = stack_.emplace_back();
        frame.container = container;
        frame.count = count;
        frame.position = 0;
        frame.next_offset = 0;
        frame.is_object = JsonContainerIsObject(container);
        if (!frame.is_object) {
            frame.data = reinterpret_cast<const char*>(&container->children[count]);
            frame.scratch = 0;
            return out_.begin_array();
        }
        frame.data = reinterpret_cast<const char*>(&container->children[2 * count]);
        frame.scratch = static_cast<std::uint32_t>(scratch_.size());
        order_members(frame);
        out_.begin_object();
    }

    // Fills the frame's scratch: the start offset of every key and value (one pass
    // over the JEntries, since most hold lengths, not offsets) and the member order.
    void order_members(const Frame& frame) {
        const std::uint32_t children = 2 * frame.count;
        scratch_.resize(frame.scratch + children + 1 + frame.count);
        std::uint32_t* offsets = scratch_.data() + frame.scratch;
        offsets[0] = 0;
        for (std::uint32_t i = 0; i < children; ++i) offsets[i + 1] = child_end(frame.container, i, offsets[i]);
        names_.resize(frame.count);
        for (std::uint32_t i = 0; i < frame.count; ++i)
            names_[i] = std::string_view(frame.data + offsets[i], offsets[i + 1] - offsets[i]);
        core::sort_members_utf16(names_.data(), offsets + children + 1, frame.count);
    }

    // Writes members/elements of the innermost container until one of them opens a
    // container (pushed; the loop resumes there) or the container ends.
    void step() {
        const std::size_t depth = stack_.size();
        Frame* frame = &stack_.back();
        while (frame->position < frame->count) {
            if (--values_until_check_ == 0) {
                values_until_check_ = kValuesPerInterruptCheck;
                check_for_interrupts();  // a cancel unwinds this walk like any error
            }
            const std::uint32_t position = frame->position++;
            if (frame->is_object) {
                const std::uint32_t* offsets = scratch_.data() + frame->scratch;
                const std::uint32_t member = offsets[2 * frame->count + 1 + position];
                out_.name(std::string_view(frame->data + offsets[member], offsets[member + 1] - offsets[member]));
                const std::uint32_t value = frame->count + member;
                write_child(frame->container, frame->data, value, offsets[value], offsets[value + 1]);
            } else {
                const std::uint32_t start = frame->next_offset;
                frame->next_offset = child_end(frame->container, position, start);
                write_child(frame->container, frame->data, position, start, frame->next_offset);
            }
            if (stack_.size() != depth) return;  // pushed a container: `frame` may dangle now
        }
        if (frame->is_object) {
            out_.end_object();
            scratch_.resize(frame->scratch);
        } else {
            out_.end_array();
        }
        stack_.pop_back();
    }

    core::CanonicalStream& out_;
    std::size_t max_depth_;
    std::pmr::vector<Frame> stack_;
    std::pmr::vector<std::uint32_t> scratch_;  // per open object: offsets and member order, used as a stack
    std::pmr::vector<std::string_view> names_;  // member names of the object being sorted
    MemoryContext numbers_;
    int numbers_since_reset_ = 0;
    std::uint32_t values_until_check_ = kValuesPerInterruptCheck;
};

}  // namespace

bool jsonb_strings_are_utf8() { return GetDatabaseEncoding() == PG_UTF8; }

void write_jsonb_canonical(const Jsonb* value, core::CanonicalStream& out, const core::ParseLimits& limits,
                           std::pmr::memory_resource* memory) {
    try {
        JsonbCanonicalWalker(out, limits, memory).walk(value);
    } catch (const core::JsonError& error) {
        if (error.kind() != core::JsonErrorKind::inexact_number) throw;
        // The fast walk does not track where it is. Errors name the place of the
        // number, never the number (it may be a secret): read the value again with
        // the reader that does, which raises the same error with its JSON Pointer.
        (void)document_from_jsonb(const_cast<Jsonb*>(value), limits);
        throw;
    }
}

}  // namespace opledger::pg
