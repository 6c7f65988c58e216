-- pg_temp.value_as(role, query): the query's one value as that role sees it, or
-- 'error SQLSTATE: message' when it fails (the role is reset either way). Included by
-- the pgTAP files that check what one role may do and see (\ir include/value_as.sql).
CREATE FUNCTION pg_temp.value_as(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE q INTO v;
    RESET ROLE;
    RETURN v;
EXCEPTION WHEN OTHERS THEN
    RETURN 'error ' || SQLSTATE || ': ' || SQLERRM;
END
$$;
