// SPI access for the ledger: every statement is prepared once per backend
// (SPI_prepare_cursor with CURSOR_OPT_GENERIC_PLAN, then SPI_keepplan into
// CacheMemoryContext), so the hot path neither parses nor plans. Saved plans are
// revalidated by PostgreSQL's plan cache after DDL (e.g. the extension recreated).
// Every PostgreSQL call here goes through pg_call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pg/boundary.hpp"

// executor/spi.h reaches s_lock.h, whose C code uses `register` (not C++17).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "executor/spi.h"
#include "utils/timestamp.h"
}
#pragma GCC diagnostic pop

namespace opledger::pg::ledger {

enum class PlanId : int {
    policy,           // tool policy by name
    hmac_key,         // the fingerprint key
    hmac_key_create,  // create it when missing
    lock_row,         // SELECT ... FOR UPDATE of one operation
    begin_row,        // op_begin's insert-or-answer statement (see ledger_spi.cpp)
    insert_new,       // op_begin's insert of an ID that is probably new
    write_row,        // any transition of a locked operation
    succeed_pending,  // op_succeed of the current attempt of a pending operation
    insert_event,     // an event row through SQL (see event_log.hpp)
    sweep_candidates,
    claim_candidates,
    count_
};

// Runs a saved plan; returns the SPI result code (>= 0) or throws.
int execute(PlanId id, const Datum* values, const char* nulls, long count);

// A column of the current SPI_tuptable row.
Datum column(SPITupleTable* table, uint64 row, int column_index_0, bool* is_null);

// Text helpers (detoast / palloc through pg_call).
std::string text_to_string(Datum text_datum);
Datum string_to_text(std::string_view value);
Datum json_text_to_jsonb(const std::string& json);
std::string bytea_to_string(Datum bytea_datum);
Datum string_to_bytea(std::string_view bytes);

// Connection scope: SPI_connect in the constructor, SPI_finish in finish().
// If an error unwinds before finish(), PostgreSQL's abort processing cleans SPI up.
class SpiConnection {
public:
    SpiConnection();
    void finish();
    ~SpiConnection() = default;
    SpiConnection(const SpiConnection&) = delete;
    SpiConnection& operator=(const SpiConnection&) = delete;

private:
    bool connected_ = false;
};

}  // namespace opledger::pg::ledger
