#include "pg/jsonb_reader.hpp"

#include "pg/boundary.hpp"
#include "pg/interrupts.hpp"

#include <string>
#include <vector>

#include "core/json_error.hpp"

extern "C" {
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
}

namespace opledger::pg {
namespace {

// Levels of JSON nesting allowed per kilobyte of max_stack_depth.
constexpr std::size_t kDepthPerStackKilobyte = 8;

// SQL_ASCII databases store bytes unchecked; their JSON is taken as UTF-8 as is, so
// that invalid UTF-8 is reported by the core (22P02) rather than by a conversion.
bool database_is_utf8() {
    const int encoding = GetDatabaseEncoding();
    return encoding == PG_UTF8 || encoding == PG_SQL_ASCII;
}

// jsonb is read in batches of tokens, each batch under one pg_call: a guard per
// token (a sigsetjmp each) cost more than the rest of the walk. Strings and numbers
// of a batch are converted to UTF-8 / decimal text inside the guarded part, into a
// memory context that is reset for every batch.
constexpr int kTokensPerBatch = 1024;

struct JsonbToken {
    JsonbIteratorToken kind;
    enum jbvType type;  // for WJB_KEY / WJB_VALUE / WJB_ELEM
    bool boolean;
    const char* text;  // UTF-8 string, or the decimal text of a number
    int length;
};

struct JsonbBatch {
    JsonbIterator* iterator = nullptr;
    MemoryContext scratch = nullptr;  // numbers and converted strings of the current batch
    bool convert_strings = false;     // database encoding is not UTF-8
    bool done = false;
    int count = 0;
    JsonbToken tokens[kTokensPerBatch];
};

// Plain C-style code only: runs inside pg_call (no C++ objects, no exceptions).
void fill_token(JsonbBatch& batch, JsonbToken& token, const JsonbValue& value) {
    token.type = value.type;
    switch (value.type) {
        case jbvString:
            token.text = value.val.string.val;
            token.length = value.val.string.len;
            if (batch.convert_strings) {
                token.text = pg_server_to_any(value.val.string.val, value.val.string.len, PG_UTF8);
                if (token.text != value.val.string.val) token.length = static_cast<int>(strlen(token.text));
            }
            break;
        case jbvNumeric:
            // numeric_out is exact decimal text; the core decides whether the
            // canonical (double) form keeps that value.
            token.text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(value.val.numeric)));
            token.length = static_cast<int>(strlen(token.text));
            break;
        case jbvBool:
            token.boolean = value.val.boolean;
            break;
        default:
            break;
    }
}

// The iterator's own frames stay in the caller's context (it frees them as it
// pops); only the batch's converted text goes to the scratch context.
void read_batch(JsonbBatch& batch) {
    MemoryContextReset(batch.scratch);
    JsonbValue value;
    batch.count = 0;
    while (batch.count < kTokensPerBatch) {
        JsonbIteratorToken kind = JsonbIteratorNext(&batch.iterator, &value, false);
        if (kind == WJB_DONE) {
            batch.done = true;
            break;
        }
        JsonbToken& token = batch.tokens[batch.count++];
        token.kind = kind;
        if (kind == WJB_KEY || kind == WJB_VALUE || kind == WJB_ELEM) {
            MemoryContext caller = MemoryContextSwitchTo(batch.scratch);
            fill_token(batch, token, value);
            MemoryContextSwitchTo(caller);
        }
    }
}

// Strings read in place from the jsonb value stay valid for the whole SQL call, so
// the builder may keep views; converted strings live only as long as their batch.
core::DocumentBuilder::Storage string_storage(const JsonbBatch& batch) {
    return batch.convert_strings ? core::DocumentBuilder::Storage::copy : core::DocumentBuilder::Storage::borrow;
}

