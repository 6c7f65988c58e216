// The process-wide interrupt check (interrupts.hpp).
#include "core/interrupts.hpp"

namespace opledger::core {
namespace detail {

InterruptCheck interrupt_check = nullptr;

}  // namespace detail

void set_interrupt_check(InterruptCheck check) noexcept { detail::interrupt_check = check; }

}  // namespace opledger::core
