-- The client conformance corpus (tests/conformance/decisions.json) replayed against
-- the extension itself: for each case, its set-up calls, each op_begin's expected
-- decision, next_action, status and attempt, and then the op_begin a client would
-- make. The TypeScript and Python clients and the MCP gateway replay the same file
-- through their own code (tests/conformance/README.md). Run from the repository root.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
\set corpus `cat tests/conformance/decisions.json`
CREATE TEMP TABLE corpus AS SELECT :'corpus'::jsonb AS doc;

-- One test per op_begin in the corpus, and one per case that no step is unknown.
SELECT plan((SELECT (count(*) FILTER (WHERE s->>'do' = 'begin'))::int + 2 * jsonb_array_length(doc->'cases')
               FROM corpus LEFT JOIN LATERAL jsonb_array_elements(doc->'cases') c ON true
               LEFT JOIN LATERAL jsonb_array_elements(c->'steps') s ON true
              GROUP BY doc));

CREATE FUNCTION pg_temp.replay() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    c jsonb;
    s jsonb;
    n int := 0;
    id text;
    tool text;
    t jsonb;
    got jsonb;
    unknown_steps text[];
BEGIN
    FOR c IN SELECT jsonb_array_elements(doc->'cases') FROM corpus LOOP
        n := n + 1;
        id := 'conformance-sql-' || n;
        tool := 'conformance_sql_' || n;
        t := c->'tool';
        PERFORM opledger.register_tool(tool, (t->>'effect')::opledger.tool_effect,
            max_attempts => coalesce((t->>'max_attempts')::int, 5),
            backoff_base => coalesce((t->>'backoff_base')::interval, '1 second'),
            backoff_max => coalesce((t->>'backoff_max')::interval, '5 minutes'));
        unknown_steps := '{}';
        FOR s IN SELECT jsonb_array_elements(c->'steps') LOOP
            CASE s->>'do'
            WHEN 'begin' THEN
                SELECT jsonb_build_object('decision', b.decision, 'next_action', b.next_action,
                                          'status', b.status, 'attempt', b.attempt)
                  INTO got
                  FROM opledger.op_begin(id, tool, '{"case": true}', worker => s->>'worker',
                                         lease => (s->>'lease')::interval) b;
                RETURN NEXT is(got @> (s->'expect'), true,
                               format('%s: set-up op_begin answers %s (got %s)', c->>'name', s->'expect', got));
            WHEN 'succeed' THEN
                PERFORM opledger.op_succeed(id, s->'result', attempt => (s->>'attempt')::int);
            WHEN 'fail' THEN
                PERFORM opledger.op_fail(id, s->'error', coalesce((s->>'retryable')::boolean, false));
            WHEN 'mark_unknown' THEN
                PERFORM opledger.op_mark_unknown(id, s->'error');
            WHEN 'resolve' THEN
                PERFORM opledger.op_resolve(id, s->>'outcome', s->'result');
            WHEN 'approve' THEN
                PERFORM opledger.op_approve(id, s->>'approver');
            WHEN 'reject' THEN
                PERFORM opledger.op_reject(id, s->>'approver');
            WHEN 'sleep' THEN
                PERFORM pg_sleep((s->>'ms')::numeric / 1000);
            ELSE
                unknown_steps := unknown_steps || (s->>'do');
            END CASE;
        END LOOP;
        RETURN NEXT is(unknown_steps, '{}'::text[], format('%s: every step is one the runner knows', c->>'name'));
        SELECT jsonb_build_object('decision', b.decision, 'next_action', b.next_action,
                                  'status', b.status, 'attempt', b.attempt)
          INTO got
          FROM opledger.op_begin(id, tool, '{"case": true}') b;
        RETURN NEXT is(got, c->'expect', format('%s: %s', c->>'name', c->'expect'));
    END LOOP;
END
$$;
SELECT * FROM pg_temp.replay();

SELECT * FROM finish();
ROLLBACK;
