-- The SQL surface of the extension opledger as the catalogs hold it: one line per
-- object or property, sorted, with names instead of OIDs and nothing that depends on
-- who owns the objects or on the order they were created in. Two databases hold the
-- same extension schema exactly when this prints the same lines in both
-- (tests/suites/33-upgrade.sh compares a ledger updated from each release with a fresh install).
--   psql -X -A -t -q -v ON_ERROR_STOP=1 -d DB -f tests/upgrade/schema_catalog.sql
--
-- What it covers: every object in schema opledger and every object pg_depend says
-- belongs to the extension (deptype 'e'), and for them
--   tables: kind, persistence, options, row-level security, replica identity, access
--     method, partitioning, inheritance;
--   columns, by name (type with typmod, NOT NULL, default, identity, generated,
--     collation): ALTER TABLE ADD COLUMN appends, so an updated table may hold the
--     same columns in another order;
--   column order, only where the SQL surface depends on it: composite types, and
--     tables whose row type an extension function takes or returns (op_succeed,
--     op_claim_reconciliation... return opledger.operations, register_tool returns
--     opledger.tools, so SELECT * FROM op_succeed(...) and positional readers of
--     those rows see that order). The other tables are compared by column name only;
--   constraints (pg_get_constraintdef, with their names: ON CONFLICT ON CONSTRAINT
--     uses them), indexes (pg_get_indexdef and flags), sequences (type, start,
--     increment, bounds, cache, cycle, owner column; not their position), functions
--     and procedures (pg_get_functiondef: language, volatility, strictness, SECURITY
--     DEFINER, SET clauses, cost, rows, parallel; aggregates by their parts), views
--     (pg_get_viewdef and options), triggers (pg_get_triggerdef and tgenabled), rules,
--     types (enum labels in order, composite attributes, domains, ranges), operators,
--     statistics objects, RLS policies, privileges (the ACLs of the schema, tables,
--     sequences, views, columns, functions and types, spelled out with the owner as
--     OWNER and a default ACL expanded, so an explicit and an implicit default compare
--     equal), default privileges, comments (obj_description / col_description of all
--     of the above), pg_extension_config_dump state (extconfig/extcondition by
--     table name) and extension membership.
-- Multi-line definitions are printed on one line with \n for each line break.
SET search_path = pg_catalog;
WITH
ext AS (SELECT e.oid, e.extname, e.extversion, e.extrelocatable, e.extnamespace, e.extconfig, e.extcondition
          FROM pg_extension AS e WHERE e.extname = 'opledger'),
