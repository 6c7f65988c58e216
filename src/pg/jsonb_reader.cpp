#include "pg/jsonb_reader.hpp"

#include "pg/boundary.hpp"

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

// A jsonb string as UTF-8: jsonb holds the database encoding.
std::string_view jsonb_string_as_utf8(const JsonbValue& value, std::string& storage) {
    std::string_view raw(value.val.string.val, static_cast<std::size_t>(value.val.string.len));
    if (database_is_utf8()) return raw;
    char* converted = pg_call([&] {
        return pg_server_to_any(value.val.string.val, value.val.string.len, PG_UTF8);
    });
    storage.assign(converted);
    if (converted != value.val.string.val) pfree(converted);
    return storage;
}

void add_scalar(core::DocumentBuilder& builder, const JsonbValue& value, std::string& storage) {
    switch (value.type) {
        case jbvNull:
            builder.null();
            return;
        case jbvBool:
            builder.boolean(value.val.boolean);
            return;
        case jbvString:
            builder.string(jsonb_string_as_utf8(value, storage));
            return;
        case jbvNumeric: {
            // numeric_out is exact decimal text; the core decides whether the
            // canonical (double) form keeps that value.
            char* digits = pg_call([&] {
                return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(value.val.numeric)));
            });
            storage.assign(digits);
            pfree(digits);
            builder.number(storage);
            return;
        }
        default:
            throw SqlError(ERRCODE_INTERNAL_ERROR, "unexpected jsonb value type",
                           "A jsonb scalar of type " + std::to_string(static_cast<int>(value.type)) + " was found.");
    }
}

}  // namespace

core::ParseLimits json_parse_limits() {
    core::ParseLimits limits;
    limits.max_depth = static_cast<std::size_t>(max_stack_depth) * kDepthPerStackKilobyte;
    return limits;
}

core::Document document_from_jsonb(Jsonb* value, const core::ParseLimits& limits) {
    core::DocumentBuilder builder(limits);
    std::string storage;
    // A top-level scalar is stored as a one-element "raw scalar" array: skip that wrapper.
    const bool raw_scalar = JB_ROOT_IS_SCALAR(value);
    JsonbIterator* iterator = pg_call([&] { return JsonbIteratorInit(&value->root); });
    JsonbValue token_value;
    for (;;) {
        JsonbIteratorToken token = pg_call([&] { return JsonbIteratorNext(&iterator, &token_value, false); });
        switch (token) {
            case WJB_DONE:
                return builder.finish();
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
                builder.key(jsonb_string_as_utf8(token_value, storage));
                break;
            case WJB_VALUE:
            case WJB_ELEM:
                add_scalar(builder, token_value, storage);
                break;
        }
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
