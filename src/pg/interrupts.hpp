// Query cancel during long calls. PostgreSQL notices a cancel (a client's cancel
// request, pg_cancel_backend, statement_timeout) only where code checks for it
// (CHECK_FOR_INTERRUPTS); the extension's own long loops check here, so a cancel
// ends them with 57014 instead of after all their work.
#pragma once

namespace opledger::pg {

// Raises a pending interrupt (query cancel, statement timeout, termination) as a
// PgError through pg_call; does nothing, cheaply, when none is pending. Call it where
// the C++ frames above can unwind (every layer function can; see boundary.hpp).
void check_for_interrupts();

// Makes the core (parsing and writing JSON) call check_for_interrupts now and then.
// Called once, from _PG_init.
void install_interrupt_check() noexcept;

}  // namespace opledger::pg
