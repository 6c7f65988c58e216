// See direct_writes.hpp. C-style (called through pg_call or from PostgreSQL's own
// callbacks): no C++ object with a destructor, so an ereport may unwind it.
#include "pg/ledger/direct_writes.hpp"

// rel.h reaches s_lock.h, whose C code uses `register` (not C++17).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "access/genam.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"
}
#pragma GCC diagnostic pop

namespace opledger::pg::ledger {

bool indexes_allow_direct_writes(Relation rel) {
    List* indexes = RelationGetIndexList(rel);
    bool plain = true;
    ListCell* cell;
    foreach (cell, indexes) {
        Relation index = index_open(lfirst_oid(cell), AccessShareLock);
        const Form_pg_index form = index->rd_index;
        plain = plain && form->indisvalid && form->indisready && form->indimmediate && !form->indisexclusion &&
                RelationGetIndexExpressions(index) == NIL && RelationGetIndexPredicate(index) == NIL;
        index_close(index, AccessShareLock);
    }
    list_free(indexes);
    return plain;
}

}  // namespace opledger::pg::ledger
