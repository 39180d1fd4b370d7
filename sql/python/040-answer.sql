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
