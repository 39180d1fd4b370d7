-- Parsing and chunking inside PostgreSQL (python_udfs/pgcite_udfs/chunking/).

CREATE OR REPLACE FUNCTION rag._parse(body text, format text, max_tokens integer, overlap integer)
RETURNS jsonb
LANGUAGE plpython3u
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.parse(plpy, GD, body, format, max_tokens, overlap)
$fn$;
COMMENT ON FUNCTION rag._parse(text, text, integer, integer) IS
'Internal (pgcite_owner only: rag._parsed checks the body first): parses a document: {format, title, '
'sections_found, empty_sections, chunks} or {error}.';

CREATE OR REPLACE FUNCTION rag._chunker_version()
RETURNS integer
LANGUAGE plpython3u
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import chunking
return chunking.CHUNKER_VERSION
$fn$;
COMMENT ON FUNCTION rag._chunker_version() IS
'Internal: the version of the chunker; part of a document''s hash in rag.ingest, so an upgrade re-chunks.';

-- The parsed document, or the parser's complaint raised with its SQLSTATE, DETAIL and HINT. SECURITY DEFINER:
-- the body's size and the window are checked here, before PL/Python copies the body into a Python string
-- (a writer's rag._parse of a 500 MB text held 1.4 GB before the parser's own check; security round 5), and
-- rag._parse is pgcite_owner's only.
CREATE OR REPLACE FUNCTION rag._parsed(body text, format text, max_tokens integer, overlap integer)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes bigint := rag._setting('max_document_bytes', 20 * 1024 * 1024)::bigint;
    doc jsonb;
    err jsonb;
BEGIN
    IF pg_catalog.octet_length(body) > max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('document is %s bytes, over the limit of %s bytes',
                pg_catalog.octet_length(body), max_bytes),
            HINT = 'Split the document, or have an admin raise it: SELECT rag.set_config(''max_document_bytes'', ...).';
    END IF;
    IF max_tokens IS NULL OR overlap IS NULL OR max_tokens NOT BETWEEN 16 AND 256 OR overlap < 0
        OR overlap >= max_tokens / 2 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('max_tokens must be 16..256 and overlap 0..max_tokens/2 - 1, not %s and %s',
                coalesce(max_tokens::text, 'NULL'), coalesce(overlap::text, 'NULL'));
    END IF;
    doc := rag._parse(body, format, max_tokens, overlap);
    err := doc -> 'error';
    IF err IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = err ->> 'sqlstate',
            MESSAGE = err ->> 'message',
            DETAIL = coalesce(err ->> 'detail', ''),
            HINT = coalesce(err ->> 'hint', '');
    END IF;
    RETURN doc;
END
$fn$;
COMMENT ON FUNCTION rag._parsed(text, text, integer, integer) IS
'Internal (SECURITY DEFINER, for writers: the only way to rag._parse): 54000 for a body over max_document_bytes '
'and 22023 for a window outside 16..256 tokens before any Python runs; then rag._parse, raising its error '
'(22023 empty or mismatched format, 22P02 binary) when there is one.';

CREATE OR REPLACE FUNCTION rag._chunk_rows(body text, format text, max_tokens integer, overlap integer)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (c ->> 'chunk_index')::integer, c ->> 'anchor', c ->> 'section_path', c ->> 'title', c ->> 'content'
    FROM pg_catalog.jsonb_array_elements(rag._parsed(body, format, max_tokens, overlap) -> 'chunks') AS c
$fn$;
COMMENT ON FUNCTION rag._chunk_rows(text, text, integer, integer) IS
'Internal: the chunks of a document as rows (the parser refuses a body over max_document_bytes: 54000).';

CREATE OR REPLACE FUNCTION rag.chunk_html(html text)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE sql
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._chunk_rows(html, 'html', 256, 32)
$fn$;
COMMENT ON FUNCTION rag.chunk_html(text) IS
'The chunks rag.ingest makes of an HTML document: one per section (DocBook div.sect1/2/3 and headings), '
'long sections split in parts that keep the section''s anchor and title.';

CREATE OR REPLACE FUNCTION rag.chunk_markdown(md text)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE sql
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._chunk_rows(md, 'markdown', 256, 32)
$fn$;
COMMENT ON FUNCTION rag.chunk_markdown(text) IS
'The chunks rag.ingest makes of a Markdown document: split on headings, anchor = heading slug.';

CREATE OR REPLACE FUNCTION rag.chunk_text(txt text, max_tokens integer DEFAULT 256, overlap integer DEFAULT 32)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE plpgsql
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF max_tokens NOT BETWEEN 16 AND 256 OR overlap < 0 OR overlap >= max_tokens / 2 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('max_tokens must be 16..256 and overlap 0..max_tokens/2 - 1, not %s and %s',
                max_tokens, overlap);
    END IF;
    RETURN QUERY SELECT * FROM rag._chunk_rows(txt, 'text', max_tokens, overlap);
END
$fn$;
COMMENT ON FUNCTION rag.chunk_text(text, integer, integer) IS
'Plain text in windows of max_tokens MiniLM word pieces (at most 256) overlapping by overlap word pieces.';

-- Chunking costs CPU in proportion to its input: it is for the roles that ingest.
REVOKE ALL ON FUNCTION rag.chunk_html(text) FROM PUBLIC, pgcite_reader;
REVOKE ALL ON FUNCTION rag.chunk_markdown(text) FROM PUBLIC, pgcite_reader;
REVOKE ALL ON FUNCTION rag.chunk_text(text, integer, integer) FROM PUBLIC, pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.chunk_html(text) TO pgcite_writer;
GRANT EXECUTE ON FUNCTION rag.chunk_markdown(text) TO pgcite_writer;
GRANT EXECUTE ON FUNCTION rag.chunk_text(text, integer, integer) TO pgcite_writer;
