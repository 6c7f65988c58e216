-- A caller's search_path never reaches into the ledger: idempotent writes and a resolution as not applied.
-- sql/include/hostile_case.psql says what is planted and how the case runs; the calls
-- are in sql/include/hostile/40_idempotent.psql.
\set VERBOSITY terse
-- The included files are named relative to the source directory, so that psql's
-- prefix of their messages (psql:FILE:LINE:) is the same in every checkout.
\getenv abs_srcdir PG_ABS_SRCDIR
\cd :abs_srcdir
\set case 40
\set calls 'sql/include/hostile/40_idempotent.psql'
\i sql/include/hostile_case.psql
