-- Views don't leak other tenants' rows to a caller's function (docs/security.md, "Views").
-- The views run with their owner's rights and filter by tenant themselves; a caller's cheap
-- function in WHERE must never see a row before that filter. Every view the extension ships
-- is attacked, found in the catalog, so a view added later without the barrier fails here.
-- Runs as a LOGIN role of tenant B, in one transaction that rolls back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t98_agent_a LOGIN IN ROLE opledger_agent;
CREATE ROLE t98_agent_b LOGIN IN ROLE opledger_agent;
-- the attacker: tenant B's dashboard and reconciler (every view a tenant role may read)
CREATE ROLE t98_b LOGIN IN ROLE opledger_dashboard, opledger_reconciler;
SELECT lives_ok($$SELECT opledger.set_role_tenant('t98_agent_a', 'sec98-alpha'),
                         opledger.set_role_tenant('t98_agent_b', 'sec98-beta'),
                         opledger.set_role_tenant('t98_b', 'sec98-beta'),
                         opledger.register_tool('t98a.tool', 'non_idempotent_write'),
                         opledger.register_tool('t98b.tool', 'non_idempotent_write')$$,
                'setup: agents of tenants A and B, tenant B''s dashboard and reconciler login, their tools');

-- Tenant A's unknown operation: every text of it carries the marker t98a
SET LOCAL SESSION AUTHORIZATION t98_agent_a;
DO $$
BEGIN
    PERFORM opledger.op_begin('t98a-op-1', 't98a.tool', '{"n": 1}', conversation_id => 't98a-conversation');
    PERFORM opledger.op_mark_unknown('t98a-op-1', '{"t98a": "error"}', provider_ref => 't98a-provider-ref');
END
$$;
RESET SESSION AUTHORIZATION;
-- Tenant B's own: what its views may show (and so what the function may see)
SET LOCAL SESSION AUTHORIZATION t98_agent_b;
DO $$
BEGIN
    PERFORM opledger.op_begin('t98b-op-1', 't98b.tool', '{"n": 1}', conversation_id => 't98b-conversation');
    PERFORM opledger.op_mark_unknown('t98b-op-1', '{"t98b": "error"}', provider_ref => 't98b-provider-ref');
END
$$;
RESET SESSION AUTHORIZATION;

-- The views of the extension, from the catalog
CREATE TEMP TABLE t98_views ON COMMIT DROP AS
SELECT c.oid::regclass::text AS view, c.oid AS relid
  FROM pg_depend AS d
  JOIN pg_class AS c ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'opledger')
   AND c.relkind = 'v';
GRANT SELECT ON t98_views TO t98_b;
SELECT cmp_ok((SELECT count(*) FROM t98_views), '>=', 5::bigint,
              'the extension''s views are found in the catalog (unknown_operations, metrics, tool_stats, metrics_hourly, rejected_reuses, ...)');

SELECT is(ARRAY(SELECT v.view FROM t98_views AS v JOIN pg_class AS c ON c.oid = v.relid
                 WHERE NOT coalesce((SELECT o.option_value::boolean FROM pg_options_to_table(c.reloptions) AS o
                                      WHERE o.option_name = 'security_barrier'), false)
                 ORDER BY 1),
          '{}'::text[],
          'every view of the extension is security_barrier');

-- The functions the views call that see rows: only set-returning functions that filter by
-- tenant inside (what they return is already the caller's), and functions without arguments
-- from the rows (current_tenant). Built-in operators and aggregates run on filtered rows.
SELECT is(ARRAY(SELECT DISTINCT p.oid::regprocedure::text
                  FROM t98_views AS v
                  JOIN pg_rewrite AS r ON r.ev_class = v.relid
                  JOIN pg_depend AS d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                                     AND d.refclassid = 'pg_proc'::regclass
                  JOIN pg_proc AS p ON p.oid = d.refobjid
                 WHERE p.pronamespace = 'opledger'::regnamespace
                 ORDER BY 1),
          ARRAY['opledger._counts(boolean)', 'opledger._rejected_reuses()', 'opledger.current_tenant()'],
          'the views call no extension function but the tenant-filtering set-returning functions and current_tenant()');

-- The attack: tenant B's cheap function in pg_temp records every value it is shown
SET LOCAL SESSION AUTHORIZATION t98_b;
CREATE TEMP TABLE t98_seen (view text, value text);
CREATE FUNCTION pg_temp.t98_leak(vname text, v anyelement) RETURNS boolean
    LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    INSERT INTO pg_temp.t98_seen VALUES (vname, v::text);
    RETURN true;
END
$$;
-- Every column of every view readable by B: one cheap qual per column, so each could be
-- pushed into the view's scans and run before the tenant filter
CREATE FUNCTION pg_temp.t98_attack(rel regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    quals text;
    n bigint;
BEGIN
    SELECT string_agg(format('pg_temp.t98_leak(%L, v.%I)', rel::text, a.attname), ' AND ' ORDER BY a.attnum)
      INTO quals
      FROM pg_attribute AS a WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped;
    EXECUTE format('SELECT count(*) FROM %s AS v WHERE %s', rel, quals) INTO n;
    RETURN n;
END
$$;
DO $$
BEGIN
    PERFORM pg_temp.t98_attack(relid::regclass) FROM t98_views WHERE has_table_privilege(relid, 'SELECT');
END
$$;
RESET SESSION AUTHORIZATION;

SELECT is((SELECT count(*) FROM t98_views WHERE has_table_privilege('t98_b', relid, 'SELECT')),
          (SELECT count(*) FROM t98_views),
          'tenant B''s dashboard and reconciler may read every view (each is attacked below)');
SELECT ok(EXISTS (SELECT 1 FROM t98_seen WHERE view = 'opledger.unknown_operations' AND value = 't98b-op-1'),
          'unknown_operations: the caller''s function does see the caller''s own rows (the attack runs)');
SELECT is(ARRAY(SELECT DISTINCT view || ': ' || value FROM t98_seen WHERE value LIKE '%t98a%' ORDER BY 1),
          '{}'::text[],
          'a tenant-B function in WHERE on every view sees no tenant-A operation_id, conversation_id, provider_ref, error or tool');
SELECT is(ARRAY(SELECT DISTINCT view FROM t98_seen WHERE value LIKE '%t98a%' AND view = 'opledger.unknown_operations'),
          '{}'::text[],
          'unknown_operations: a tenant-B function in WHERE sees none of tenant A''s unknown operations');

SELECT * FROM finish();
ROLLBACK;
