// Redaction of jsonb payloads (see ledger_redact.hpp).
#include "pg/ledger/ledger_redact.hpp"

#include <cstring>

#include "pg/boundary.hpp"

extern "C" {
#include "utils/jsonb.h"
}

namespace opledger::pg::ledger {
namespace {

constexpr const char* kRedacted = "[REDACTED]";

// One open container of the walk: where it is in the pointer set, and where its
// current member or next element is. Trivially copyable, so the walk below (plain C
// style inside pg_call: PostgreSQL may longjmp out of it) owns nothing to destroy.
struct Frame {
    core::PointerSet::Cursor at;
    core::PointerSet::Cursor member;  // objects: the member whose value comes next
    bool array;
    std::size_t next;  // arrays: index of the next element
};

void push_redacted(JsonbParseState** state, JsonbIteratorToken as) {
    JsonbValue v;
    v.type = jbvString;
    v.val.string.val = const_cast<char*>(kRedacted);
    v.val.string.len = static_cast<int>(strlen(kRedacted));
    pushJsonbValue(state, as, &v);
}

// Consumes the rest of a container whose WJB_BEGIN_* was just read.
void skip_container(JsonbIterator** it) {
    JsonbValue v;
    int depth = 1;
    while (depth > 0) {
        const JsonbIteratorToken t = JsonbIteratorNext(it, &v, false);
        if (t == WJB_BEGIN_ARRAY || t == WJB_BEGIN_OBJECT) ++depth;
        if (t == WJB_END_ARRAY || t == WJB_END_OBJECT) --depth;
        if (t == WJB_DONE) break;
    }
}

Jsonb* redact_walk(Jsonb* in, core::PointerSet::Cursor root) {
    JsonbIterator* it = JsonbIteratorInit(&in->root);
    JsonbParseState* state = nullptr;
    JsonbValue* out = nullptr;
    int capacity = 16, depth = 0;
    Frame* stack = static_cast<Frame*>(palloc(sizeof(Frame) * capacity));
    JsonbValue v;
    JsonbIteratorToken t;
    while ((t = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
        switch (t) {
            case WJB_BEGIN_ARRAY:
            case WJB_BEGIN_OBJECT: {
                core::PointerSet::Cursor here = root;
                if (depth > 0) {
                    Frame& parent = stack[depth - 1];
                    here = parent.array ? parent.at.element(parent.next++) : parent.member;
                    if (here.terminal()) {
                        push_redacted(&state, parent.array ? WJB_ELEM : WJB_VALUE);
                        skip_container(&it);
                        break;
                    }
                }
                if (depth == capacity) {
                    capacity *= 2;
                    stack = static_cast<Frame*>(repalloc(stack, sizeof(Frame) * capacity));
                }
                stack[depth++] = Frame{here, core::PointerSet::Cursor{}, t == WJB_BEGIN_ARRAY, 0};
                out = pushJsonbValue(&state, t, t == WJB_BEGIN_ARRAY ? &v : nullptr);
                break;
            }
            case WJB_KEY: {
                Frame& f = stack[depth - 1];
                f.member = f.at.member(std::string_view(v.val.string.val, static_cast<std::size_t>(v.val.string.len)));
                out = pushJsonbValue(&state, t, &v);
                break;
            }
            case WJB_VALUE: {
                if (stack[depth - 1].member.terminal())
                    push_redacted(&state, WJB_VALUE);
                else
                    out = pushJsonbValue(&state, t, &v);
                break;
            }
            case WJB_ELEM: {
                Frame& f = stack[depth - 1];
                // A raw scalar (a top-level scalar jsonb) is one element of a pseudo-array.
                const bool redacted = !f.at.valid() ? false : f.at.element(f.next++).terminal();
                if (redacted)
                    push_redacted(&state, WJB_ELEM);
                else
                    out = pushJsonbValue(&state, t, &v);
                break;
            }
            case WJB_END_ARRAY:
            case WJB_END_OBJECT:
                --depth;
                out = pushJsonbValue(&state, t, nullptr);
                break;
            default:
                break;
        }
    }
    pfree(stack);
    return JsonbValueToJsonb(out);
}

}  // namespace

Value redact_payload(const Value& payload, const core::PointerSet& redact) {
    if (payload.null || redact.empty()) return payload;
    const core::PointerSet::Cursor root = redact.root();
    if (root.terminal()) return Value::of(json_text_to_jsonb("\"[REDACTED]\""));  // the pointer "": all of it
    Jsonb* in = pg_call([&] { return DatumGetJsonbP(payload.datum); });
    if (JB_ROOT_IS_SCALAR(in)) return payload;  // no member or element to name
    return Value::of(pg_call([&] { return JsonbPGetDatum(redact_walk(in, root)); }));
}

}  // namespace opledger::pg::ledger
