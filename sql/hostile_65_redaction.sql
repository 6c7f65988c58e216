-- A caller's search_path never reaches into the ledger: redaction, the HMAC fingerprint and required registration.
-- sql/include/hostile_case.psql says what is planted and how the case runs; the calls
-- are in sql/include/hostile/65_redaction.psql.
\set VERBOSITY terse
-- The included files are named relative to the source directory, so that psql's
-- prefix of their messages (psql:FILE:LINE:) is the same in every checkout.
\getenv abs_srcdir PG_ABS_SRCDIR
\cd :abs_srcdir
\set case 65
\set calls 'sql/include/hostile/65_redaction.psql'
\i sql/include/hostile_case.psql
