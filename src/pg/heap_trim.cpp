// Stops glibc from giving the top of the heap back to the kernel after every
// ledger call.
//
// Every op_* call runs a few saved SPI plans; each execution's btree scan pallocs
// a ~27 KB scan descriptor, which is bigger than a memory context's chunk limit
// and so is malloc'd and freed on its own. In a backend whose heap has no free
// hole of that size, glibc extends the heap with brk (plus its 128 KB top pad)
// and, on free, trims it again because the top chunk is now above the default
// 128 KB M_TRIM_THRESHOLD. Every trim unmaps pages, and unmapping flushes the TLB
// of every CPU the process ran on: an inter-processor interrupt, expensive on a
// VM. perf measured 13% of backend CPU in that brk/TLB-flush path on 32 clients
// replaying hot IDs (bench/RESULTS.md, "ledger").
//
// Setting the threshold keeps up to kTrimThreshold of free memory at the top of
// the heap of a backend that has loaded opledger; memory above it is still
// returned. (Setting it also turns off glibc's dynamic mmap threshold, which only
// ever raises the threshold anyway.)
#include "pg/pg_headers.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace opledger::pg {

namespace {
constexpr int kTrimThreshold = 4 * 1024 * 1024;
}

void keep_heap_top_between_calls() {
#if defined(__GLIBC__)
    mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
#endif
}

}  // namespace opledger::pg
