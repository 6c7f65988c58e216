// Guard: the core is PostgreSQL-free so it can be unit-tested and fuzzed alone.
// Every private core header includes this file.
#pragma once

#ifdef PG_VERSION_NUM
#error "src/core must not include PostgreSQL headers"
#endif
