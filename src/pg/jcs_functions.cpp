// SQL entry points of canonical JSON: opledger.jcs, opledger.jcs_hash, opledger.derive_operation_id.
#include <string>
#include <string_view>

#include "core/jcs.hpp"
#include "pg/boundary.hpp"
#include "pg/jsonb_canonical.hpp"
#include "pg/jsonb_reader.hpp"
#include "pg/memory_resource.hpp"

extern "C" {
#include "utils/uuid.h"
}

namespace opledger::pg {
namespace {

std::string canonical_of_text_arg(FunctionCallInfo fcinfo) {
    text* input = pg_call([&] { return PG_GETARG_TEXT_PP(0); });
    std::string storage;
    const std::string_view utf8 = text_as_utf8(input, storage);
    WorkspaceLoan workspace;
    std::string canonical;
    core::canonicalize_text(utf8, json_parse_limits(), workspace.get(), canonical);
    return canonical;
}

core::Sha256Digest canonical_hash_of_text_arg(FunctionCallInfo fcinfo) {
    text* input = pg_call([&] { return PG_GETARG_TEXT_PP(0); });
    std::string storage;
    const std::string_view utf8 = text_as_utf8(input, storage);
    WorkspaceLoan workspace;
    return core::canonical_sha256_text(utf8, json_parse_limits(), workspace.get());
}

core::Document document_of_jsonb_arg(FunctionCallInfo fcinfo, int argno, DocumentMemoryLoan& memory) {
    Jsonb* input = pg_call([&] { return PG_GETARG_JSONB_P(argno); });
    return document_from_jsonb(input, json_parse_limits(), memory.get());
}

// jsonb is written from its binary layout when its strings can be used as they are
// (a UTF-8 database); otherwise through a Document, which converts each string.
std::string canonical_of_jsonb_arg(FunctionCallInfo fcinfo, int argno) {
    DocumentMemoryLoan memory;
    if (!jsonb_strings_are_utf8()) return document_of_jsonb_arg(fcinfo, argno, memory).canonical();
    Jsonb* input = pg_call([&] { return PG_GETARG_JSONB_P(argno); });
    std::string canonical;
    core::CanonicalStream out(canonical);
    write_jsonb_canonical(input, out, json_parse_limits(), memory.get());
    out.finish();
    return canonical;
}

core::Sha256Digest canonical_hash_of_jsonb_arg(FunctionCallInfo fcinfo, int argno) {
    DocumentMemoryLoan memory;
    if (!jsonb_strings_are_utf8()) return core::canonical_sha256(document_of_jsonb_arg(fcinfo, argno, memory));
    Jsonb* input = pg_call([&] { return PG_GETARG_JSONB_P(argno); });
    core::CanonicalStream out;
    write_jsonb_canonical(input, out, json_parse_limits(), memory.get());
    return out.finish_sha256();
}

Datum text_datum(std::string_view utf8) { return PointerGetDatum(utf8_to_text(utf8)); }

Datum digest_datum(const core::Sha256Digest& digest) {
    return PointerGetDatum(bytes_to_bytea(digest.data(), digest.size()));
}

// jcs(text) and jcs(json): json's storage is its text, so one entry serves both.
Datum jcs_of_text(FunctionCallInfo fcinfo) { return text_datum(canonical_of_text_arg(fcinfo)); }

Datum jcs_of_jsonb(FunctionCallInfo fcinfo) { return text_datum(canonical_of_jsonb_arg(fcinfo, 0)); }

Datum jcs_hash_of_text(FunctionCallInfo fcinfo) { return digest_datum(canonical_hash_of_text_arg(fcinfo)); }

Datum jcs_hash_of_jsonb(FunctionCallInfo fcinfo) { return digest_datum(canonical_hash_of_jsonb_arg(fcinfo, 0)); }

Datum derive_operation_id(FunctionCallInfo fcinfo) {
    std::string storage;
    text* name_space = pg_call([&] { return PG_GETARG_TEXT_PP(0); });
    const std::string_view name_space_utf8 = text_as_utf8(name_space, storage);
    const std::string parts = canonical_of_jsonb_arg(fcinfo, 1);
    const auto uuid = core::derive_uuid_v8(name_space_utf8, parts);
    pg_uuid_t* result = pg_call([] { return static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t))); });
    memcpy(result->data, uuid.data(), UUID_LEN);
    return UUIDPGetDatum(result);
}

}  // namespace
}  // namespace opledger::pg

namespace jcs = opledger::pg;

OPLEDGER_SQL_FUNCTION(opledger_jcs_text, jcs::jcs_of_text)
OPLEDGER_SQL_FUNCTION(opledger_jcs_jsonb, jcs::jcs_of_jsonb)
OPLEDGER_SQL_FUNCTION(opledger_jcs_hash_text, jcs::jcs_hash_of_text)
OPLEDGER_SQL_FUNCTION(opledger_jcs_hash_jsonb, jcs::jcs_hash_of_jsonb)
OPLEDGER_SQL_FUNCTION(opledger_derive_operation_id, jcs::derive_operation_id)
