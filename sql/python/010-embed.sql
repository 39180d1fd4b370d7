-- Embedding inside PostgreSQL: the model is loaded once per backend and kept in GD.
--
-- PL/Python converts every argument into Python objects before the function's first line runs, 8 bytes per
-- array element and a copy of every text, without a chance to cancel: rag.embed_many of PostgreSQL's largest
-- array (134 million NULLs, 16 MB) held 1.1 GB for 2.8 s before the Python could refuse it (security round 5).
-- So the PL/Python function (rag._embed_texts) is pgcite_owner's only, and the functions tenant roles call
-- reach it through rag._embed_checked (SECURITY DEFINER, PL/pgSQL), which checks the array first.

CREATE OR REPLACE FUNCTION rag._embed_texts(contents text[])
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
-- PARALLEL UNSAFE (the default): it runs queries (settings, cancellation points), which PL/Python wraps in
-- subtransactions, and no subtransaction may start while a parallel plan runs.
COMMENT ON FUNCTION rag._embed_texts(text[]) IS
'Internal (pgcite_owner only): the embeddings of texts checked by rag._embed_checked; ord is the 1-based '
'position (NULL in, NULL out).';

-- 54000 before any Python runs: more texts than a document may have chunks and sentences (one per 64 bytes of
-- the setting max_document_bytes, NULLs and empty texts included), or more bytes than max_document_bytes;
-- 22023 for an array of more than one dimension (PL/Python would hand the model lists of lists). It takes the
-- array's measures, not the array: a 500 MB array passed on from one PL/pgSQL function to another cost 1.4 GB
-- more. p_flat is pg_column_size of the array as PL/pgSQL holds it (expanded, never compressed): its texts plus
-- at most 8 bytes per text (header, alignment), a bit per NULL and its own header. Returns whether the texts
-- must be counted (rag._check_text_bytes) because p_flat alone does not settle it.
CREATE OR REPLACE FUNCTION rag._check_texts(p_what text, p_count bigint, p_ndims integer, p_flat bigint)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes bigint := rag._setting('max_document_bytes', 20 * 1024 * 1024)::bigint;
    max_texts bigint := greatest(1, max_bytes / 64);
    n bigint := coalesce(p_count, 0);
BEGIN
    IF coalesce(p_ndims, 1) > 1 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('the texts to %s must be a one-dimensional array, not %s dimensions',
                p_what, p_ndims);
    END IF;
    IF n > max_texts THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('%s texts to %s are over the limit of %s per call (one per 64 bytes of '
                'max_document_bytes)', n, p_what, max_texts),
            HINT = 'Pass fewer texts per call.';
    END IF;
    IF coalesce(p_flat, 0) > max_bytes + 9 * n + 1024 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('%s texts to %s of about %s bytes in all are over the limit of %s bytes', n,
                p_what, p_flat, max_bytes),
            HINT = 'Pass fewer texts per call, or have an admin raise the setting max_document_bytes.';
    END IF;
    RETURN coalesce(p_flat, 0) > max_bytes;
END
$fn$;
COMMENT ON FUNCTION rag._check_texts(text, bigint, integer, bigint) IS
'Internal: for an array of texts about to reach PL/Python (its cardinality, dimensions and pg_column_size): '
'22023 for several dimensions, 54000 for more texts than max_document_bytes / 64 or far more bytes than '
'max_document_bytes; true when its texts must be counted exactly (rag._check_text_bytes).';

CREATE OR REPLACE FUNCTION rag._check_text_bytes(p_what text, p_count bigint, p_bytes bigint)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes bigint := rag._setting('max_document_bytes', 20 * 1024 * 1024)::bigint;
BEGIN
    IF coalesce(p_bytes, 0) > max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('%s texts to %s of %s bytes in all are over the limit of %s bytes', p_count,
                p_what, p_bytes, max_bytes),
            HINT = 'Pass fewer texts per call, or have an admin raise the setting max_document_bytes.';
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._check_text_bytes(text, bigint, bigint) IS
'Internal: 54000 when texts of p_bytes bytes in all are over the setting max_document_bytes.';

