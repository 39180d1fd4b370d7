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
