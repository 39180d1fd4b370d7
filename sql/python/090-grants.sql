-- The internal functions this extension added follow the same grants as the core's.
SELECT rag._apply_grants();
-- The worker's functions are pgcite_owner's only, whatever rag._apply_grants this database has: pgcite_python
-- updated before pgcite (0.8.0's rag._apply_grants gives the functions it does not know to pgcite_writer) would
-- otherwise let a writer hand PL/Python an unchecked text (security review of session 18).
REVOKE ALL ON FUNCTION rag._embed_begin(text), rag._embed_end(text)
FROM PUBLIC, pgcite_reader, pgcite_writer, pgcite_admin, pg_database_owner;
GRANT EXECUTE ON FUNCTION rag._embed_begin(text), rag._embed_end(text) TO pgcite_owner;
