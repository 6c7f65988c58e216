// Datum <-> core conversions for JSON values: jsonb is walked token by token into
// the core's DocumentBuilder (no detour through text); text input is handed to the
// core parser as UTF-8. Every PostgreSQL call in here goes through pg_call.
#pragma once

#include <memory_resource>
#include <string>
#include <string_view>

#include "core/jcs.hpp"
#include "pg/pg_headers.hpp"

extern "C" {
#include "utils/jsonb.h"
}

namespace opledger::pg {

// Nesting limit for JSON text and jsonb input, derived from max_stack_depth so that
// every document PostgreSQL's own json parser accepts is accepted too
// (PostgreSQL 15 with the default 2MB stops at roughly 15,000 levels; this gives 16,384).
core::ParseLimits json_parse_limits();

// Builds a core Document from a detoasted jsonb value; its buffers come from memory
// (which must outlive it).
core::Document document_from_jsonb(Jsonb* value, const core::ParseLimits& limits,
                                   std::pmr::memory_resource* memory = std::pmr::get_default_resource());

// The bytes of a text datum as UTF-8 (converted when the database encoding is not
// UTF-8; a view into the datum otherwise). `storage` keeps converted bytes alive.
std::string_view text_as_utf8(text* value, std::string& storage);

// A palloc'd text datum holding UTF-8 bytes converted to the database encoding.
text* utf8_to_text(std::string_view utf8);

// A palloc'd bytea holding these bytes.
bytea* bytes_to_bytea(const unsigned char* bytes, std::size_t length);

}  // namespace opledger::pg