ns AS (SELECT n.oid, n.nspname, n.nspowner, n.nspacl FROM pg_namespace AS n WHERE n.nspname = 'opledger'),
member AS (
    SELECT d.classid, d.objid, d.objsubid
      FROM pg_depend AS d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
),
-- Objects that live in a schema: the schema's, plus the members anywhere.
nsobj AS (
    SELECT 'pg_class'::regclass AS classid, c.oid AS objid FROM pg_class AS c
     WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind NOT IN ('i', 'I', 't', 'c')
    UNION ALL SELECT 'pg_proc'::regclass, p.oid FROM pg_proc AS p WHERE p.pronamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_type'::regclass, t.oid FROM pg_type AS t
     WHERE t.typnamespace IN (SELECT oid FROM ns)
       AND NOT EXISTS (SELECT FROM pg_type AS e WHERE e.typarray = t.oid)                 -- array types
       AND NOT EXISTS (SELECT FROM pg_class AS r WHERE r.oid = t.typrelid AND r.relkind <> 'c')  -- row types of relations
       AND NOT EXISTS (SELECT FROM pg_range AS g WHERE g.rngmultitypid = t.oid)          -- multiranges of ranges
    UNION ALL SELECT 'pg_operator'::regclass, o.oid FROM pg_operator AS o WHERE o.oprnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_opclass'::regclass, o.oid FROM pg_opclass AS o WHERE o.opcnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_opfamily'::regclass, o.oid FROM pg_opfamily AS o WHERE o.opfnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_collation'::regclass, o.oid FROM pg_collation AS o WHERE o.collnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_conversion'::regclass, o.oid FROM pg_conversion AS o WHERE o.connamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_statistic_ext'::regclass, o.oid FROM pg_statistic_ext AS o WHERE o.stxnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_ts_config'::regclass, o.oid FROM pg_ts_config AS o WHERE o.cfgnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_ts_dict'::regclass, o.oid FROM pg_ts_dict AS o WHERE o.dictnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_ts_parser'::regclass, o.oid FROM pg_ts_parser AS o WHERE o.prsnamespace IN (SELECT oid FROM ns)
    UNION ALL SELECT 'pg_ts_template'::regclass, o.oid FROM pg_ts_template AS o WHERE o.tmplnamespace IN (SELECT oid FROM ns)
),
allobj AS (
    SELECT classid, objid FROM nsobj
    UNION SELECT classid, objid FROM member WHERE objsubid = 0
),
rel AS (
    SELECT c.* FROM pg_class AS c
     WHERE c.oid IN (SELECT objid FROM allobj WHERE classid = 'pg_class'::regclass)
        OR (c.relkind = 'c' AND c.reltype IN (SELECT objid FROM allobj WHERE classid = 'pg_type'::regclass))
),
proc AS (SELECT p.* FROM pg_proc AS p WHERE p.oid IN (SELECT objid FROM allobj WHERE classid = 'pg_proc'::regclass)),
typ AS (SELECT t.* FROM pg_type AS t WHERE t.oid IN (SELECT objid FROM allobj WHERE classid = 'pg_type'::regclass)),
-- Row types the functions take or return: their column order is part of the surface.
signature_types AS (
    SELECT p.prorettype AS t FROM proc AS p
    UNION SELECT unnest(p.proargtypes::oid[]) FROM proc AS p
    UNION SELECT unnest(p.proallargtypes) FROM proc AS p
),
-- Sub-objects (for comments): columns, constraints, indexes, triggers, policies, rules.
subobj AS (
    SELECT 'pg_class'::regclass AS classid, i.indexrelid AS objid FROM pg_index AS i WHERE i.indrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'pg_constraint'::regclass, k.oid FROM pg_constraint AS k
     WHERE k.conrelid IN (SELECT oid FROM rel) OR k.contypid IN (SELECT oid FROM typ)
    UNION ALL SELECT 'pg_trigger'::regclass, g.oid FROM pg_trigger AS g WHERE g.tgrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'pg_policy'::regclass, y.oid FROM pg_policy AS y WHERE y.polrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'pg_rewrite'::regclass, w.oid FROM pg_rewrite AS w WHERE w.ev_class IN (SELECT oid FROM rel)
    UNION ALL SELECT 'pg_namespace'::regclass, oid FROM ns
    UNION ALL SELECT 'pg_extension'::regclass, oid FROM ext
    UNION ALL SELECT 'pg_class'::regclass, oid FROM rel
),
lines AS (
    -- The extension itself.
    SELECT format('extension %s: version %s, relocatable %s, schema %s', extname, extversion, extrelocatable,
                  extnamespace::regnamespace) AS line
      FROM ext
    -- Membership, and objects in the schema that are not members.
    UNION ALL SELECT 'member ' || pg_describe_object(m.classid, m.objid, m.objsubid) FROM member AS m
    UNION ALL SELECT 'not a member, in schema opledger: ' || pg_describe_object(o.classid, o.objid, 0)
      FROM nsobj AS o
     WHERE NOT EXISTS (SELECT FROM member AS m WHERE m.classid = o.classid AND m.objid = o.objid)
    -- pg_extension_config_dump: the tables and sequences whose rows pg_dump keeps.
    UNION ALL SELECT 'config dump ' || u.cfg::regclass::text
                     || CASE WHEN coalesce(u.cond, '') = '' THEN '' ELSE ' ' || u.cond END
      FROM ext, unnest(ext.extconfig, ext.extcondition) AS u(cfg, cond)
    -- The schema.
    UNION ALL SELECT 'schema ' || quote_ident(ns.nspname) FROM ns
    -- Tables (and materialized views, foreign tables).
    UNION ALL SELECT format('table %s: kind %s, persistence %s, options {%s}, row security %s, forced %s, '
                            'replica identity %s, access method %s, partition key %s, partition of %s, inherits {%s}',
                            c.oid::regclass, c.relkind, c.relpersistence,
                            array_to_string(ARRAY(SELECT o FROM unnest(c.reloptions) AS o ORDER BY o), ','),
                            c.relrowsecurity, c.relforcerowsecurity, c.relreplident,
                            coalesce((SELECT amname FROM pg_am WHERE oid = c.relam), '-'),
                            coalesce(pg_get_partkeydef(c.oid), '-'),
                            CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) ELSE '-' END,
                            array_to_string(ARRAY(SELECT h.inhparent::regclass::text FROM pg_inherits AS h
                                                   WHERE h.inhrelid = c.oid ORDER BY 1), ','))
      FROM rel AS c WHERE c.relkind IN ('r', 'p', 'f', 'm')
    -- Columns, by name.
    UNION ALL SELECT format('column %s.%s: %s%s%s%s%s%s', c.oid::regclass, quote_ident(a.attname),
                            format_type(a.atttypid, a.atttypmod),
                            CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
                            coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), ''),
                            CASE a.attidentity WHEN 'a' THEN ' generated always as identity'
                                               WHEN 'd' THEN ' generated by default as identity' ELSE '' END,
                            CASE WHEN a.attgenerated = 's' THEN ' generated stored' ELSE '' END,
                            CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                                 THEN ' collate ' || (SELECT quote_ident(collname) FROM pg_collation WHERE oid = a.attcollation)
                                 ELSE '' END)
      FROM rel AS c
      JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      JOIN pg_type AS t ON t.oid = a.atttypid
      LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE c.relkind IN ('r', 'p', 'f', 'm', 'v', 'c')
    -- Column order, where the SQL surface depends on it.
    UNION ALL SELECT format('column order %s: %s', c.oid::regclass,
                            (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute AS a
                              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
      FROM rel AS c WHERE c.relkind = 'c' OR c.reltype IN (SELECT t FROM signature_types)
    -- Constraints of tables and domains, by name.
    UNION ALL SELECT format('constraint %s %s: %s', coalesce(k.conrelid::regclass::text, k.contypid::regtype::text),
                            quote_ident(k.conname), pg_get_constraintdef(k.oid, true))
      FROM pg_constraint AS k
     WHERE k.conrelid IN (SELECT oid FROM rel) OR k.contypid IN (SELECT oid FROM typ)
    -- Indexes.
    UNION ALL SELECT format('index %s: %s; valid %s, ready %s, clustered %s, replica identity %s, options {%s}',
                            i.indexrelid::regclass, pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready,
                            i.indisclustered, i.indisreplident,
                            array_to_string(ARRAY(SELECT o FROM unnest(x.reloptions) AS o ORDER BY o), ','))
      FROM pg_index AS i JOIN pg_class AS x ON x.oid = i.indexrelid
     WHERE i.indrelid IN (SELECT oid FROM rel)
    -- Sequences (their definition, not their position).
    UNION ALL SELECT format('sequence %s: %s start %s increment %s min %s max %s cache %s cycle %s, persistence %s, owned by %s',
                            s.seqrelid::regclass, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement,
                            s.seqmin, s.seqmax, s.seqcache, s.seqcycle, c.relpersistence,
                            coalesce((SELECT d.refobjid::regclass::text || '.' || quote_ident(a.attname)
                                        FROM pg_depend AS d
                                        JOIN pg_attribute AS a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                                       WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid
                                         AND d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0
                                         AND d.deptype IN ('a', 'i')), '-'))
      FROM pg_sequence AS s JOIN rel AS c ON c.oid = s.seqrelid
    -- Views.
    UNION ALL SELECT format('view %s: options {%s} %s', c.oid::regclass,
                            array_to_string(ARRAY(SELECT o FROM unnest(c.reloptions) AS o ORDER BY o), ','),
                            replace(pg_get_viewdef(c.oid, true), E'\n', '\n'))
      FROM rel AS c WHERE c.relkind IN ('v', 'm')
    -- Rules other than views' own.
    UNION ALL SELECT format('rule %s %s: %s', w.ev_class::regclass, quote_ident(w.rulename),
                            replace(pg_get_ruledef(w.oid, true), E'\n', '\n'))
      FROM pg_rewrite AS w WHERE w.ev_class IN (SELECT oid FROM rel) AND w.rulename <> '_RETURN'
    -- Triggers (not the internal ones of foreign keys) and whether they fire.
    UNION ALL SELECT format('trigger %s %s: %s; enabled %s', g.tgrelid::regclass, quote_ident(g.tgname),
                            pg_get_triggerdef(g.oid, true), g.tgenabled)
      FROM pg_trigger AS g WHERE g.tgrelid IN (SELECT oid FROM rel) AND NOT g.tgisinternal
    -- Row-level security policies.
    UNION ALL SELECT format('policy %s.%s %s: %s, roles %s, command %s, using (%s), with check (%s)',
                            quote_ident(p.schemaname), quote_ident(p.tablename), quote_ident(p.policyname), p.permissive,
                            array_to_string(ARRAY(SELECT r FROM unnest(p.roles) AS r ORDER BY r), ','), p.cmd,
                            coalesce(p.qual, ''), coalesce(p.with_check, ''))
      FROM pg_policies AS p
     WHERE (quote_ident(p.schemaname) || '.' || quote_ident(p.tablename))::regclass IN (SELECT oid FROM rel)
    -- Functions and procedures (the whole definition), and aggregates by their parts.
    UNION ALL SELECT format('function %s: %s', p.oid::regprocedure, replace(pg_get_functiondef(p.oid), E'\n', '\n'))
      FROM proc AS p WHERE p.prokind IN ('f', 'p', 'w')
    UNION ALL SELECT format('aggregate %s: kind %s, transition %s, state %s, final %s, combine %s, initial %s, sort operator %s, '
                            'parallel %s, strict %s',
                            p.oid::regprocedure, g.aggkind, g.aggtransfn::regprocedure, format_type(g.aggtranstype, NULL),
                            g.aggfinalfn, g.aggcombinefn, coalesce(g.agginitval, '-'), g.aggsortop::regoperator,
                            p.proparallel, p.proisstrict)
      FROM proc AS p JOIN pg_aggregate AS g ON g.aggfnoid = p.oid
    -- Types.
    UNION ALL SELECT format('type %s: %s', t.oid::regtype,
                            CASE t.typtype
                                WHEN 'e' THEN 'enum (' || array_to_string(ARRAY(SELECT quote_literal(l.enumlabel) FROM pg_enum AS l
                                                                                  WHERE l.enumtypid = t.oid ORDER BY l.enumsortorder), ', ') || ')'
                                WHEN 'c' THEN 'composite (attributes: see column and column order)'
                                WHEN 'd' THEN 'domain over ' || format_type(t.typbasetype, t.typtypmod)
                                              || CASE WHEN t.typnotnull THEN ' not null' ELSE '' END
                                              || coalesce(' default ' || t.typdefault, '')
                                WHEN 'r' THEN (SELECT format('range of %s, opclass %s, canonical %s, subdiff %s', format_type(g.rngsubtype, NULL),
                                                             (SELECT opcname FROM pg_opclass WHERE oid = g.rngsubopc),
                                                             g.rngcanonical, g.rngsubdiff)
                                                 FROM pg_range AS g WHERE g.rngtypid = t.oid)
                                ELSE format('type %s, input %s, output %s, length %s', t.typtype, t.typinput, t.typoutput, t.typlen)
                            END)
      FROM typ AS t
    -- Operators.
    UNION ALL SELECT format('operator %s: function %s, commutator %s, negator %s, restrict %s, join %s',
                            o.oid::regoperator, o.oprcode, o.oprcom::regoperator, o.oprnegate::regoperator, o.oprrest, o.oprjoin)
      FROM pg_operator AS o WHERE o.oid IN (SELECT objid FROM allobj WHERE classid = 'pg_operator'::regclass)
    -- Statistics objects.
    UNION ALL SELECT 'statistics ' || pg_get_statisticsobjdef(x.oid)
      FROM pg_statistic_ext AS x WHERE x.oid IN (SELECT objid FROM allobj WHERE classid = 'pg_statistic_ext'::regclass)
    -- Privileges. The owner is OWNER; a NULL ACL is the default it stands for.
    UNION ALL SELECT format('privileges %s %s: %s', CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view'
                                                                   WHEN 'm' THEN 'materialized view' ELSE 'table' END,
                            c.oid::regclass,
                            (SELECT coalesce(string_agg(g, ', ' ORDER BY g), 'none') FROM (
                                SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = c.relowner THEN 'OWNER'
                                            ELSE pg_get_userbyid(a.grantee) END
                                       || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' grantable' ELSE '' END
                                       || ' from ' || CASE WHEN a.grantor = c.relowner THEN 'OWNER' ELSE pg_get_userbyid(a.grantor) END AS g
                                  FROM aclexplode(coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) AS a) AS x))
      FROM rel AS c WHERE c.relkind IN ('r', 'p', 'f', 'm', 'v', 'S')
    UNION ALL SELECT format('privileges column %s.%s: %s', c.oid::regclass, quote_ident(att.attname),
                            (SELECT string_agg(g, ', ' ORDER BY g) FROM (
                                SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = c.relowner THEN 'OWNER'
                                            ELSE pg_get_userbyid(a.grantee) END
                                       || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' grantable' ELSE '' END
                                       || ' from ' || CASE WHEN a.grantor = c.relowner THEN 'OWNER' ELSE pg_get_userbyid(a.grantor) END AS g
                                  FROM aclexplode(att.attacl) AS a) AS x))
      FROM rel AS c JOIN pg_attribute AS att ON att.attrelid = c.oid AND att.attnum > 0 AND att.attacl IS NOT NULL
    UNION ALL SELECT format('privileges %s %s: %s', CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' ELSE 'function' END,
                            p.oid::regprocedure,
                            (SELECT coalesce(string_agg(g, ', ' ORDER BY g), 'none') FROM (
                                SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = p.proowner THEN 'OWNER'
                                            ELSE pg_get_userbyid(a.grantee) END
                                       || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' grantable' ELSE '' END
                                       || ' from ' || CASE WHEN a.grantor = p.proowner THEN 'OWNER' ELSE pg_get_userbyid(a.grantor) END AS g
                                  FROM aclexplode(coalesce(p.proacl, acldefault('f'::"char", p.proowner))) AS a) AS x))
      FROM proc AS p
    UNION ALL SELECT format('privileges type %s: %s', t.oid::regtype,
                            (SELECT coalesce(string_agg(g, ', ' ORDER BY g), 'none') FROM (
                                SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = t.typowner THEN 'OWNER'
                                            ELSE pg_get_userbyid(a.grantee) END
                                       || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' grantable' ELSE '' END
                                       || ' from ' || CASE WHEN a.grantor = t.typowner THEN 'OWNER' ELSE pg_get_userbyid(a.grantor) END AS g
                                  FROM aclexplode(coalesce(t.typacl, acldefault('T'::"char", t.typowner))) AS a) AS x))
      FROM typ AS t
    UNION ALL SELECT format('privileges schema %s: %s', quote_ident(ns.nspname),
                            (SELECT coalesce(string_agg(g, ', ' ORDER BY g), 'none') FROM (
                                SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = ns.nspowner THEN 'OWNER'
                                            ELSE pg_get_userbyid(a.grantee) END
                                       || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' grantable' ELSE '' END
                                       || ' from ' || CASE WHEN a.grantor = ns.nspowner THEN 'OWNER' ELSE pg_get_userbyid(a.grantor) END AS g
                                  FROM aclexplode(coalesce(ns.nspacl, acldefault('n'::"char", ns.nspowner))) AS a) AS x))
      FROM ns
    UNION ALL SELECT format('default privileges in schema %s for objects of %s: %s', quote_ident(ns.nspname),
                            CASE WHEN d.defaclrole = ns.nspowner THEN 'OWNER' ELSE pg_get_userbyid(d.defaclrole) END,
                            d.defaclobjtype::text || ' ' || d.defaclacl::text)
      FROM pg_default_acl AS d JOIN ns ON ns.oid = d.defaclnamespace
    -- Comments on all of the above (columns by name).
    UNION ALL SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid),
                            replace(d.description, E'\n', '\n'))
      FROM pg_description AS d
     WHERE (d.classoid, d.objoid) IN (SELECT classid, objid FROM allobj UNION ALL SELECT classid, objid FROM subobj)
)
SELECT line FROM lines ORDER BY line COLLATE "C";
