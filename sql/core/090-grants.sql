-- Internal functions (rag._*) are not for PUBLIC: readers get what asking needs, writers what storing needs.
-- pgcite_python calls this again for the functions it adds.
CREATE OR REPLACE FUNCTION rag._apply_grants()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    f regprocedure;
    n integer := 0;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'rag'::regnamespace AND p.proname LIKE '\_%' AND p.prokind = 'f'
            AND p.prorettype <> 'trigger'::regtype AND p.proname <> '_apply_grants'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        IF f::text LIKE 'rag._store_version(%' OR f::text LIKE 'rag._claim_model(%' THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pgcite_writer', f);
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO pgcite_reader', f);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$fn$;
REVOKE ALL ON FUNCTION rag._apply_grants() FROM PUBLIC;
COMMENT ON FUNCTION rag._apply_grants() IS
'Internal: revokes rag._* functions from PUBLIC and grants them to pgcite_reader (or pgcite_writer).';

SELECT rag._apply_grants();
