# PGXS build of the opledger extension (C++17).
#   make                 build opledger.so and the versioned install script
#   make install         install them into the PostgreSQL found by pg_config
#   make installcheck    against the running server (PGHOST, PGPORT, PGUSER: a superuser):
#                        pg_regress (sql/), pgTAP (tests/pgtap/, pg_prove), isolation
#                        specs (tests/isolation/specs/) and TAP tests (tests/t/, prove;
#                        they start clusters of their own, so they need a non-root user).
#                        One kind or one test: empty the others or name it, e.g.
#                          make installcheck REGRESS=jcs PGTAP_TESTS= ISOLATION= TAP_TESTS=
#                        (tests/README.md is the map of every kind of test)
# The C++ core alone (unit tests, fuzzers, benchmarks) is built by CMakeLists.txt.

EXTVERSION = 0.5.0
MODULE_big = opledger
MODULEDIR = extension

CORE_SRCS := $(sort $(wildcard src/core/*.cpp src/core/*/*.cpp))
PG_SRCS := $(sort $(wildcard src/pg/*.cpp src/pg/*/*.cpp))
OBJS = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

# The install script is assembled from one fragment per component, in name order,
# so that each part of the SQL surface lives beside the code it belongs to.
EXTENSION_SQL_PARTS := $(sort $(wildcard control/install/*.sql))
EXTENSION_SQL = opledger--$(EXTVERSION).sql
# Only the current version's install script is built and shipped, with the update
# scripts from every release: an installed database moves on with ALTER EXTENSION
# UPDATE. An older version's install script is what its release commit builds
# (tests/upgrade/releases.txt; tests/README.md, "Older versions").
UPGRADE_SCRIPTS := $(wildcard control/upgrade/opledger--*--*.sql)
DATA = control/opledger.control $(UPGRADE_SCRIPTS)
DATA_built = $(EXTENSION_SQL)

REGRESS = $(basename $(notdir $(sort $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=. --load-extension=opledger
ISOLATION = $(basename $(notdir $(sort $(wildcard tests/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=tests/isolation
TAP_TESTS = 1
PROVE_TESTS = tests/t/*.pl
# pgTAP files run with pg_prove in a database made for the run and dropped after it
# (each file creates the pgtap and opledger extensions it needs, if missing).
PGTAP_TESTS = $(sort $(wildcard tests/pgtap/*.sql))
PGTAP_DB = contrib_pgtap_$(MODULE_big)
PGTAP_PROVE_FLAGS =
# Our own installcheck (below) runs the four kinds in turn.
NO_INSTALLCHECK = 1

# The library knows the version it was built as (ledger_version.cpp compares it with
# the database's extension before every ledger call).
PG_CPPFLAGS = -Isrc -DOPLEDGER_EXTVERSION='"$(EXTVERSION)"'
# Frame pointers like the server's own build, so perf can walk stacks through our frames.
PG_CXXFLAGS = -std=c++17 -fvisibility=hidden -fno-omit-frame-pointer -Wno-missing-field-initializers
SHLIB_LINK += -lstdc++ -lcrypto -lsimdjson

# Debian's PostgreSQL is built with LLVM; JIT-inlining C++ bitcode buys nothing here.
override with_llvm = no

EXTRA_CLEAN = results regression.diffs regression.out output_iso tmp_check

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# make installcheck: each kind runs only when its list is not empty, so that
# `make installcheck PGTAP_TESTS=` and the like leave a kind out.
installcheck: $(REGRESS_PREP)
ifneq ($(strip $(REGRESS)),)
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
endif
ifneq ($(strip $(PGTAP_TESTS)),)
	'$(bindir)/dropdb' --if-exists '$(PGTAP_DB)'
	'$(bindir)/createdb' '$(PGTAP_DB)'
	pg_prove --psql-bin '$(bindir)/psql' --dbname '$(PGTAP_DB)' $(PGTAP_PROVE_FLAGS) $(PGTAP_TESTS); \
	status=$$?; '$(bindir)/dropdb' --if-exists '$(PGTAP_DB)'; exit $$status
endif
ifneq ($(strip $(ISOLATION)),)
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
endif
ifneq ($(strip $(TAP_TESTS)),)
	$(prove_installcheck)
endif

$(EXTENSION_SQL): $(EXTENSION_SQL_PARTS)
	cat $(EXTENSION_SQL_PARTS) > $@

# Every object depends on the headers of its part (coarse but always correct).
$(CORE_SRCS:.cpp=.o): $(wildcard src/core/*.hpp src/core/*/*.hpp)
$(PG_SRCS:.cpp=.o): $(wildcard src/core/*.hpp src/core/*/*.hpp src/pg/*.hpp src/pg/*/*.hpp)
# EXTVERSION is compiled in there.
src/pg/ledger/ledger_version.o: Makefile
