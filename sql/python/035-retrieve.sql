-- Retrieval, question side: spelling correction (rag._correct_question, in the core) asks which unknown
-- question words are ordinary English words, to keep them as they are.

CREATE OR REPLACE FUNCTION rag._common_words(words text[])
RETURNS text[]
LANGUAGE plpython3u
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.common_words(plpy, GD, words)
$fn$;
COMMENT ON FUNCTION rag._common_words(text[]) IS
'Internal: the words (lower case) that are whole English words of the model''s vocabulary, i.e. not typos.';
