// The shared library's entry: module magic and settings. Each part of the
// extension defines its own settings; this file only calls them in order.
#include "pg/pg_headers.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace opledger::pg {
void define_ledger_gucs();
void keep_heap_top_between_calls();
}

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
    opledger::pg::keep_heap_top_between_calls();
    opledger::pg::define_ledger_gucs();
    MarkGUCPrefixReserved("opledger");
}

}  // extern "C"
