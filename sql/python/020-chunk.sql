-- Parsing and chunking inside PostgreSQL (python_udfs/pgcite_udfs/chunking.py).

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
'Internal: parses a document into sections and chunks: {format, title, sections_found, empty_sections, chunks}.';

CREATE OR REPLACE FUNCTION rag.chunk_html(html text)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.chunk_rows(plpy, GD, html, "html")
$fn$;
COMMENT ON FUNCTION rag.chunk_html(text) IS
'The chunks rag.ingest makes of an HTML document: one per section (DocBook div.sect1/2/3 and headings), '
'long sections split in parts that keep the section''s anchor and title.';

CREATE OR REPLACE FUNCTION rag.chunk_markdown(md text)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.chunk_rows(plpy, GD, md, "markdown")
$fn$;
COMMENT ON FUNCTION rag.chunk_markdown(text) IS
'The chunks rag.ingest makes of a Markdown document: split on headings, anchor = heading slug.';

CREATE OR REPLACE FUNCTION rag.chunk_text(txt text, max_tokens integer DEFAULT 256, overlap integer DEFAULT 32)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if max_tokens < 16 or max_tokens > 256 or overlap < 0 or overlap >= max_tokens:
    plpy.error("max_tokens must be between 16 and 256 and overlap between 0 and max_tokens - 1",
               detail="got max_tokens=%d, overlap=%d" % (max_tokens, overlap), sqlstate="22023")
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.chunk_rows(plpy, GD, txt, "text", max_tokens, overlap)
$fn$;
COMMENT ON FUNCTION rag.chunk_text(text, integer, integer) IS
'Plain text in windows of max_tokens MiniLM word pieces (at most 256) overlapping by overlap word pieces.';

GRANT EXECUTE ON FUNCTION rag.chunk_html(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.chunk_markdown(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.chunk_text(text, integer, integer) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag._parse(text, text, integer, integer) TO pgcite_writer;
