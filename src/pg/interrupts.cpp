// Query cancel during long calls (interrupts.hpp).
#include "pg/interrupts.hpp"

#include "core/jcs.hpp"
#include "pg/boundary.hpp"

extern "C" {
#include "miscadmin.h"
}

namespace opledger::pg {

void check_for_interrupts() {
    // The flag is read first: the common case costs a load, not a pg_call.
    if (!INTERRUPTS_PENDING_CONDITION()) return;
    // The ereport of a cancel lands in pg_call, which throws it on as a PgError: the
    // core's frames and this layer's unwind normally (destructors run, buffers are
    // given back) and sql_entry raises the cancel with its SQLSTATE once they are gone.
    pg_call([] { CHECK_FOR_INTERRUPTS(); });
}

void install_interrupt_check() noexcept { core::set_interrupt_check(&check_for_interrupts); }

}  // namespace opledger::pg
