// The canonical form (RFC 8785) of a jsonb value, written straight from jsonb's
// binary layout: each object's member names are sorted in place of a parse, values
// are visited by their offsets, and the bytes stream into a string or a digest.
// One pass, no Document, no iterator tokens: this is what lets jcs_hash(jsonb) beat
// jsonb_out + sha256.
#pragma once

#include <memory_resource>

#include "core/canonical_stream.hpp"
#include "core/jcs.hpp"
#include "pg/pg_headers.hpp"

extern "C" {
#include "utils/jsonb.h"
}

namespace opledger::pg {

// Whether jsonb strings can be written as they are stored: the database encoding is
// UTF-8 (PostgreSQL has validated them). Otherwise use document_from_jsonb, which
// converts and checks each string.
bool jsonb_strings_are_utf8();

// Writes the canonical form of a detoasted jsonb value into out (not finished).
// Nesting deeper than limits.max_depth raises JsonError(too_deep); a number whose
// canonical form would change its value raises JsonError(inexact_number).
// Scratch arrays come from memory.
void write_jsonb_canonical(const Jsonb* value, core::CanonicalStream& out, const core::ParseLimits& limits,
                           std::pmr::memory_resource* memory);

}  // namespace opledger::pg
