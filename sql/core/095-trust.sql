-- Last check of every install and upgrade (extension or `pgcite install`): nothing stored in schema rag
-- (column defaults and generated columns, constraints, indexes, policies, views, triggers, function
-- signatures) may depend on a function, operator, type, operator class or collation that the installing
-- database owner could have written: outside pg_catalog and rag, each must belong to a superuser (the objects of
-- vector, pg_trgm and fuzzystrmatch do, however they were created) or, for `pgcite install`, to a role the
-- installing role is a member of. Such code would run as pgcite_owner, or as a superuser restoring a dump.
DO $trust$
DECLARE
    in_extension boolean := EXISTS (SELECT FROM pg_catalog.pg_extension AS e WHERE e.extname = 'pgcite');
    bad text;
BEGIN
    WITH rel AS (
        SELECT c.oid FROM pg_catalog.pg_class AS c WHERE c.relnamespace = 'rag'::regnamespace
    ),

    dependent AS (
        SELECT d.refclassid, d.refobjid
        FROM pg_catalog.pg_depend AS d
        WHERE d.deptype = 'n' AND (
            (d.classid = 'pg_catalog.pg_class'::regclass AND d.objid IN (SELECT rel.oid FROM rel))
            OR (d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid IN (
                SELECT a.oid FROM pg_catalog.pg_attrdef AS a WHERE a.adrelid IN (SELECT rel.oid FROM rel)))
            OR (d.classid = 'pg_catalog.pg_constraint'::regclass AND d.objid IN (
                SELECT k.oid FROM pg_catalog.pg_constraint AS k
                WHERE k.conrelid IN (SELECT rel.oid FROM rel) OR k.connamespace = 'rag'::regnamespace))
            OR (d.classid = 'pg_catalog.pg_policy'::regclass AND d.objid IN (
                SELECT p.oid FROM pg_catalog.pg_policy AS p WHERE p.polrelid IN (SELECT rel.oid FROM rel)))
            OR (d.classid = 'pg_catalog.pg_trigger'::regclass AND d.objid IN (
                SELECT t.oid FROM pg_catalog.pg_trigger AS t WHERE t.tgrelid IN (SELECT rel.oid FROM rel)))
            OR (d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid IN (
                SELECT w.oid FROM pg_catalog.pg_rewrite AS w WHERE w.ev_class IN (SELECT rel.oid FROM rel)))
            OR (d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid IN (
                SELECT f.oid FROM pg_catalog.pg_proc AS f WHERE f.pronamespace = 'rag'::regnamespace))
            OR (d.classid = 'pg_catalog.pg_type'::regclass AND d.objid IN (
                SELECT y.oid FROM pg_catalog.pg_type AS y WHERE y.typnamespace = 'rag'::regnamespace))
        )
    ),

    referenced AS (
        SELECT x.refclassid, x.refobjid, o.nsp, o.owner
        FROM dependent AS x
        CROSS JOIN LATERAL (
            SELECT f.pronamespace AS nsp, f.proowner AS owner FROM pg_catalog.pg_proc AS f
            WHERE x.refclassid = 'pg_catalog.pg_proc'::regclass AND f.oid = x.refobjid
            UNION ALL
            SELECT p.oprnamespace, p.oprowner FROM pg_catalog.pg_operator AS p
            WHERE x.refclassid = 'pg_catalog.pg_operator'::regclass AND p.oid = x.refobjid
            UNION ALL
            SELECT y.typnamespace, y.typowner FROM pg_catalog.pg_type AS y
            WHERE x.refclassid = 'pg_catalog.pg_type'::regclass AND y.oid = x.refobjid
            UNION ALL
            SELECT c.opcnamespace, c.opcowner FROM pg_catalog.pg_opclass AS c
            WHERE x.refclassid = 'pg_catalog.pg_opclass'::regclass AND c.oid = x.refobjid
            UNION ALL
            SELECT l.collnamespace, l.collowner FROM pg_catalog.pg_collation AS l
            WHERE x.refclassid = 'pg_catalog.pg_collation'::regclass AND l.oid = x.refobjid
        ) AS o
    )

    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.pg_describe_object(r.refclassid, r.refobjid, 0), ', ')
    INTO bad
    FROM referenced AS r
    INNER JOIN pg_catalog.pg_roles AS owner_role ON owner_role.oid = r.owner
    WHERE r.nsp NOT IN ('pg_catalog'::regnamespace, 'rag'::regnamespace)
        AND NOT owner_role.rolsuper
        AND (in_extension OR NOT pg_catalog.pg_has_role(current_user, r.owner, 'MEMBER'));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'pgcite''s objects would call code that the database''s users wrote: ' || pg_catalog.left(bad, 500),
            DETAIL = 'Outside pg_catalog, pgcite may only use objects of vector, pg_trgm and fuzzystrmatch, which '
                'belong to a superuser. Objects like these, in schema public, change what pgcite''s names mean.',
            HINT = 'Drop or rename these objects (they shadow pgcite''s choice), then install again.';
    END IF;
END
$trust$;
