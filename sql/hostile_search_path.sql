-- SPEC §8: a caller's search_path never reaches into the ledger. A hostile role
-- puts its own schema (and pg_temp) before pg_catalog, with operators and functions
-- for every type and routine the ledger's SQL could resolve without a schema, and
-- decoy tables named like the ledger's in pg_temp. Every ledger function must still
-- give its normal answer, nothing hostile may run (each hostile routine records
-- that it ran: a row in hostile.log, a tick of the non-transactional sequence
-- hostile.hits and a NOTICE), and the ledger and its counters must be exactly what
-- the calls should have left.
-- The calls are in sql/include/hostile_search_path_pass.psql and the checks in
-- sql/include/hostile_search_path_checks.psql; they run twice: with
-- search_path = hostile, pg_catalog (pg_temp implicitly first for tables), then
-- with pg_temp, hostile, pg_catalog and row-level security enabled on
-- opledger.counters (see pass 2).
-- Two-phase commit is part of the calls: the test cluster runs with
-- max_prepared_transactions = 10 (scripts/cluster.sh); on a server with 0 this test fails.
\set VERBOSITY terse
-- The included files are named relative to the source directory, so that psql's
-- prefix of their messages (psql:FILE:LINE:) is the same in every checkout.
\getenv abs_srcdir PG_ABS_SRCDIR
\cd :abs_srcdir
\set pass_file 'sql/include/hostile_search_path_pass.psql'
\set checks_file 'sql/include/hostile_search_path_checks.psql'

-- The hostile role (an agent's role: EXECUTE on the ledger functions, SELECT on the
-- views, nothing else) and a second role that approves its irreversible operations.
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_opledger_hostile;
DROP ROLE IF EXISTS regress_opledger_approver;
RESET client_min_messages;
CREATE ROLE regress_opledger_hostile;
CREATE ROLE regress_opledger_approver;
GRANT USAGE ON SCHEMA opledger TO regress_opledger_hostile, regress_opledger_approver;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA opledger TO regress_opledger_hostile;
GRANT EXECUTE ON FUNCTION opledger.op_approve(text, text, text) TO regress_opledger_approver;
GRANT SELECT ON opledger.metrics, opledger.tool_stats, opledger.unknown_operations, opledger.rejected_reuses,
    opledger.metrics_hourly TO regress_opledger_hostile;
-- SELECT on the ledger too, so that the reports hand back whole rows (a role without
-- it gets args, result, error and approval_note as NULL: tests/pgtap/92_*) and this
-- test sees that every stored value is right.
GRANT SELECT ON opledger.operations TO regress_opledger_hostile, regress_opledger_approver;
CREATE SCHEMA hostile AUTHORIZATION regress_opledger_hostile;
GRANT USAGE ON SCHEMA hostile TO PUBLIC;

SET ROLE regress_opledger_hostile;
-- Whoever runs a hostile routine (the caller, or the extension owner if the ledger
-- resolved it) leaves a trace: a row (lost if its transaction rolls back), a tick of
-- a sequence (never lost) and a NOTICE naming the routine and the role it ran as.
CREATE TABLE hostile.log (id bigserial, what text, ran_as name);
GRANT SELECT, INSERT ON hostile.log TO PUBLIC;
GRANT USAGE ON SEQUENCE hostile.log_id_seq TO PUBLIC;
CREATE SEQUENCE hostile.hits;
GRANT USAGE, UPDATE ON SEQUENCE hostile.hits TO PUBLIC;
CREATE FUNCTION hostile._hit(what text) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM nextval('hostile.hits');
    INSERT INTO hostile.log (what, ran_as) VALUES (what, current_user);
    RAISE NOTICE 'hostile % ran as %', what, current_user;
END $$;

-- Operators, for the types the ledger uses. Each records that it ran, then answers
-- what pg_catalog's operator answers.
DO $do$
DECLARE
    spec record;
    n integer := 0;
    fn text;
