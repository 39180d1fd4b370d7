-- Sentences for extractive answers (python_udfs/pgcite_udfs/sentences.py). rag.ingest stores every chunk's
-- sentence spans with their embeddings (rag._sentence_spans, then rag.embed_many); rag.ask scores them in SQL
-- (rag._sentence_scores). Chunks stored before 0.3.0 have no sentence rows: rag._sentence_vectors splits and
-- embeds their sentences at ask time.

CREATE OR REPLACE FUNCTION rag._sentence_spans(contents text[])
RETURNS TABLE (chunk_ord integer, start_pos integer, end_pos integer)
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.sentence_spans(contents)
$fn$;
COMMENT ON FUNCTION rag._sentence_spans(text[]) IS
'Internal: the sentence spans of each text (chunk_ord: 1-based position in the array; 0-based offsets).';

CREATE OR REPLACE FUNCTION rag._sentence_vectors(passages jsonb)
RETURNS jsonb
LANGUAGE plpython3u
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.sentence_vectors(plpy, GD, passages)
$fn$;
COMMENT ON FUNCTION rag._sentence_vectors(jsonb) IS
'Internal: every sentence of the passages [{chunk_id, content}] with its embedding: '
'[{chunk_id, start, end, embedding}] (0-based offsets), for chunks stored without sentences.';
