// The only way the PostgreSQL layer includes PostgreSQL's C headers: C++ headers
// first, then PostgreSQL's inside extern "C" (they are C, and define macros that
// clash with C++ if they come first).
#pragma once

#include <type_traits>

// The library is built with -fvisibility=hidden so that the core's symbols (and the
// libraries it links) stay private; SQL-callable symbols are exported explicitly.
// PostgreSQL 15 leaves PGDLLEXPORT empty on Linux, so give it the visibility here.
#ifndef PGDLLEXPORT
#define PGDLLEXPORT __attribute__((visibility("default")))
#endif

extern "C" {
#include "postgres.h"
#include "fmgr.h"
#include "utils/elog.h"
#include "utils/memutils.h"
}
