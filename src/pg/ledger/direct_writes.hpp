// What the ledger's direct table writes (events in event_log.cpp, counters in
// ledger_counters.cpp) must check before skipping the executor: both maintain
// indexes with PostgreSQL's plain index_insert path, which only knows column
// indexes without predicates, immediate, not exclusion constraints, and ready.
#pragma once

#include "pg/pg_headers.hpp"

// rel.h reaches s_lock.h, whose C code uses `register` (not C++17).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "utils/rel.h"
}
#pragma GCC diagnostic pop

namespace opledger::pg::ledger {

// True when every index of rel is such a plain index. C-style: may ereport.
bool indexes_allow_direct_writes(Relation rel);

}  // namespace opledger::pg::ledger
