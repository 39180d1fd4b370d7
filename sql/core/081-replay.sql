-- Replay of a logged ask: the same question, embedding and answer-shaping settings against today's corpus.

-- The answer-shaping settings of a logged ask, to replay with: the numeric settings of rag._settings_catalog
-- that shape an answer, each within its bounds, over the defaults. Nothing that chooses code or a model is
-- ever taken from a log row (0.2.0 rows logged "pgcite.<name>" keys; both spellings are read).
CREATE OR REPLACE FUNCTION rag._logged_params(p_settings jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.jsonb_object_agg(c.name, coalesce(
        (SELECT v.n FROM (
            SELECT CASE WHEN x.value ~ '^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$' THEN x.value::float8 END AS n
            FROM pg_catalog.jsonb_each_text(coalesce(p_settings, '{}')) AS x
            WHERE x.key IN (c.name, 'pgcite.' || c.name)
        ) AS v WHERE v.n BETWEEN c.min_value AND c.max_value LIMIT 1),
        c.default_value::float8))
    FROM rag._settings_catalog() AS c
    WHERE c.in_answer
$fn$;
COMMENT ON FUNCTION rag._logged_params(jsonb) IS
'Internal: the answer-shaping numeric settings of a log row (valid ones only, else defaults).';

-- A generated answer checked again (rag.replay): the reply that decided it, checked by rag._enforce_reply
-- against the chunks retrieved today, numbered as today. No model is called. {checked, status, reason, citations,
-- citations_verify, rejected (numbers and why), unsupported_sentences}; checked false when there is no reply (the
-- generator was not called or was unavailable).
CREATE OR REPLACE FUNCTION rag._recheck_generation(
    l rag.ask_log, p_chunk_ids bigint[], p_gate_passed boolean, p_min_support float8
)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    g jsonb := l.evidence -> 'generation';
    last_reply jsonb;
    e jsonb;
BEGIN
    SELECT a.value -> 'raw' INTO last_reply
    FROM pg_catalog.jsonb_array_elements(coalesce(g -> 'attempts', '[]')) WITH ORDINALITY AS a (value, o)
    ORDER BY a.o DESC LIMIT 1;
    IF NOT coalesce((g ->> 'called')::boolean, false) OR last_reply IS NULL
        OR pg_catalog.jsonb_typeof(last_reply) = 'null' THEN
        RETURN pg_catalog.jsonb_build_object('checked', false,
            'why', CASE WHEN coalesce((g ->> 'called')::boolean, false) THEN 'the generator gave no reply'
                ELSE 'the generator was not called' END,
            'status', CASE WHEN coalesce((g ->> 'called')::boolean, false) THEN l.status END,
            'citations', l.citations);
    END IF;
    e := rag._enforce_reply(rag._generation_sources(p_chunk_ids), last_reply, p_min_support);
    RETURN pg_catalog.jsonb_build_object('checked', true,
        'status', CASE WHEN NOT p_gate_passed THEN 'abstained' ELSE e ->> 'status' END,
        'reason', CASE WHEN NOT p_gate_passed THEN 'no_relevant_sources' ELSE e ->> 'reason' END,
        'citations', CASE WHEN p_gate_passed AND (e ->> 'ok')::boolean THEN coalesce(e -> 'citations', '[]')
            ELSE '[]' END,
        'citations_verify', CASE WHEN l.status = 'answered'
            THEN (e ->> 'ok')::boolean AND coalesce(e -> 'citations', '[]') = l.citations END,
        'rejected', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('n', x -> 'n', 'why', x -> 'why'))
            FROM pg_catalog.jsonb_array_elements(e -> 'rejected') AS x),
        'unsupported_sentences', (SELECT pg_catalog.jsonb_agg(x -> 'i')
            FROM pg_catalog.jsonb_array_elements(e -> 'claims') AS x WHERE NOT (x ->> 'supported')::boolean));
