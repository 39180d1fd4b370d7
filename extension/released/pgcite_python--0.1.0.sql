-- generated from sql/python/ by extension/Makefile; do not edit
\echo Use "CREATE EXTENSION pgcite_python CASCADE" to load this file. \quit

-- ===== sql/python/000-bootstrap.sql
-- pgcite_python bootstrap: puts the DB-side venv on sys.path (before the system dist-packages, so the
-- venv's packages win) and sets the offline / thread environment before anything imports torch.
-- Every PL/Python function in this extension runs this once per backend.

CREATE OR REPLACE FUNCTION rag._python_init()
RETURNS text
LANGUAGE plpython3u
SET search_path = pg_catalog, pg_temp
AS $fn$
import glob
import os
import sys

if "pgcite_site" in GD:
    return GD["pgcite_site"]
root = plpy.execute("SELECT current_setting('pgcite.python_path', true) AS p")[0]["p"] or "/opt/pgcite/venv"
ver = "python%d.%d" % sys.version_info[:2]
candidates = [root] if root.rstrip("/").endswith("site-packages") else glob.glob(
    os.path.join(root, "lib", ver, "site-packages"))
site = next((c for c in candidates if os.path.isdir(os.path.join(c, "pgcite_udfs"))), None)
if site is None:
    plpy.error(
        "pgcite_python: no DB-side Python environment with pgcite_udfs at %s (%s)" % (root, ver),
        detail="pgcite.python_path must name a venv made with the system python (%s) or its site-packages." % ver,
        hint="Run `make setup` and `make install`, or SET pgcite.python_path to the venv (default /opt/pgcite/venv).",
        sqlstate="PC001")
if site in sys.path:
    sys.path.remove(site)
sys.path.insert(0, site)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
threads = plpy.execute("SELECT current_setting('pgcite.torch_threads', true) AS t")[0]["t"] or "1"
os.environ["OMP_NUM_THREADS"] = threads
os.environ["MKL_NUM_THREADS"] = threads
GD["pgcite_site"] = site
return site
$fn$;
COMMENT ON FUNCTION rag._python_init() IS
'Internal: finds the DB-side venv (setting pgcite.python_path, default /opt/pgcite/venv) and puts it first on '
'sys.path; PC001 with a hint when it is missing.';

CREATE OR REPLACE FUNCTION rag.python_info()
RETURNS jsonb
LANGUAGE plpython3u
SET search_path = pg_catalog, pg_temp
AS $fn$
import json
import sys
site = plpy.execute("SELECT rag._python_init() AS s")[0]["s"]
from pgcite_udfs import embed
return json.dumps({"python": sys.version.split()[0], "executable": sys.executable, "site_packages": site,
                   "model": embed.MODEL_NAME, "model_loaded": "model" in GD,
                   "embedded_texts": GD.get("embedded_texts", 0)})
$fn$;
COMMENT ON FUNCTION rag.python_info() IS
'The Python that PL/Python embeds, the DB-side venv in use, whether this backend has loaded the model and how '
'many texts it has embedded.';

-- ===== sql/python/010-embed.sql
-- Embedding inside PostgreSQL: the model is loaded once per backend and kept in GD.

CREATE OR REPLACE FUNCTION rag.embed(content text)
RETURNS public.vector(384)
LANGUAGE plpython3u
STABLE
STRICT
PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.embed_texts(plpy, GD, [content])[0]
$fn$;
COMMENT ON FUNCTION rag.embed(text) IS
'The all-MiniLM-L6-v2 embedding (384 dims, normalised) of a text, computed in this backend. '
'Use rag.embed_many for many texts: one batched call is much faster than one call per row.';

CREATE OR REPLACE FUNCTION rag.embed_many(contents text[])
RETURNS TABLE (ord integer, embedding public.vector(384))
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return list(enumerate(udf.embed_texts(plpy, GD, contents), start=1))
$fn$;
COMMENT ON FUNCTION rag.embed_many(text[]) IS
'Embeddings of many texts in batches; ord is the 1-based position in the input array (NULL in, NULL out).';

GRANT EXECUTE ON FUNCTION rag.embed(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.embed_many(text[]) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag._python_init() TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.python_info() TO pgcite_reader;

-- ===== sql/python/020-chunk.sql
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
'Internal: parses a document: {format, title, sections_found, empty_sections, chunks} or {error}.';

-- The parsed document, or the parser's complaint raised with its SQLSTATE, DETAIL and HINT.
CREATE OR REPLACE FUNCTION rag._parsed(body text, format text, max_tokens integer, overlap integer)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc jsonb := rag._parse(body, format, max_tokens, overlap);
    err jsonb := doc -> 'error';
BEGIN
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
'Internal: rag._parse, raising its error (22023 empty or mismatched format, 22P02 binary) when there is one.';

CREATE OR REPLACE FUNCTION rag._chunk_rows(body text, format text, max_tokens integer, overlap integer)
RETURNS TABLE (chunk_index integer, anchor text, section_path text, title text, content text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (c ->> 'chunk_index')::integer, c ->> 'anchor', c ->> 'section_path', c ->> 'title', c ->> 'content'
    FROM pg_catalog.jsonb_array_elements(rag._parsed(body, format, max_tokens, overlap) -> 'chunks') AS c
$fn$;
COMMENT ON FUNCTION rag._chunk_rows(text, text, integer, integer) IS 'Internal: the chunks of a document as rows.';

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

GRANT EXECUTE ON FUNCTION rag.chunk_html(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.chunk_markdown(text) TO pgcite_reader;
GRANT EXECUTE ON FUNCTION rag.chunk_text(text, integer, integer) TO pgcite_reader;

-- ===== sql/python/030-ingest.sql
-- rag.ingest: one call, one transaction: parse -> chunk -> embed (reusing stored embeddings) -> store.

CREATE OR REPLACE FUNCTION rag.ingest(
    tenant text, key text, body text, format text DEFAULT 'auto', title text DEFAULT NULL,
    source_url text DEFAULT NULL, metadata jsonb DEFAULT '{}'
)
RETURNS TABLE (doc_key text, version integer, status text, chunks integer, empty_sections integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    p_tenant text := ingest.tenant;
    p_key text := ingest.key;
    fmt text := lower(coalesce(ingest.format, 'auto'));
    doc_hash bytea;
    parsed jsonb;
    items rag.chunk_input [];
    v_model text := rag.model_name();
BEGIN
    PERFORM rag._check_document(p_tenant, p_key, ingest.body);
    IF fmt NOT IN ('auto', 'html', 'markdown', 'text') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('unknown format "%s"', ingest.format),
            HINT = 'Use auto, html, markdown or text.';
    END IF;
    doc_hash := rag._document_hash(ingest.body, fmt, ingest.title, ingest.source_url, ingest.metadata);
    IF rag._lock_document(p_tenant, p_key, doc_hash) THEN
        RETURN QUERY SELECT d.doc_key, d.version, 'unchanged'::text, d.chunk_count, d.empty_sections
        FROM rag.document AS d WHERE d.tenant = p_tenant AND d.doc_key = p_key AND d.retired_at IS NULL;
        RETURN;
    END IF;

    parsed := rag._parsed(ingest.body, fmt, 256, 32);

    -- Embeddings: reuse the stored one for a text this tenant already embedded with this model,
    -- embed the rest in one batched call.
    WITH c AS (
        SELECT
            e.o,
            e.j ->> 'anchor' AS anchor,
            e.j ->> 'section_path' AS section_path,
            e.j ->> 'title' AS title,
            e.j ->> 'content' AS content,
            (e.j ->> 'token_count')::integer AS token_count,
            pg_catalog.sha256(pg_catalog.convert_to(rag._embed_text(e.j ->> 'title', e.j ->> 'content'), 'UTF8'))
                AS h
        FROM pg_catalog.jsonb_array_elements(parsed -> 'chunks') WITH ORDINALITY AS e (j, o)
    ),
    reused AS (
        SELECT DISTINCT ON (c.o) c.o, s.embedding
        FROM c
        INNER JOIN rag.chunk AS s ON s.tenant = p_tenant AND s.content_hash = c.h AND s.model = v_model
        ORDER BY c.o, s.chunk_id
    ),
    todo AS (
        SELECT
            pg_catalog.array_agg(c.o ORDER BY c.o) AS ords,
            pg_catalog.array_agg(rag._embed_text(c.title, c.content) ORDER BY c.o) AS texts
        FROM c
        WHERE NOT EXISTS (SELECT FROM reused AS r WHERE r.o = c.o)
    ),
    fresh AS (
        SELECT todo.ords[m.ord] AS o, m.embedding
        FROM todo, rag.embed_many(todo.texts) AS m
        WHERE todo.texts IS NOT NULL
    )
    SELECT pg_catalog.array_agg(
        ROW(c.anchor, c.section_path, c.title, c.content, c.token_count, coalesce(r.embedding, f.embedding)
        )::rag.chunk_input ORDER BY c.o)
    INTO items
    FROM c
    LEFT JOIN reused AS r ON r.o = c.o
    LEFT JOIN fresh AS f ON f.o = c.o;

    RETURN QUERY SELECT * FROM rag._store_version(
        p_tenant, p_key, doc_hash, parsed ->> 'format', coalesce(ingest.title, parsed ->> 'title'),
        ingest.source_url, ingest.metadata, pg_catalog.jsonb_array_length(parsed -> 'empty_sections'), v_model, items
    );
END
$fn$;
COMMENT ON FUNCTION rag.ingest(text, text, text, text, text, text, jsonb) IS
'Ingests one document in one transaction: parse, chunk, embed in-database (reusing stored embeddings of '
'unchanged text), store a new immutable version. status: inserted, updated, unchanged (no work done) or empty '
'(every section empty, e.g. a table of contents: recorded with no chunks).';

REVOKE ALL ON FUNCTION rag.ingest(text, text, text, text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.ingest(text, text, text, text, text, text, jsonb) TO pgcite_writer;

-- ===== sql/python/040-answer.sql
-- Sentence scoring for extractive answers (python_udfs/pgcite_udfs/answer.py). rag.ask calls it when
-- pgcite_python is installed; without it rag.ask scores sentences lexically in SQL.

CREATE OR REPLACE FUNCTION rag._score_sentences(question text, query_embedding public.vector, passages jsonb)
RETURNS jsonb
LANGUAGE plpython3u
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.score_sentences(plpy, GD, question, query_embedding, passages)
$fn$;
COMMENT ON FUNCTION rag._score_sentences(text, public.vector, jsonb) IS
'Internal: every sentence of the passages [{chunk_id, content}] scored against the question: '
'[{chunk_id, start, end, sim, overlap, score}] with 0-based character offsets.';

GRANT EXECUTE ON FUNCTION rag._score_sentences(text, public.vector, jsonb) TO pgcite_reader;

-- ===== sql/python/090-grants.sql
-- The internal functions this extension added follow the same grants as the core's.
SELECT rag._apply_grants();