BEGIN
    FOR spec IN
        SELECT c.op, t.l, t.r, 'boolean' AS res
          FROM (VALUES ('='), ('<>'), ('<'), ('<='), ('>'), ('>=')) AS c(op)
          CROSS JOIN (VALUES ('text', 'text'), ('integer', 'integer'), ('bigint', 'bigint'),
                             ('bigint', 'integer'), ('integer', 'bigint'), ('numeric', 'numeric'),
                             ('timestamptz', 'timestamptz'), ('interval', 'interval'), ('jsonb', 'jsonb'),
                             ('bytea', 'bytea'), ('boolean', 'boolean'), ('uuid', 'uuid'), ('text[]', 'text[]'),
                             ('opledger.op_status', 'opledger.op_status'),
                             ('opledger.tool_effect', 'opledger.tool_effect')) AS t(l, r)
        UNION ALL
        SELECT * FROM (VALUES
            ('+', 'integer', 'integer', 'integer'), ('+', 'bigint', 'bigint', 'bigint'),
            ('+', 'bigint', 'integer', 'bigint'), ('+', 'integer', 'bigint', 'bigint'),
            ('+', 'numeric', 'numeric', 'numeric'), ('+', 'double precision', 'double precision', 'double precision'),
            ('+', 'timestamptz', 'interval', 'timestamptz'), ('+', 'interval', 'timestamptz', 'timestamptz'),
            ('+', 'interval', 'interval', 'interval'),
            ('-', 'integer', 'integer', 'integer'), ('-', 'bigint', 'bigint', 'bigint'),
            ('-', 'bigint', 'integer', 'bigint'), ('-', 'integer', 'bigint', 'bigint'),
            ('-', 'numeric', 'numeric', 'numeric'), ('-', 'double precision', 'double precision', 'double precision'),
            ('-', 'timestamptz', 'interval', 'timestamptz'), ('-', 'timestamptz', 'timestamptz', 'interval'),
            ('-', 'interval', 'interval', 'interval'),
            ('-', 'jsonb', 'text', 'jsonb'), ('-', 'jsonb', 'integer', 'jsonb'), ('-', 'jsonb', 'text[]', 'jsonb'),
            ('-', NULL, 'integer', 'integer'), ('-', NULL, 'bigint', 'bigint'), ('-', NULL, 'interval', 'interval'),
            ('-', NULL, 'numeric', 'numeric'),
            ('*', 'integer', 'integer', 'integer'), ('*', 'bigint', 'bigint', 'bigint'),
            ('*', 'numeric', 'numeric', 'numeric'), ('*', 'double precision', 'double precision', 'double precision'),
            ('*', 'interval', 'double precision', 'interval'), ('*', 'double precision', 'interval', 'interval'),
            ('*', 'interval', 'integer', 'interval'), ('*', 'integer', 'interval', 'interval'),
            ('/', 'integer', 'integer', 'integer'), ('/', 'bigint', 'bigint', 'bigint'),
            ('/', 'numeric', 'numeric', 'numeric'), ('/', 'double precision', 'double precision', 'double precision'),
            ('/', 'interval', 'double precision', 'interval'),
            ('^', 'double precision', 'double precision', 'double precision'), ('^', 'numeric', 'numeric', 'numeric'),
            ('||', 'text', 'text', 'text'), ('||', 'jsonb', 'jsonb', 'jsonb'), ('||', 'bytea', 'bytea', 'bytea'),
            ('||', 'text[]', 'text', 'text[]'), ('||', 'text', 'text[]', 'text[]'), ('||', 'text[]', 'text[]', 'text[]'),
            ('->', 'jsonb', 'text', 'jsonb'), ('->', 'jsonb', 'integer', 'jsonb'),
            ('->>', 'jsonb', 'text', 'text'), ('->>', 'jsonb', 'integer', 'text'),
            ('#>', 'jsonb', 'text[]', 'jsonb'), ('#>>', 'jsonb', 'text[]', 'text'), ('#-', 'jsonb', 'text[]', 'jsonb'),
            ('@>', 'jsonb', 'jsonb', 'boolean'), ('<@', 'jsonb', 'jsonb', 'boolean'),
            ('?', 'jsonb', 'text', 'boolean'), ('?|', 'jsonb', 'text[]', 'boolean'), ('?&', 'jsonb', 'text[]', 'boolean'),
            ('@>', 'text[]', 'text[]', 'boolean'), ('<@', 'text[]', 'text[]', 'boolean'), ('&&', 'text[]', 'text[]', 'boolean'),
            ('~~', 'text', 'text', 'boolean'), ('!~~', 'text', 'text', 'boolean'), ('~~*', 'text', 'text', 'boolean'),
            ('~', 'text', 'text', 'boolean'), ('!~', 'text', 'text', 'boolean')
        ) AS v(op, l, r, res)
    LOOP
        n := n + 1;
        fn := 'hostile._op_' || n;
        IF spec.l IS NULL THEN
            EXECUTE format('CREATE FUNCTION %s(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
                           fn, spec.r, spec.res,
                           format('BEGIN PERFORM hostile._hit(%L); RETURN OPERATOR(pg_catalog.%s) $1; END',
                                  'operator ' || spec.op || ' ' || spec.r, spec.op));
            EXECUTE format('CREATE OPERATOR hostile.%s (RIGHTARG = %s, FUNCTION = %s)', spec.op, spec.r, fn);
        ELSE
            EXECUTE format('CREATE FUNCTION %s(%s, %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
                           fn, spec.l, spec.r, spec.res,
                           format('BEGIN PERFORM hostile._hit(%L); RETURN $1 OPERATOR(pg_catalog.%s) $2; END',
                                  'operator ' || spec.l || ' ' || spec.op || ' ' || spec.r, spec.op));
            EXECUTE format('CREATE OPERATOR hostile.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)',
                           spec.op, spec.l, spec.r, fn);
        END IF;
    END LOOP;