void add_scalar(core::DocumentBuilder& builder, const JsonbToken& token, core::DocumentBuilder::Storage storage) {
    switch (token.type) {
        case jbvNull:
            builder.null();
            return;
        case jbvBool:
            builder.boolean(token.boolean);
            return;
        case jbvString:
            builder.string(std::string_view(token.text, static_cast<std::size_t>(token.length)), storage);
            return;
        case jbvNumeric:
            builder.number(std::string_view(token.text, static_cast<std::size_t>(token.length)));
            return;
        default:
            throw SqlError(ERRCODE_INTERNAL_ERROR, "unexpected jsonb value type",
                           "A jsonb scalar of type " + std::to_string(static_cast<int>(token.type)) + " was found.");
    }
}

void add_token(core::DocumentBuilder& builder, const JsonbToken& token, bool raw_scalar,
               core::DocumentBuilder::Storage storage) {
    switch (token.kind) {
        case WJB_BEGIN_ARRAY:
            if (!raw_scalar) builder.begin_array();
            break;
        case WJB_END_ARRAY:
            if (!raw_scalar) builder.end_array();
            break;
        case WJB_BEGIN_OBJECT:
            builder.begin_object();
            break;
        case WJB_END_OBJECT:
            builder.end_object();
            break;
        case WJB_KEY:
            builder.key(std::string_view(token.text, static_cast<std::size_t>(token.length)), storage);
            break;
        case WJB_VALUE:
        case WJB_ELEM:
            add_scalar(builder, token, storage);
            break;
        case WJB_DONE:
            break;
    }
}

// Where the reader is in the document, as a JSON Pointer: errors about a value name
// its place instead of showing it.
class JsonbPath {
public:
    void enter(const JsonbToken& token, bool raw_scalar) {
        switch (token.kind) {
            case WJB_BEGIN_ARRAY:
                if (raw_scalar) return;
                start_value();
                steps_.push_back(Step{true, 0, {}});
                return;
            case WJB_BEGIN_OBJECT:
                start_value();
                steps_.push_back(Step{false, 0, {}});
                return;
            case WJB_KEY:
                if (!steps_.empty()) steps_.back().key.assign(token.text, static_cast<std::size_t>(token.length));
                return;
            case WJB_ELEM:
                start_value();
                return;
            default:
                return;
        }
    }
    void leave(const JsonbToken& token, bool raw_scalar) {
        if ((token.kind == WJB_END_ARRAY && !raw_scalar) || token.kind == WJB_END_OBJECT) {
            if (!steps_.empty()) steps_.pop_back();
        }
    }
    std::string pointer() const {
        std::string out;
        for (const Step& step : steps_) {
            if (step.array)
                out += "/" + std::to_string(step.next == 0 ? 0 : step.next - 1);
            else
                core::append_pointer_token(out, step.key);
        }
        return out.empty() ? std::string("\"\" (the whole document)") : out;
    }

private:
    struct Step {
        bool array;
        std::size_t next;  // arrays: elements started so far
        std::string key;   // objects: the current member
    };
    void start_value() {
        if (!steps_.empty() && steps_.back().array) ++steps_.back().next;
    }
    std::vector<Step> steps_;
};

// Reads one jsonb value batch by batch. The batch and its scratch context are
// created once per backend and reused: setting them up per call cost more than
// reading a small document. Not reentrant, and it need not be: nothing called
// while reading can come back here.
class JsonbBatchReader {
public:
    explicit JsonbBatchReader(Jsonb* value) : batch_(shared_batch()) {
        batch_.convert_strings = !database_is_utf8();
        batch_.done = false;
        batch_.count = 0;
        batch_.iterator = pg_call([&] { return JsonbIteratorInit(&value->root); });
    }
    ~JsonbBatchReader() {
        // Leaves nothing of this value behind in the backend-lifetime context.
        MemoryContextReset(batch_.scratch);
        batch_.iterator = nullptr;
    }
    JsonbBatchReader(const JsonbBatchReader&) = delete;
    JsonbBatchReader& operator=(const JsonbBatchReader&) = delete;

    // The next batch of tokens; an empty one at the end.
    const JsonbBatch& next() {
        if (batch_.done) {
            batch_.count = 0;
        } else {
            JsonbBatch* batch = &batch_;
            pg_call([batch] { read_batch(*batch); });
        }
        return batch_;
    }

private:
    static JsonbBatch& shared_batch() {
        static JsonbBatch batch;
        if (batch.scratch == nullptr) {
            batch.scratch = pg_call([] {
                return AllocSetContextCreate(TopMemoryContext, "opledger jsonb scratch", ALLOCSET_DEFAULT_SIZES);
            });
        }
        return batch;
    }

