// sha_ni::available(): the CPU check for sha256_ni.hpp, done once per process.
// cpuid directly, because clang's __builtin_cpu_supports does not know "sha".
#include "core/sha256_ni.hpp"

#include <atomic>

#if defined(OPLEDGER_HAVE_SHA_NI)
#include <cpuid.h>
#endif

namespace opledger::core::detail::sha_ni {

namespace {

bool detect() noexcept {
#if defined(OPLEDGER_HAVE_SHA_NI)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const bool ssse3 = (ecx & bit_SSSE3) != 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool sha = (ebx & bit_SHA) != 0;
    return ssse3 && sha;
#else
    return false;
#endif
}

std::atomic<bool> g_disabled{false};

}  // namespace

bool available() noexcept {
    static const bool has_sha_ni = detect();  // CPU features do not change while running
    return has_sha_ni && !g_disabled.load(std::memory_order_relaxed);
}

void disable_for_testing(bool disabled) noexcept { g_disabled.store(disabled, std::memory_order_relaxed); }

}  // namespace opledger::core::detail::sha_ni
