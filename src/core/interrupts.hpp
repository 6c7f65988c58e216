// The interrupt check of long parses and writes (jcs.hpp, set_interrupt_check): a
// countdown ticked once per value, which calls the check when it reaches zero.
#pragma once

#include <cstdint>

#include "core/jcs.hpp"
#include "core/no_postgres.hpp"

namespace opledger::core::detail {

extern InterruptCheck interrupt_check;

// Values between two checks: a check costs a call; 65536 values take a few ms.
inline constexpr std::uint32_t kValuesPerInterruptCheck = 1u << 16;

class InterruptCountdown {
public:
    // One value done; may throw whatever the check throws.
    void tick() {
        if (--left_ != 0) return;
        left_ = kValuesPerInterruptCheck;
        if (interrupt_check != nullptr) interrupt_check();
    }

private:
    std::uint32_t left_ = kValuesPerInterruptCheck;
};

}  // namespace opledger::core::detail
