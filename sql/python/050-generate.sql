-- Generated answers (docs/generation.md): the call to a configured generator, and the model half of the
-- support check. Everything that decides what reaches a caller is in the core (sql/core/065-generate.sql).

-- One chat-completions request for a configured generator (python_udfs/pgcite_udfs/generate.py). It reads the
-- generator row itself, so the URL, model and key variable come from rag.generator, never from its caller; it
-- is executable by pgcite_owner only (rag._apply_grants), i.e. from rag.ask's SECURITY DEFINER function.
CREATE OR REPLACE FUNCTION rag._generator_call(p_generator text, p_request jsonb)
RETURNS jsonb
LANGUAGE plpython3u
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.generator_call(plpy, GD, p_generator, p_request)
$fn$;
COMMENT ON FUNCTION rag._generator_call(text, jsonb) IS
'Internal: one request {messages, response_format} to the generator named (its row read here): {ok, content, '
'http_status, elapsed_ms, reported_model, finish_reason, validation_errors} or {ok: false, error}. Waits at most '
'the generator''s timeout and stays cancellable. pgcite_owner only.';

-- The model half of the support check (rag._support_scores): MiniLM cosine of each sentence with its quotes.
CREATE OR REPLACE FUNCTION rag._support_similarity(p_claims jsonb)
RETURNS jsonb
LANGUAGE plpython3u
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
if "pgcite_site" not in GD:
    plpy.execute("SELECT rag._python_init()")
from pgcite_udfs import udf
return udf.support_similarity(plpy, GD, p_claims)
$fn$;
COMMENT ON FUNCTION rag._support_similarity(jsonb) IS
'Internal: for [{sentence, quotes}], how similar each sentence is to its quotes (pgcite_udfs.support: MiniLM '
'cosine, best quote or all quotes joined), in [0, 1]; null for a sentence without quotes.';
