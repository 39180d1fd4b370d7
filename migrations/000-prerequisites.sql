-- Everything after this resolves names in pg_catalog only (and pg_temp for relations and types): CREATE
-- EXTENSION puts rag and public first, and public belongs to the database's owner, who could add a better
-- matching function or operator there (docs/security.md). References to pgvector, pg_trgm and pgcite objects
-- are schema-qualified. LOCAL: CREATE EXTENSION restores the setting after its script, as a transaction does.
SET LOCAL search_path = pg_catalog, pg_temp;
-- The installing session chooses how string literals are read: with standard_conforming_strings off, '\_%' in a
-- function body means '_%' and regular expressions lose their escapes (rag._apply_grants then granted every
-- public function to the wrong role). Function bodies and DO blocks are parsed when they run, after this.
SET LOCAL standard_conforming_strings = on;

-- pgcite refers to the objects of pgvector, pg_trgm and fuzzystrmatch as public.* (PostgreSQL 15 has
-- no @extschema:name@), so they must live in schema public, where CREATE EXTENSION ... CASCADE puts
-- them by default.
DO $check$
DECLARE
    misplaced text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (in schema %s)', e.extname, n.nspname), ', ')
    INTO misplaced
    FROM pg_catalog.pg_extension AS e
    INNER JOIN pg_catalog.pg_namespace AS n ON n.oid = e.extnamespace
    WHERE e.extname IN ('vector', 'pg_trgm', 'fuzzystrmatch') AND n.nspname <> 'public';
    IF misplaced IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'pgcite needs the extensions vector, pg_trgm and fuzzystrmatch in schema public: ' || misplaced,
            HINT = 'ALTER EXTENSION <name> SET SCHEMA public; for each extension listed.';
    END IF;
END
$check$;

-- Safe to run for a database owner who is not a superuser (trusted extension, `pgcite install`):
-- docs/security.md "Installing without a superuser". Checked before anything is created, on every install and
-- upgrade. In CREATE EXTENSION the pg_extension row of pgcite already exists while its script runs.
DO $trust$
DECLARE
    in_extension boolean := EXISTS (SELECT FROM pg_catalog.pg_extension AS e WHERE e.extname = 'pgcite');
    bad text;