END
$fn$;
COMMENT ON FUNCTION rag._recheck_generation(rag.ask_log, bigint[], boolean, float8) IS
'Internal: the stored reply of a generated answer checked again against today''s chunks (rag.replay).';

CREATE OR REPLACE FUNCTION rag._replay(p_caller name, p_ask bigint)
RETURNS TABLE (
    ask_id bigint, identical boolean, fingerprint_then text, fingerprint_now text,
    chunks_then bigint[], chunks_now bigint[], citations_identical boolean, status_then text, status_now text,
    citations_verify boolean, recheck jsonb
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._caller(p_caller);
    l rag.ask_log;
    params jsonb;
    r record;
BEGIN
    SELECT a.* INTO l FROM rag.ask_log AS a WHERE a.ask_id = p_ask;
    IF NOT found OR NOT (pg_catalog.pg_has_role(who, 'pgcite_reader', 'MEMBER') OR rag._is_admin(who))
        OR NOT rag._is_member(who, l.tenant) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('ask %s not found', p_ask),
            HINT = 'Only asks of tenants you are a member of can be replayed.';
    END IF;
    params := rag._logged_params(l.settings);
    _replay.ask_id := l.ask_id;
    fingerprint_then := l.fingerprint;
    chunks_then := l.chunk_ids;
    status_then := l.status;
    IF l.query_embedding IS NULL THEN
        fingerprint_now := pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex');
        chunks_now := '{}';
        status_now := l.status;
        citations_identical := true;
    ELSE
        -- in the database's collation, as rag.ask answers (the log's columns are in it; until 0.9.0's session 17
        -- rag.ask ran in "C", which its entry point's `name` argument gave every text argument)
        SELECT * INTO r FROM rag._answer(l.question COLLATE "default",
            rag._correct_question(l.tenant COLLATE "default", l.question COLLATE "default", params),
            l.tenant COLLATE "default", l.k, l.query_embedding, l.options - 'generator', params);
        fingerprint_now := r.evidence ->> 'fingerprint';
        chunks_now := r.chunk_ids;
        status_now := r.status;
        citations_identical := r.citations = l.citations;
        IF l.evidence ? 'generation' THEN
            -- a generated answer: its stored reply is checked again against today's chunks (no model is called)
            recheck := rag._recheck_generation(l, r.chunk_ids, (r.evidence #>> '{gate,passed}')::boolean,
                (params ->> 'min_support')::float8);
            status_now := coalesce(recheck ->> 'status', status_now);
            citations_identical := coalesce(recheck -> 'citations', '[]'::jsonb) = l.citations;
            citations_verify := (recheck ->> 'citations_verify')::boolean;
        END IF;
    END IF;
    identical := fingerprint_now = fingerprint_then AND chunks_now = chunks_then AND citations_identical
        AND status_now = status_then;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._replay(name, bigint) IS
'Internal (SECURITY DEFINER: reads the log and embeddings of the caller''s tenant): rag.replay for the checked '
'caller.';

CREATE OR REPLACE FUNCTION rag.replay(ask bigint)
RETURNS TABLE (
    ask_id bigint, identical boolean, fingerprint_then text, fingerprint_now text,
    chunks_then bigint[], chunks_now bigint[], citations_identical boolean, status_then text, status_now text,
    citations_verify boolean, recheck jsonb
)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._replay(current_user, replay.ask)
$fn$;
COMMENT ON FUNCTION rag.replay(bigint) IS
'Re-runs a logged ask with its logged embedding, parameters and answer-shaping settings (numbers only: never a '
'model or a path) and reports whether the retrieved chunks, fingerprint, status and citations are identical '
'(they are while the corpus is unchanged). A generated answer''s stored reply is checked again against today''s '
'chunks without calling the model: citations_verify says whether its citations still verify, recheck has the '
'details (NULL for extractive answers).';

GRANT EXECUTE ON FUNCTION rag.replay(bigint) TO pgcite_reader;
