-- A caller's search_path never reaches into the ledger: op_mark_unknown, reconciliation claims and op_resolve.
-- sql/include/hostile_case.psql says what is planted and how the case runs; the calls
-- are in sql/include/hostile/35_unknown.psql.
\set VERBOSITY terse
-- The included files are named relative to the source directory, so that psql's
-- prefix of their messages (psql:FILE:LINE:) is the same in every checkout.
\getenv abs_srcdir PG_ABS_SRCDIR
\cd :abs_srcdir
\set case 35
\set calls 'sql/include/hostile/35_unknown.psql'
\i sql/include/hostile_case.psql