CREATE OR REPLACE FUNCTION rag._embed_checked(contents text[])
RETURNS TABLE (ord integer, embedding public.vector(384))
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF rag._check_texts('embed', pg_catalog.cardinality(contents), pg_catalog.array_ndims(contents),
        pg_catalog.pg_column_size(contents)) THEN
        PERFORM rag._check_text_bytes('embed', pg_catalog.cardinality(contents),
            (SELECT sum(pg_catalog.octet_length(t.t)) FROM pg_catalog.unnest(contents) AS t (t)));
    END IF;
    RETURN QUERY SELECT e.ord, e.embedding FROM rag._embed_texts(contents) AS e;
END
$fn$;
COMMENT ON FUNCTION rag._embed_checked(text[]) IS
'Internal (SECURITY DEFINER: the only way to rag._embed_texts; readers may call it, it names no tenant): '
'rag._check_texts, then the embeddings.';

-- One text: its size checked before it is copied into an array (ARRAY[...] of a 500 MB text, then the checks on
-- the array, held 5 GB).
CREATE OR REPLACE FUNCTION rag._embed_one(content text)
RETURNS public.vector(384)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes bigint := rag._setting('max_document_bytes', 20 * 1024 * 1024)::bigint;
BEGIN
    IF pg_catalog.octet_length(content) > max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('a text to embed of %s bytes is over the limit of %s bytes',
                pg_catalog.octet_length(content), max_bytes),
            HINT = 'Embed a shorter text, or have an admin raise the setting max_document_bytes.';
    END IF;
    RETURN (SELECT e.embedding FROM rag._embed_texts(ARRAY[content]) AS e);
END
$fn$;
COMMENT ON FUNCTION rag._embed_one(text) IS
'Internal (SECURITY DEFINER: for readers, with rag._embed_checked the only way to rag._embed_texts): the embedding '
'of one text; 54000 over max_document_bytes before any Python runs.';

-- A question's embedding in the background (pgcite_udfs/background.py): rag._prepare_question begins it, the
-- full-text and title legs of retrieval run while a worker thread of the backend computes it on the other core,
-- and the vector leg ends it (rag._query_embedding). The worker never calls into PostgreSQL and blocks every
-- signal. Both are pgcite_owner's only: they run inside the SECURITY DEFINER entry points, whose question is
-- already checked (at most 4,000 characters), and a job is answered only for the text it was begun with.
CREATE OR REPLACE FUNCTION rag._embed_begin(content text)
RETURNS boolean
LANGUAGE plpython3u
VOLATILE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.embed_begin(plpy, GD, content)
$fn$;
COMMENT ON FUNCTION rag._embed_begin(text) IS
'Internal (pgcite_owner only): starts embedding a text on the backend''s worker thread; false where it cannot '
'(the torch fallback, a text of over 64 kB): rag._embed_end then embeds it as rag.embed does.';

CREATE OR REPLACE FUNCTION rag._embed_end(content text)
RETURNS public.vector(384)
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.embed_end(plpy, GD, content)
$fn$;
COMMENT ON FUNCTION rag._embed_end(text) IS
'Internal (pgcite_owner only): the embedding of a text: the worker''s if the latest text begun '
'(rag._embed_begin) is this one, waiting for it, else computed now as rag.embed computes it.';

CREATE OR REPLACE FUNCTION rag.embed(content text)
RETURNS public.vector(384)
LANGUAGE sql
STABLE
STRICT
PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._embed_one(content)
$fn$;
COMMENT ON FUNCTION rag.embed(text) IS
'The all-MiniLM-L6-v2 embedding (384 dims, normalised) of a text, computed in this backend. '
'Use rag.embed_many for many texts: one batched call is much faster than one call per row.';

CREATE OR REPLACE FUNCTION rag.embed_many(contents text[])
RETURNS TABLE (ord integer, embedding public.vector(384))
LANGUAGE sql
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT e.ord, e.embedding FROM rag._embed_checked(contents) AS e
$fn$;
COMMENT ON FUNCTION rag.embed_many(text[]) IS
'Embeddings of many texts in batches; ord is the 1-based position in the input array (NULL in, NULL out). '
'At most max_document_bytes / 64 texts and max_document_bytes bytes per call (54000).';

GRANT EXECUTE ON FUNCTION rag.embed(text) TO pgcite_reader, pgcite_owner;
GRANT EXECUTE ON FUNCTION rag.embed_many(text[]) TO pgcite_reader, pgcite_owner;
GRANT EXECUTE ON FUNCTION rag.python_info() TO pgcite_reader;
