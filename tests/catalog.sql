-- A text snapshot of everything the agent_memory extension puts in a database's catalog, one line
-- per fact, sorted, with no OIDs: the upgrade tier (tests/upgrade.sh) compares the snapshot of a
-- database upgraded with ALTER EXTENSION ... UPDATE against one of a fresh install.
\pset format unaligned
\pset tuples_only on
\pset footer off
WITH ext AS (SELECT oid, extnamespace FROM pg_catalog.pg_extension WHERE extname = 'agent_memory'),
acl(kind, name, entries) AS (
    SELECT 'table', c.oid::regclass::text, c.relacl FROM pg_catalog.pg_class c, ext WHERE c.relnamespace = ext.extnamespace
    UNION ALL
    SELECT 'function', p.oid::regprocedure::text, p.proacl FROM pg_catalog.pg_proc p, ext WHERE p.pronamespace = ext.extnamespace
    UNION ALL
    SELECT 'schema', n.nspname, n.nspacl FROM pg_catalog.pg_namespace n, ext WHERE n.oid = ext.extnamespace
),
facts(line) AS (
    -- The members of the extension.
    SELECT 'member ' || pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
      FROM pg_catalog.pg_depend d, ext WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
    UNION ALL
    -- What pg_dump keeps of the extension's tables.
    SELECT 'dumped ' || cfg::regclass::text || ' ' || coalesce(cond, '')
      FROM ext, pg_catalog.pg_extension e,
           LATERAL unnest(e.extconfig, e.extcondition) AS u(cfg, cond)
     WHERE e.oid = ext.oid
    UNION ALL
    -- Relations: kind, options, row-level security, comment.
    SELECT pg_catalog.format('relation %s kind=%s options=%s rls=%s force_rls=%s comment=%s',
                             c.oid::regclass, c.relkind, c.reloptions, c.relrowsecurity, c.relforcerowsecurity,
                             pg_catalog.obj_description(c.oid, 'pg_class'))
      FROM pg_catalog.pg_class c, ext WHERE c.relnamespace = ext.extnamespace
    UNION ALL
    -- Columns, in their order.
    SELECT pg_catalog.format('column %s %s %s %s not_null=%s identity=%s generated=%s default=%s comment=%s',
                             a.attrelid::regclass, a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod),
                             a.attnotnull, a.attidentity, a.attgenerated, pg_catalog.pg_get_expr(ad.adbin, ad.adrelid),
                             pg_catalog.col_description(a.attrelid, a.attnum))
      FROM pg_catalog.pg_attribute a
      JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
      JOIN ext ON c.relnamespace = ext.extnamespace
      LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
     WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')
    UNION ALL
    SELECT pg_catalog.format('constraint %s %s %s', c.conrelid::regclass, c.conname, pg_catalog.pg_get_constraintdef(c.oid))
      FROM pg_catalog.pg_constraint c, ext WHERE c.connamespace = ext.extnamespace
    UNION ALL
    SELECT 'index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
      FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid JOIN ext ON c.relnamespace = ext.extnamespace
    UNION ALL
    SELECT 'trigger ' || pg_catalog.pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
      FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid JOIN ext ON c.relnamespace = ext.extnamespace
     WHERE NOT t.tgisinternal
    UNION ALL
    SELECT pg_catalog.format('policy %s.%s %s permissive=%s roles=%s using=%s check=%s',
                             p.schemaname, p.tablename, p.policyname, p.permissive, p.roles, p.qual, p.with_check)
      FROM pg_catalog.pg_policies p, ext WHERE p.schemaname = (SELECT nspname FROM pg_catalog.pg_namespace WHERE oid = ext.extnamespace)
    UNION ALL
    SELECT 'view ' || c.oid::regclass::text || ' ' || pg_catalog.pg_get_viewdef(c.oid)
      FROM pg_catalog.pg_class c, ext WHERE c.relnamespace = ext.extnamespace AND c.relkind = 'v'
    UNION ALL
    SELECT pg_catalog.format('sequence %s %s start=%s inc=%s min=%s max=%s cache=%s cycle=%s',
                             s.seqrelid::regclass, pg_catalog.format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement,
                             s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
      FROM pg_catalog.pg_sequence s JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid JOIN ext ON c.relnamespace = ext.extnamespace
    UNION ALL
    -- Functions: the whole definition (arguments, result, attributes, settings, library symbol).
    SELECT 'function ' || pg_catalog.pg_get_functiondef(p.oid) || ' comment=' || coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '')
      FROM pg_catalog.pg_proc p, ext WHERE p.pronamespace = ext.extnamespace
    UNION ALL
    -- Privileges, one grant per line.
    SELECT pg_catalog.format('grant %s %s to %s by %s: %s%s', acl.kind, acl.name,
                             CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(x.grantee) END,
                             pg_catalog.pg_get_userbyid(x.grantor), x.privilege_type,
                             CASE WHEN x.is_grantable THEN ' with grant option' ELSE '' END)
      FROM acl, LATERAL pg_catalog.aclexplode(acl.entries) x WHERE acl.entries IS NOT NULL
    UNION ALL
    SELECT pg_catalog.format('default privileges %s', acl.name)
      FROM acl WHERE acl.entries IS NULL
    UNION ALL
    -- The roles the extension creates, and their memberships.
    SELECT pg_catalog.format('role %s login=%s super=%s inherit=%s createrole=%s createdb=%s bypassrls=%s member_of=%s',
                             r.rolname, r.rolcanlogin, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls,
                             (SELECT pg_catalog.array_agg(g.rolname ORDER BY g.rolname)
                                FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
                               WHERE m.member = r.oid))
      FROM pg_catalog.pg_roles r WHERE r.rolname LIKE 'agent\_memory\_%'
    UNION ALL
    -- The settings of the library.
    SELECT pg_catalog.format('setting %s %s %s %s', s.name, s.vartype, s.context, s.boot_val)
      FROM pg_catalog.pg_settings s WHERE s.name LIKE 'agent\_memory.%'
    UNION ALL
    SELECT 'extension version ' || e.extversion || ' relocatable=' || e.extrelocatable || ' schema=' || e.extnamespace::regnamespace::text
      FROM pg_catalog.pg_extension e, ext WHERE e.oid = ext.oid
)
SELECT line FROM facts ORDER BY line COLLATE "C";