END
$do$;

-- Functions that unqualified SQL could resolve to (same names, and argument types
-- that match exactly or better than pg_catalog's). Each records that it ran, then
-- answers what pg_catalog's function answers.
DO $do$
DECLARE
    spec record;
    n_args integer;
    call text;
    body text;
BEGIN
    FOR spec IN SELECT * FROM (VALUES
        -- time and sequences
        ('now', '', 'timestamptz', NULL), ('clock_timestamp', '', 'timestamptz', NULL),
        ('statement_timestamp', '', 'timestamptz', NULL), ('transaction_timestamp', '', 'timestamptz', NULL),
        ('timeofday', '', 'text', NULL),
        ('date_trunc', 'text, timestamptz', 'timestamptz', NULL), ('date_part', 'text, timestamptz', 'double precision', NULL),
        ('date_part', 'text, interval', 'double precision', NULL), ('age', 'timestamptz', 'interval', NULL),
        ('age', 'timestamptz, timestamptz', 'interval', NULL), ('justify_interval', 'interval', 'interval', NULL),
        ('isfinite', 'timestamptz', 'boolean', NULL), ('to_timestamp', 'double precision', 'timestamptz', NULL),
        ('to_char', 'timestamptz, text', 'text', NULL),
        ('nextval', 'regclass', 'bigint', NULL), ('currval', 'regclass', 'bigint', NULL), ('lastval', '', 'bigint', NULL),
        ('setval', 'regclass, bigint', 'bigint', NULL), ('setval', 'regclass, bigint, boolean', 'bigint', NULL),
        -- text
        ('lower', 'text', 'text', NULL), ('upper', 'text', 'text', NULL), ('length', 'text', 'integer', NULL),
        ('length', 'bytea', 'integer', NULL), ('octet_length', 'text', 'integer', NULL),
        ('octet_length', 'bytea', 'integer', NULL), ('char_length', 'text', 'integer', NULL),
        ('character_length', 'text', 'integer', NULL), ('textlen', 'text', 'integer', NULL),
        ('substr', 'text, integer', 'text', NULL), ('substr', 'text, integer, integer', 'text', NULL),
        ('substr', 'bytea, integer, integer', 'bytea', NULL), ('left', 'text, integer', 'text', NULL),
        ('right', 'text, integer', 'text', NULL), ('replace', 'text, text, text', 'text', NULL),
        ('split_part', 'text, text, integer', 'text', NULL), ('strpos', 'text, text', 'integer', NULL),
        ('btrim', 'text', 'text', NULL), ('ltrim', 'text', 'text', NULL), ('rtrim', 'text', 'text', NULL),
        ('md5', 'text', 'text', NULL), ('md5', 'bytea', 'text', NULL), ('repeat', 'text, integer', 'text', NULL),
        ('lpad', 'text, integer, text', 'text', NULL), ('rpad', 'text, integer, text', 'text', NULL),
        ('quote_ident', 'text', 'text', NULL), ('quote_literal', 'text', 'text', NULL),
        ('quote_nullable', 'text', 'text', NULL), ('starts_with', 'text, text', 'boolean', NULL),
        ('string_to_array', 'text, text', 'text[]', NULL), ('array_to_string', 'anyarray, text', 'text', NULL),
        ('regexp_replace', 'text, text, text', 'text', NULL),
        ('format', 'text', 'text', NULL), ('format', 'text, VARIADIC text[]', 'text', 'pg_catalog.format($1, VARIADIC $2)'),
        ('concat', 'VARIADIC text[]', 'text', 'pg_catalog.concat(VARIADIC $1)'),
        ('concat_ws', 'text, VARIADIC text[]', 'text', 'pg_catalog.concat_ws($1, VARIADIC $2)'),
        ('textcat', 'text, text', 'text', NULL), ('texteq', 'text, text', 'boolean', NULL),
        -- numbers
        ('int4pl', 'integer, integer', 'integer', NULL), ('int8pl', 'bigint, bigint', 'bigint', NULL),
        ('int48pl', 'integer, bigint', 'bigint', NULL), ('int84pl', 'bigint, integer', 'bigint', NULL),
        ('int4mi', 'integer, integer', 'integer', NULL), ('int8mi', 'bigint, bigint', 'bigint', NULL),
        ('int8inc', 'bigint', 'bigint', NULL), ('int4eq', 'integer, integer', 'boolean', NULL),
        ('int8eq', 'bigint, bigint', 'boolean', NULL), ('abs', 'integer', 'integer', NULL),
        ('abs', 'bigint', 'bigint', NULL), ('round', 'numeric', 'numeric', NULL),
        ('round', 'numeric, integer', 'numeric', NULL), ('ceil', 'numeric', 'numeric', NULL),
        ('floor', 'numeric', 'numeric', NULL), ('power', 'double precision, double precision', 'double precision', NULL),
        ('power', 'numeric, numeric', 'numeric', NULL), ('random', '', 'double precision', NULL),
        -- bytea and uuid
        ('sha256', 'bytea', 'bytea', NULL), ('encode', 'bytea, text', 'text', NULL),
        ('decode', 'text, text', 'bytea', NULL), ('convert_to', 'text, name', 'bytea', NULL),
        ('convert_from', 'bytea, name', 'text', NULL), ('get_byte', 'bytea, integer', 'integer', NULL),
        ('byteacat', 'bytea, bytea', 'bytea', NULL), ('gen_random_uuid', '', 'uuid', NULL),
        -- json
        ('jsonb_build_object', '', 'jsonb', NULL),
        ('jsonb_build_object', 'text, text', 'jsonb', NULL), ('jsonb_build_object', 'text, jsonb', 'jsonb', NULL),
        ('jsonb_build_object', 'text, integer', 'jsonb', NULL), ('jsonb_build_object', 'text, bigint', 'jsonb', NULL),
        ('jsonb_build_object', 'text, boolean', 'jsonb', NULL), ('jsonb_build_object', 'text, numeric', 'jsonb', NULL),
        ('jsonb_build_object', 'text, text, text, text', 'jsonb', NULL),
        ('jsonb_build_object', 'text, jsonb, text, jsonb', 'jsonb', NULL),
        ('jsonb_build_object', 'VARIADIC text[]', 'jsonb', 'pg_catalog.jsonb_build_object(VARIADIC $1)'),
        ('jsonb_build_array', '', 'jsonb', NULL),
        ('jsonb_build_array', 'VARIADIC text[]', 'jsonb', 'pg_catalog.jsonb_build_array(VARIADIC $1)'),
        ('json_build_object', 'VARIADIC text[]', 'json', 'pg_catalog.json_build_object(VARIADIC $1)'),
        ('to_jsonb', 'anyelement', 'jsonb', NULL), ('to_jsonb', 'text', 'jsonb', NULL),
        ('to_json', 'anyelement', 'json', NULL), ('jsonb_typeof', 'jsonb', 'text', NULL),
        ('jsonb_strip_nulls', 'jsonb', 'jsonb', NULL), ('jsonb_pretty', 'jsonb', 'text', NULL),
        ('jsonb_array_length', 'jsonb', 'integer', NULL),
        ('jsonb_set', 'jsonb, text[], jsonb', 'jsonb', NULL), ('jsonb_set', 'jsonb, text[], jsonb, boolean', 'jsonb', NULL),
        ('jsonb_insert', 'jsonb, text[], jsonb', 'jsonb', NULL),
        ('jsonb_extract_path', 'jsonb, VARIADIC text[]', 'jsonb', 'pg_catalog.jsonb_extract_path($1, VARIADIC $2)'),
        ('jsonb_extract_path_text', 'jsonb, VARIADIC text[]', 'text', 'pg_catalog.jsonb_extract_path_text($1, VARIADIC $2)'),
        ('jsonb_concat', 'jsonb, jsonb', 'jsonb', NULL), ('jsonb_delete', 'jsonb, text', 'jsonb', NULL),
        ('jsonb_exists', 'jsonb, text', 'boolean', NULL), ('jsonb_contains', 'jsonb, jsonb', 'boolean', NULL),
        ('jsonb_object', 'text[]', 'jsonb', NULL),
        ('jsonb_object_keys', 'jsonb', 'SETOF text', NULL), ('jsonb_array_elements', 'jsonb', 'SETOF jsonb', NULL),
        ('jsonb_array_elements_text', 'jsonb', 'SETOF text', NULL),
        ('jsonb_each', 'jsonb', 'TABLE(key text, value jsonb)', NULL),
        ('jsonb_each_text', 'jsonb', 'TABLE(key text, value text)', NULL),
        -- arrays and sets
        ('array_length', 'anyarray, integer', 'integer', NULL), ('cardinality', 'anyarray', 'integer', NULL),
        ('array_upper', 'anyarray, integer', 'integer', NULL), ('array_lower', 'anyarray, integer', 'integer', NULL),
        ('array_append', 'anycompatiblearray, anycompatible', 'anycompatiblearray', NULL),
        ('array_prepend', 'anycompatible, anycompatiblearray', 'anycompatiblearray', NULL),
        ('array_cat', 'anycompatiblearray, anycompatiblearray', 'anycompatiblearray', NULL),
        ('array_position', 'anycompatiblearray, anycompatible', 'integer', NULL),
        ('array_remove', 'anycompatiblearray, anycompatible', 'anycompatiblearray', NULL),
        ('unnest', 'anyarray', 'SETOF anyelement', NULL), ('unnest', 'text[]', 'SETOF text', NULL),
        ('generate_series', 'integer, integer', 'SETOF integer', NULL),
        ('generate_series', 'bigint, bigint', 'SETOF bigint', NULL),
        ('generate_subscripts', 'anyarray, integer', 'SETOF integer', NULL),
        -- session, locks, notifications
        ('current_setting', 'text', 'text', NULL), ('current_setting', 'text, boolean', 'text', NULL),
        ('set_config', 'text, text, boolean', 'text', NULL), ('pg_notify', 'text, text', 'void', NULL),
        ('pg_backend_pid', '', 'integer', NULL), ('txid_current', '', 'bigint', NULL),
        ('txid_current_if_assigned', '', 'bigint', NULL), ('pg_current_xact_id', '', 'xid8', NULL),
        ('pg_advisory_xact_lock', 'bigint', 'void', NULL), ('pg_try_advisory_xact_lock', 'bigint', 'boolean', NULL),
        ('pg_advisory_lock', 'bigint', 'void', NULL), ('pg_advisory_unlock', 'bigint', 'boolean', NULL),
        ('hashtext', 'text', 'integer', NULL), ('hashtextextended', 'text, bigint', 'bigint', NULL),
        ('pg_sleep', 'double precision', 'void', NULL), ('current_database', '', 'name', NULL),
        ('version', '', 'text', NULL)
    ) AS v(name, args, ret, call) LOOP
        n_args := CASE WHEN spec.args = '' THEN 0 ELSE array_length(string_to_array(spec.args, ','), 1) END;
        call := coalesce(spec.call, format('pg_catalog.%I(%s)', spec.name,
                         (SELECT coalesce(string_agg('$' || i, ', '), '') FROM generate_series(1, n_args) AS i)));
        IF spec.ret LIKE 'SETOF %' OR spec.ret LIKE 'TABLE(%' THEN
            body := format('BEGIN PERFORM hostile._hit(%L); RETURN QUERY SELECT * FROM %s; END',
                           'function ' || spec.name || '(' || spec.args || ')', call);
        ELSIF spec.ret = 'void' THEN
            body := format('BEGIN PERFORM hostile._hit(%L); PERFORM %s; END',
                           'function ' || spec.name || '(' || spec.args || ')', call);
        ELSE
            body := format('BEGIN PERFORM hostile._hit(%L); RETURN %s; END',
                           'function ' || spec.name || '(' || spec.args || ')', call);
        END IF;
        EXECUTE format('CREATE FUNCTION hostile.%I(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
                       spec.name, spec.args, spec.ret, body);
    END LOOP;
END
$do$;

-- Aggregates: each transition records that it ran.
DO $do$
DECLARE
    spec record;
    n integer := 0;
    sfunc text;
BEGIN
    FOR spec IN SELECT * FROM (VALUES
        -- name, argument types, state type, transition expression ($1 state, $2.. values), initcond
        ('count', '*', 'bigint', '$1 + 1', '0'),
        ('count', 'text', 'bigint', 'CASE WHEN $2 IS NULL THEN $1 ELSE $1 + 1 END', '0'),
        ('count', 'bigint', 'bigint', 'CASE WHEN $2 IS NULL THEN $1 ELSE $1 + 1 END', '0'),
        ('sum', 'bigint', 'numeric', 'CASE WHEN $2 IS NULL THEN $1 ELSE coalesce($1, 0) + $2 END', NULL),
        ('sum', 'integer', 'bigint', 'CASE WHEN $2 IS NULL THEN $1 ELSE coalesce($1, 0) + $2 END', NULL),
        ('sum', 'numeric', 'numeric', 'CASE WHEN $2 IS NULL THEN $1 ELSE coalesce($1, 0) + $2 END', NULL),
        ('sum', 'interval', 'interval', 'CASE WHEN $2 IS NULL THEN $1 ELSE coalesce($1, ''0'') + $2 END', NULL),
        ('min', 'timestamptz', 'timestamptz', 'least($1, $2)', NULL),
        ('max', 'timestamptz', 'timestamptz', 'greatest($1, $2)', NULL),
        ('min', 'bigint', 'bigint', 'least($1, $2)', NULL), ('max', 'bigint', 'bigint', 'greatest($1, $2)', NULL),
        ('min', 'integer', 'integer', 'least($1, $2)', NULL), ('max', 'integer', 'integer', 'greatest($1, $2)', NULL),
        ('min', 'text', 'text', 'least($1, $2)', NULL), ('max', 'text', 'text', 'greatest($1, $2)', NULL),
        ('min', 'interval', 'interval', 'least($1, $2)', NULL), ('max', 'interval', 'interval', 'greatest($1, $2)', NULL),
        ('array_agg', 'text', 'text[]', 'array_append($1, $2)', NULL),
        ('array_agg', 'anynonarray', 'anyarray', 'array_append($1, $2)', NULL),
        ('jsonb_agg', 'anyelement', 'jsonb', 'coalesce($1, ''[]'') || jsonb_build_array(to_jsonb($2))', NULL),
        ('jsonb_object_agg', 'text, bigint', 'jsonb', 'coalesce($1, ''{}'') || jsonb_build_object($2, $3)', NULL),
        ('jsonb_object_agg', 'text, numeric', 'jsonb', 'coalesce($1, ''{}'') || jsonb_build_object($2, $3)', NULL),
        ('jsonb_object_agg', 'text, jsonb', 'jsonb', 'coalesce($1, ''{}'') || jsonb_build_object($2, $3)', NULL),
        ('jsonb_object_agg', 'text, text', 'jsonb', 'coalesce($1, ''{}'') || jsonb_build_object($2, $3)', NULL),
        ('string_agg', 'text, text', 'text', 'CASE WHEN $2 IS NULL THEN $1 WHEN $1 IS NULL THEN $2 ELSE $1 || $3 || $2 END', NULL),
        ('bool_or', 'boolean', 'boolean', 'coalesce($1, false) OR $2', NULL),
        ('bool_and', 'boolean', 'boolean', 'coalesce($1, true) AND $2', NULL)
    ) AS v(name, args, stype, step, initcond) LOOP
        n := n + 1;
        sfunc := 'hostile._agg_' || n;
        EXECUTE format('CREATE FUNCTION %s(%s%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog AS %L',
                       sfunc, spec.stype, CASE WHEN spec.args = '*' THEN '' ELSE ', ' || spec.args END, spec.stype,
                       format('BEGIN PERFORM hostile._hit(%L); RETURN %s; END',
                              'aggregate ' || spec.name || '(' || spec.args || ')', spec.step));
        EXECUTE format('CREATE AGGREGATE hostile.%I(%s) (SFUNC = %s, STYPE = %s%s)',
                       spec.name, spec.args, sfunc, spec.stype,
                       CASE WHEN spec.initcond IS NULL THEN '' ELSE format(', INITCOND = %L', spec.initcond) END);
    END LOOP;
END
$do$;
RESET ROLE;

-- Decoys in pg_temp, named like the ledger's tables, holding rows that would change
-- the answers if the ledger read them, and recording any write.
CREATE FUNCTION hostile._decoy_written() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM hostile._hit('write of pg_temp.' || TG_TABLE_NAME || ' (' || TG_OP || ')');
    RETURN NULL;
END $$;
-- One decoy for every table of the extension, bait rows in the five ledger tables and
-- in any other table with tool and begins columns (counter_deltas in 0.2.0).
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class AS c
              WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind = 'r' ORDER BY c.relname LOOP
        EXECUTE format('CREATE TEMP TABLE %I (LIKE opledger.%I INCLUDING DEFAULTS INCLUDING IDENTITY)', t.relname, t.relname);
    END LOOP;
END $$;
INSERT INTO pg_temp.tools (tool, effect, max_attempts, lease, backoff_base, backoff_max, hash_exclude, redact, created_at, updated_at)
SELECT t, 'read_only', 99, '1 second', '0', '0', '{}', '{}', now(), now()
  FROM unnest('{hx.charge,hx.upsert,hx.read,hx.deploy,hx.slow,hx.once,hx.card}'::text[]) AS t;
INSERT INTO pg_temp.hmac_key (key_id, secret, created_at) VALUES (1, sha256('decoy'), now());
INSERT INTO pg_temp.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, result, created_at, updated_at, finished_at)
SELECT 'hx-' || id, 'hx.charge', '{}', sha256('decoy'), 'jcs-sha256/1', 'succeeded', 7, '{"decoy": true}', now(), now(), now()
  FROM unnest('{ok,fail,later,ready,once,unknown,unknown-2,idem,notapplied,late,expire,sweep,sweep-read,deploy,card,tx,prepared}'::text[]) AS id;
