-- Embedding inside PostgreSQL: the model is loaded once per backend and kept in GD.

CREATE OR REPLACE FUNCTION rag.embed(content text)
RETURNS public.vector(384)
LANGUAGE plpython3u
STABLE
STRICT
PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.embed_texts(plpy, GD, [content])[0]
$fn$;
-- PARALLEL UNSAFE: it runs queries (settings, cancellation points), which PL/Python wraps in
-- subtransactions, and no subtransaction may start while a parallel plan runs.
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

GRANT EXECUTE ON FUNCTION rag.embed(text) TO pgcite_reader, pgcite_owner;
GRANT EXECUTE ON FUNCTION rag.embed_many(text[]) TO pgcite_reader, pgcite_owner;
GRANT EXECUTE ON FUNCTION rag.python_info() TO pgcite_reader;
