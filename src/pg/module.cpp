// The shared library's entry: module magic and settings. Each part of the
// extension defines its own settings; this file only calls them in order.
#include "pg/pg_headers.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace opledger::pg {
void define_ledger_gucs();
void keep_heap_top_between_calls();
void reuse_monitor_init();
void install_interrupt_check() noexcept;
}

extern "C" {

PG_MODULE_MAGIC;

PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
    opledger::pg::keep_heap_top_between_calls();
    opledger::pg::define_ledger_gucs();
    opledger::pg::install_interrupt_check();  // long jcs parses and writes answer a query cancel
    opledger::pg::reuse_monitor_init();  // only when preloaded: shared memory, its setting
    MarkGUCPrefixReserved("opledger");
}

}  // extern "C"