INSERT INTO pg_temp.events (operation_id, event_id, at, kind, status_after, seq) VALUES ('hx-ok', 1, now(), 'decoy', 'failed', 1);
INSERT INTO pg_temp.counters (tool, slot, begins) SELECT 'hx.charge', s, 1000000 FROM generate_series(-10, 200) AS s;
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class AS c
              WHERE c.relnamespace = pg_my_temp_schema() AND c.relkind = 'r'
                AND c.relname NOT IN ('tools', 'hmac_key', 'operations', 'events', 'counters')
                AND EXISTS (SELECT FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attname = 'tool')
                AND EXISTS (SELECT FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attname = 'begins')
              ORDER BY c.relname LOOP
        EXECUTE format('INSERT INTO pg_temp.%I (tool, begins) VALUES (%L, 1000000)', t.relname, 'hx.charge');
    END LOOP;
    FOR t IN SELECT c.relname FROM pg_class AS c
              WHERE c.relnamespace = pg_my_temp_schema() AND c.relkind = 'r' ORDER BY c.relname LOOP
        EXECUTE format('CREATE TRIGGER decoy_written BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON pg_temp.%I
                        FOR EACH STATEMENT EXECUTE FUNCTION hostile._decoy_written()', t.relname);
    END LOOP;
END $$;
-- The decoys' rows, for the checks after each pass.
CREATE FUNCTION pg_temp.decoy_rows() RETURNS TABLE (decoy name, rows bigint) LANGUAGE plpgsql AS $$
DECLARE t record;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class AS c
              WHERE c.relnamespace = pg_my_temp_schema() AND c.relkind = 'r' ORDER BY c.relname LOOP
        decoy := t.relname;
        EXECUTE format('SELECT count(*) FROM pg_temp.%I', t.relname) INTO rows;
        RETURN NEXT;
    END LOOP;
END $$;

-- Between the passes and at the end: the rows of this test, from every table of the
-- extension that has an operation_id or a tool column, and the HMAC key.
CREATE FUNCTION pg_temp.clean_ledger() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t record;
    cleaned text[] := '{}';
BEGIN
    FOR t IN SELECT format('opledger.%I', c.relname) AS rel, a.attname AS col, CASE a.attname WHEN 'tool' THEN 'hx.%' ELSE 'hx-%' END AS pattern
               FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND NOT a.attisdropped
              WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind = 'r' AND a.attname IN ('operation_id', 'tool')
              ORDER BY c.relname, a.attname LOOP
        EXECUTE format('DELETE FROM %s WHERE %I LIKE %L', t.rel, t.col, t.pattern);
        cleaned := cleaned || (t.rel || '.' || t.col);
    END LOOP;
    DELETE FROM opledger.hmac_key;
    RETURN array_to_string(cleaned, ' ');
END $$;

-- What was planted.
SELECT (SELECT count(*) FROM pg_operator WHERE oprnamespace = 'hostile'::regnamespace) AS operators,
       (SELECT count(*) FROM pg_proc WHERE pronamespace = 'hostile'::regnamespace AND prokind = 'f'
           AND proname NOT LIKE E'\\_%') AS functions,
       (SELECT count(*) FROM pg_proc WHERE pronamespace = 'hostile'::regnamespace AND prokind = 'a') AS aggregates,
       (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r') AS decoy_tables;

-- Pass 1: hostile schema first; pg_temp is searched first for tables anyway.
\set hostile_path 'hostile, pg_catalog'
\i :pass_file

-- Pass 2: pg_temp named first, and row-level security disabled on opledger.counters
-- (0.3.0 ships it enabled, inert for its owner, who runs the ledger functions). Any
-- write of the counters through SQL must be safe either way; 0.1.0 wrote them by
-- direct table access and used its commit-time SQL upsert, resolved under the
-- caller's search_path, only while the table had row-level security, triggers or
-- rules, or for a (tool, slot) row it had not written yet.
SELECT pg_temp.clean_ledger() <> '' AS cleaned;
ALTER TABLE opledger.counters DISABLE ROW LEVEL SECURITY;
\set hostile_path 'pg_temp, hostile, pg_catalog'
\i :pass_file
ALTER TABLE opledger.counters ENABLE ROW LEVEL SECURITY;

-- The calls above reached every function and view of the extension (a new one must be
-- added to sql/include/hostile_search_path_pass.psql).
SELECT p.oid::regprocedure AS function_not_called FROM pg_proc AS p
 WHERE p.pronamespace = 'opledger'::regnamespace
   AND p.proname NOT IN ('register_tool', 'op_begin', 'op_succeed', 'op_fail', 'op_mark_unknown', 'op_resolve',
                         'op_approve', 'op_sweep', 'op_claim_reconciliation', 'op_purge', 'jcs', 'jcs_hash',
                         'derive_operation_id', '_check_pointers', '_random_secret', 'current_tenant',
                         'notify_token', 'set_role_tenant', '_rejected_reuses', 'reset_rejected_reuses',
                         'create_roles', 'op_reject', 'metrics_since', '_counts', 'create_hmac_key',
                         '_sees_tenant')
 ORDER BY 1;
SELECT c.oid::regclass AS view_not_read FROM pg_class AS c
 WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind IN ('v', 'm')
   AND c.relname NOT IN ('metrics', 'tool_stats', 'unknown_operations', 'rejected_reuses', 'metrics_hourly')
 ORDER BY 1;

-- Clean up: the ledger rows of this test, the decoys, the hostile schema and roles.
-- No prepared transaction is left behind.
SELECT count(*) AS prepared_left FROM pg_prepared_xacts WHERE gid LIKE 'opledger_hostile_%';
SELECT pg_temp.clean_ledger() <> '' AS cleaned;
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = pg_my_temp_schema() AND c.relkind = 'r' LOOP
        EXECUTE format('DROP TABLE pg_temp.%I', t.relname);
    END LOOP;
END $$;
DROP FUNCTION pg_temp.clean_ledger();
DROP FUNCTION pg_temp.decoy_rows();
SET client_min_messages = warning;
DROP SCHEMA hostile CASCADE;
RESET client_min_messages;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA opledger FROM regress_opledger_hostile, regress_opledger_approver;
REVOKE ALL ON ALL TABLES IN SCHEMA opledger FROM regress_opledger_hostile, regress_opledger_approver;
REVOKE ALL ON SCHEMA opledger FROM regress_opledger_hostile, regress_opledger_approver;
DROP ROLE regress_opledger_hostile;
DROP ROLE regress_opledger_approver;