BEGIN
    -- pgvector >= 0.8 (iterative index scans, the halfvec and sparsevec fixes pgcite relies on)
    IF NOT EXISTS (
        SELECT FROM pg_catalog.pg_extension AS e
        WHERE e.extname = 'vector'
            AND pg_catalog.string_to_array(pg_catalog.split_part(e.extversion, '-', 1), '.')::int[] >= '{0,8}'
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'pgcite needs the extension vector (pgvector) 0.8 or later in this database',
            HINT = 'CREATE EXTENSION vector; (or ALTER EXTENSION vector UPDATE;) as a role allowed to.';
    END IF;
    -- cluster-wide roles that already exist are adopted, so they must be what pgcite would have created:
    -- no role that can log in or has a power beyond its grants, and nobody able to act as pgcite_owner (which
    -- owns every rag table of every database) but superusers and, for `pgcite install`, the installing role.
    SELECT pg_catalog.string_agg(r.rolname, ', ' ORDER BY r.rolname) INTO bad
    FROM pg_catalog.pg_roles AS r
    WHERE r.rolname IN ('pgcite_reader', 'pgcite_writer', 'pgcite_admin', 'pgcite_owner')
        AND (r.rolsuper OR r.rolcanlogin OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'pgcite refuses roles it did not create as they must be: ' || bad,
            DETAIL = 'pgcite_reader, pgcite_writer, pgcite_admin and pgcite_owner must be NOLOGIN, NOSUPERUSER, '
                'NOCREATEROLE, NOCREATEDB, NOREPLICATION and NOBYPASSRLS.',
            HINT = 'A superuser checks who made them and fixes them (ALTER ROLE ... NOLOGIN ...) or drops them.';
    END IF;
    -- nor may they be members of any role but each other as pgcite grants them (pgcite_reader in pgcite_writer
    -- in pgcite_admin): pg_read_server_files, pg_read_all_data, ... granted to pgcite_reader would go to every
    -- tenant reader of every database
    SELECT pg_catalog.string_agg(pg_catalog.format('%s is a member of %s', m.rolname, g.rolname), ', '
        ORDER BY m.rolname, g.rolname) INTO bad
    FROM pg_catalog.pg_auth_members AS a
    INNER JOIN pg_catalog.pg_roles AS m ON m.oid = a.member
    INNER JOIN pg_catalog.pg_roles AS g ON g.oid = a.roleid
    WHERE m.rolname IN ('pgcite_reader', 'pgcite_writer', 'pgcite_admin', 'pgcite_owner')
        AND (m.rolname, g.rolname) NOT IN (('pgcite_writer', 'pgcite_reader'), ('pgcite_admin', 'pgcite_writer'));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'pgcite refuses roles it did not create as they must be: ' || bad,
            DETAIL = 'pgcite''s roles are members of nothing but each other (pgcite_reader in pgcite_writer in '
                'pgcite_admin); what they are members of, every tenant role of every database would be.',
            HINT = 'A superuser checks who granted it and revokes it (REVOKE <role> FROM pgcite_...;).';
    END IF;
    -- default privileges of the role that creates pgcite's objects (the superuser running CREATE EXTENSION, the
    -- role running `pgcite install`) would grant rights on them that pgcite does not: UPDATE on the log's
    -- sequence (setval: every ask fails), SELECT on the embeddings, ...
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (%s)', CASE d.defaclobjtype WHEN 'r' THEN 'tables'
        WHEN 'S' THEN 'sequences' WHEN 'f' THEN 'functions' WHEN 'T' THEN 'types' WHEN 'n' THEN 'schemas'
        ELSE d.defaclobjtype::text END, coalesce(d.defaclacl::text, '')), ', ') INTO bad
    FROM pg_catalog.pg_default_acl AS d
    WHERE d.defaclrole = (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user)
        AND (d.defaclnamespace = 0 OR d.defaclnamespace
            = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = 'rag'));
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = pg_catalog.format('role %s has default privileges that would apply to pgcite''s objects: %s',
                current_user, bad),
            DETAIL = 'pgcite grants exactly what its model needs (docs/security.md); default privileges would add '
                'grants to every table, sequence, function or schema it creates.',
            HINT = pg_catalog.format('Look at \ddp; then ALTER DEFAULT PRIVILEGES FOR ROLE %I REVOKE ... (or install '
                'as another role).', current_user);
    END IF;
    SELECT pg_catalog.string_agg(r.rolname, ', ' ORDER BY r.rolname) INTO bad
    FROM pg_catalog.pg_roles AS r
    WHERE EXISTS (SELECT FROM pg_catalog.pg_roles AS o WHERE o.rolname = 'pgcite_owner')
        AND r.rolname <> 'pgcite_owner' AND NOT r.rolsuper
        AND pg_catalog.pg_has_role(r.oid, 'pgcite_owner', 'MEMBER')
        AND (in_extension OR r.rolname <> current_user);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'roles that can act as pgcite_owner (the owner of every rag table): ' || bad,
            DETAIL = 'pgcite_owner owns the tables of pgcite in every database of the cluster; only superusers (and '
                'the role running `pgcite install`) may be members of it.',
            HINT = 'REVOKE pgcite_owner FROM <role>; as a superuser, or install with that role (`pgcite install`).';
    END IF;
    -- A schema rag made beforehand keeps the privileges its maker granted when CREATE EXTENSION uses it (006 only
    -- hands it to the superuser): with CREATE granted to PUBLIC, a database owner added rag._setting(text,
    -- integer), a better match for a call in rag._check_bytes, and pgcite_owner ran it (and wrote python_path).
    -- Only its owner and pgcite_owner may hold more than USAGE, and USAGE only pgcite_reader and pg_database_owner.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s to %s', a.privilege_type, coalesce(g.rolname, 'PUBLIC')), ', '
        ORDER BY g.rolname, a.privilege_type) INTO bad
    FROM pg_catalog.pg_namespace AS n
    CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) AS a
    LEFT JOIN pg_catalog.pg_roles AS g ON g.oid = a.grantee
    WHERE n.nspname = 'rag' AND a.grantee <> n.nspowner AND g.rolname IS DISTINCT FROM 'pgcite_owner'
        AND NOT (coalesce(g.rolname, '') IN ('pgcite_reader', 'pg_database_owner') AND a.privilege_type = 'USAGE');
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'schema rag grants privileges that pgcite does not: ' || bad,
            DETAIL = 'Whoever may create objects in schema rag chooses the code pgcite''s own functions call.',
            HINT = 'A superuser checks who granted them and what is in schema rag, then REVOKE ... ON SCHEMA rag.';
    END IF;
    -- CREATE EXTENSION uses a schema rag that already exists: nothing may be in it yet that is not pgcite's
    -- (a function or operator placed there would be called by pgcite's own code)
    IF in_extension THEN
        SELECT pg_catalog.string_agg(x.what, ', ' ORDER BY x.what) INTO bad
        FROM (
            SELECT pg_catalog.pg_describe_object('pg_catalog.pg_class'::regclass, c.oid, 0) AS what, c.oid,
                'pg_catalog.pg_class'::regclass AS cls
            FROM pg_catalog.pg_class AS c WHERE c.relnamespace = 'rag'::regnamespace
                AND c.relkind IN ('r', 'v', 'm', 'f', 'p', 'S', 'c')
            UNION ALL
            SELECT pg_catalog.pg_describe_object('pg_catalog.pg_proc'::regclass, p.oid, 0), p.oid,
                'pg_catalog.pg_proc'::regclass
            FROM pg_catalog.pg_proc AS p WHERE p.pronamespace = 'rag'::regnamespace
            UNION ALL
            SELECT pg_catalog.pg_describe_object('pg_catalog.pg_operator'::regclass, o.oid, 0), o.oid,
                'pg_catalog.pg_operator'::regclass
            FROM pg_catalog.pg_operator AS o WHERE o.oprnamespace = 'rag'::regnamespace
            UNION ALL
            SELECT pg_catalog.pg_describe_object('pg_catalog.pg_type'::regclass, t.oid, 0), t.oid,
                'pg_catalog.pg_type'::regclass
            FROM pg_catalog.pg_type AS t WHERE t.typnamespace = 'rag'::regnamespace AND t.typtype IN ('d', 'e', 'r', 'm')
        ) AS x
        WHERE NOT EXISTS (
            SELECT FROM pg_catalog.pg_depend AS d
            INNER JOIN pg_catalog.pg_extension AS e ON e.oid = d.refobjid
            WHERE d.classid = x.cls AND d.objid = x.oid AND d.deptype = 'e'
                AND e.extname IN ('pgcite', 'pgcite_python')  -- pgcite_python: superusers install it
                AND d.refclassid = 'pg_catalog.pg_extension'::regclass
        )
            AND NOT EXISTS (  -- the row types of pgcite's own tables and composite types
                SELECT FROM pg_catalog.pg_depend AS d
                WHERE d.classid = x.cls AND d.objid = x.oid AND d.deptype = 'i'
            );
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = 'schema rag holds objects that are not part of extension pgcite or pgcite_python: '
                    || pg_catalog.left(bad, 500),
                HINT = 'Was pgcite installed here with `pgcite install`? Then keep using it (pgcite install upgrades), '
                    'or run `pgcite uninstall` first. Otherwise move or drop these objects.';
        END IF;
    END IF;
END
$trust$;