    JsonbBatch& batch_;
};

}  // namespace

core::ParseLimits json_parse_limits() {
    core::ParseLimits limits;
    limits.max_depth = static_cast<std::size_t>(max_stack_depth) * kDepthPerStackKilobyte;
    return limits;
}

core::Document document_from_jsonb(Jsonb* value, const core::ParseLimits& limits,
                                   std::pmr::memory_resource* memory) {
    // In a UTF-8 database PostgreSQL has validated every jsonb string; SQL_ASCII and
    // converted strings are checked by the core.
    const bool validated = GetDatabaseEncoding() == PG_UTF8;
    core::DocumentBuilder builder(limits,
                                  validated ? core::DocumentBuilder::Utf8::already_valid
                                            : core::DocumentBuilder::Utf8::verify,
                                  memory);
    // A top-level scalar is stored as a one-element "raw scalar" array: skip that wrapper.
    const bool raw_scalar = JB_ROOT_IS_SCALAR(value);
    // jsonb spends roughly 8 bytes or more on each value.
    builder.reserve(VARSIZE(value) / 8 + 8);
    JsonbBatchReader reader(value);
    JsonbPath path;
    for (;;) {
        const JsonbBatch& batch = reader.next();
        const core::DocumentBuilder::Storage storage = string_storage(batch);
        for (int i = 0; i < batch.count; ++i) {
            const JsonbToken& token = batch.tokens[i];
            path.enter(token, raw_scalar);
            try {
                add_token(builder, token, raw_scalar, storage);
            } catch (const core::JsonError& error) {
                if (error.kind() != core::JsonErrorKind::inexact_number) throw;
                // Where, not what: the value may be a secret.
                throw core::JsonError(error.kind(),
                                      "number at " + path.pointer() + " cannot be represented exactly as a double",
                                      std::nullopt, error.hint());
            }
            path.leave(token, raw_scalar);
        }
        if (batch.done) return builder.finish();
        check_for_interrupts();  // between batches: a large value answers a query cancel
    }
}

std::string_view text_as_utf8(text* value, std::string& storage) {
    const char* bytes = VARDATA_ANY(value);
    const int length = static_cast<int>(VARSIZE_ANY_EXHDR(value));
    if (database_is_utf8()) return std::string_view(bytes, static_cast<std::size_t>(length));
    char* converted = pg_call([&] { return pg_server_to_any(bytes, length, PG_UTF8); });
    if (converted == bytes) return std::string_view(bytes, static_cast<std::size_t>(length));
    storage.assign(converted);
    pfree(converted);
    return storage;
}

text* utf8_to_text(std::string_view utf8) {
    // The canonical form can be longer than its input (1e20 is written out in full),
    // so a document near the 1 GB limit may not fit in a text value.
    if (utf8.size() > MaxAllocSize - VARHDRSZ) {
        throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "canonical JSON is too long for a text value",
                       "It is " + std::to_string(utf8.size()) + " bytes; a text value holds at most 1 GB.",
                       "Use opledger.jcs_hash, which never builds the whole text.");
    }
    const int length = static_cast<int>(utf8.size());
    if (database_is_utf8()) {
        // The core only emits valid UTF-8: no need to verify it again.
        return pg_call([&] { return cstring_to_text_with_len(utf8.data(), length); });
    }
    return pg_call([&] {
        char* server = pg_any_to_server(utf8.data(), length, PG_UTF8);
        return cstring_to_text(server);
    });
}

bytea* bytes_to_bytea(const unsigned char* bytes, std::size_t length) {
    return pg_call([&] {
        bytea* result = static_cast<bytea*>(palloc(VARHDRSZ + length));
        SET_VARSIZE(result, VARHDRSZ + length);
        memcpy(VARDATA(result), bytes, length);
        return result;
    });
}

}  // namespace opledger::pg
