-- 0.4.0: the core extension is trusted (a database owner may CREATE EXTENSION pgcite; docs/security.md).
-- CREATE EXTENSION creates the schema rag as the calling role, so after a trusted install a database owner
-- owned it and could add, rename or drop objects in the schema pgcite_owner's functions call into. Inside
-- CREATE EXTENSION (run by a superuser: the bootstrap superuser when trusted) the schema passes to that
-- superuser. `pgcite install` leaves it to the installing role, which also administers pgcite_owner there.
DO $schema$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension AS e WHERE e.extname = 'pgcite')
        AND (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) THEN
        ALTER SCHEMA rag OWNER TO CURRENT_USER;
    END IF;
END
$schema$;
