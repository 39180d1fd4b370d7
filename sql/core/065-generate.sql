-- Generated answers held to proof (docs/generation.md). A model (rag.ask with option generator, through
-- pgcite_python) or the caller's own generator (rag.context, then rag.answer) gets the question and the
-- retrieved chunks numbered [1]..[k], and must return a CitedAnswer:
--   {"answer": "... [1] ...", "citations": [{"n": 1, "quote": "..."}], "abstain": false, "abstain_reason": null}
-- Everything it returns is checked in the database against the sources of this call (rag.verify
-- finds the quotes): unknown numbers and unverifiable quotes are removed, every sentence must carry a
-- marker whose quotes support it (rag._support_scores). A reply that fails is retried once with the errors;
-- a second failure abstains (generator_invalid_output, citation_unverifiable, unsupported_claim).
-- This file: one attempt (rag._generation_step) and a whole generation; the prompt is
-- 063-generation-prompt.sql, the checks of a reply 064-reply-check.sql.

-- One attempt of a generation, the same for both paths: a generator's reply (or its failure, p_call.ok false)
-- checked, and the decision: final (answered, or abstained with a reason) or retry (the first attempt only).
-- Returns {final, status, answer, reason, citations, attempt, retry_messages}.
CREATE OR REPLACE FUNCTION rag._generation_step(
    p_sources jsonb, p_messages jsonb, p_reply jsonb, p_attempt integer, p_min_support float8, p_call jsonb
)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    e jsonb;
    attempt jsonb;
BEGIN
    attempt := rag._without_nulls(pg_catalog.jsonb_build_object('attempt', p_attempt,
        'elapsed_ms', p_call -> 'elapsed_ms', 'http_status', p_call -> 'http_status',
        'reported_model', p_call -> 'reported_model', 'finish_reason', p_call -> 'finish_reason'));
    IF NOT coalesce((p_call ->> 'ok')::boolean, true) THEN
        RETURN pg_catalog.jsonb_build_object('final', true, 'status', 'abstained', 'reason', 'generator_unavailable',
            'citations', '[]'::jsonb, 'attempt', attempt || pg_catalog.jsonb_build_object('raw', NULL,
                'error', coalesce(p_call ->> 'error', 'the generator failed'), 'outcome', 'generator_unavailable'));
    END IF;
    e := rag._enforce_reply(p_sources, p_reply, p_min_support, coalesce(p_call -> 'validation_errors', '[]'));
    attempt := attempt || pg_catalog.jsonb_build_object('raw', p_reply, 'enforce_ms', e -> 'enforce_ms',
        'errors', e -> 'errors', 'rejected', e -> 'rejected', 'claims', e -> 'claims',
        'outcome', CASE WHEN (e ->> 'ok')::boolean THEN coalesce(e ->> 'reason', 'accepted') ELSE e ->> 'reason' END);
    IF (e ->> 'ok')::boolean THEN
        RETURN pg_catalog.jsonb_build_object('final', true, 'status', e ->> 'status', 'answer', e ->> 'answer',
            'reason', e ->> 'reason', 'citations', coalesce(e -> 'citations', '[]'), 'attempt', attempt,
            'model_abstain_reason', e -> 'model_abstain_reason');
    ELSIF p_attempt < 2 THEN
        RETURN pg_catalog.jsonb_build_object('final', false, 'status', 'retry', 'reason', e ->> 'reason',
            'citations', '[]'::jsonb, 'attempt', attempt,
            'retry_messages', rag._retry_messages(p_messages, p_reply, e -> 'errors'));
    END IF;
    RETURN pg_catalog.jsonb_build_object('final', true, 'status', 'abstained', 'reason', e ->> 'reason',
        'citations', '[]'::jsonb, 'attempt', attempt);
END
$fn$;
COMMENT ON FUNCTION rag._generation_step(jsonb, jsonb, jsonb, integer, float8, jsonb) IS
'Internal: one generation attempt checked (rag._enforce_reply) and decided: final or retry (first attempt only).';

-- The in-database path (rag.ask with option generator): the model is called through pgcite_python
-- (rag._generator_call reads the generator row itself: no caller chooses a URL or key), at most twice.
-- Returns {status, answer, reason, citations, generation}; generation goes into the evidence.
CREATE OR REPLACE FUNCTION rag._generate(p_generator text, p_question text, p_ids bigint[], p_params jsonb)
RETURNS jsonb
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    g rag.generator := rag._require_generator(p_generator);
    sources jsonb := rag._generation_sources(p_ids);
    prompt jsonb := rag._generation_prompt(p_question, sources);
    messages jsonb := prompt -> 'messages';
    call jsonb;
    step jsonb;
    attempts jsonb := '[]';
BEGIN
    IF pg_catalog.to_regprocedure('rag._generator_call(text,jsonb)') IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'generated answers in the database need the extension pgcite_python',
            HINT = 'CREATE EXTENSION pgcite_python; or call your own model: rag.context, then rag.answer.';
    END IF;
    FOR attempt IN 1..2 LOOP
        IF NOT rag._key_env_allowed(g.api_key_env) THEN  -- allowed when it was created, no longer (062)
            call := pg_catalog.jsonb_build_object('ok', false, 'elapsed_ms', 0, 'error', pg_catalog.format(
                'generator %s may not send the key in %s: it is not in the setting generator_key_envs of this '
                'database (a superuser sets it)', g.name, g.api_key_env));
        ELSE
            EXECUTE 'SELECT rag._generator_call($1, $2)' INTO call
            USING p_generator, pg_catalog.jsonb_build_object('messages', messages,
                'response_format', prompt -> 'response_format');
        END IF;
        step := rag._generation_step(sources, messages, call -> 'content', attempt,
            (p_params ->> 'min_support')::float8, call);
        attempts := attempts || (step -> 'attempt');
        EXIT WHEN (step ->> 'final')::boolean;
        messages := step -> 'retry_messages';
    END LOOP;
    RETURN pg_catalog.jsonb_build_object('status', step ->> 'status', 'answer', step ->> 'answer',
        'reason', step ->> 'reason', 'citations', step -> 'citations',
        'generation', rag._without_nulls(pg_catalog.jsonb_build_object(
            'path', 'database', 'generator', g.name, 'model', g.model, 'called', true,
            'sources', (SELECT pg_catalog.jsonb_agg(
                pg_catalog.jsonb_build_object('n', s -> 'n', 'chunk_id', s -> 'chunk_id') ORDER BY (s ->> 'n')::integer)
                FROM pg_catalog.jsonb_array_elements(sources) AS s),
            'min_support', (p_params ->> 'min_support')::float8, 'attempts', attempts,
            'outcome', coalesce(step ->> 'reason', 'answered'),
            'model_abstain_reason', step -> 'model_abstain_reason')));
END
$fn$;
COMMENT ON FUNCTION rag._generate(text, text, bigint[], jsonb) IS
'Internal: generates and checks an answer with a configured generator (at most two calls): {status, answer, '
'reason, citations, generation}.';

-- What the caller's row says about a generation: who generated, how each attempt ended, which citations were
-- rejected and why, by number only, and why a generator was unavailable. The model's raw replies, its rejected
-- quotes and sentences and the errors quoting them are in the audit log only (rag.ask_log.evidence.generation):
-- nothing the checks removed reaches the caller.
CREATE OR REPLACE FUNCTION rag._generation_summary(p_generation jsonb)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (p_generation - 'attempts') || pg_catalog.jsonb_build_object('attempts', coalesce((
        SELECT pg_catalog.jsonb_agg(rag._without_nulls(pg_catalog.jsonb_build_object(
            'attempt', a.value -> 'attempt', 'outcome', a.value -> 'outcome', 'elapsed_ms', a.value -> 'elapsed_ms',
            'enforce_ms', a.value -> 'enforce_ms', 'http_status', a.value -> 'http_status',
            'generator', a.value -> 'generator',
            'rejected', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('n', r -> 'n', 'why', r -> 'why'))
                FROM pg_catalog.jsonb_array_elements(a.value -> 'rejected') AS r),
            'unsupported_sentences', (SELECT pg_catalog.jsonb_agg(c -> 'i')
                FROM pg_catalog.jsonb_array_elements(a.value -> 'claims') AS c
                WHERE NOT (c ->> 'supported')::boolean),
            'error', a.value -> 'error')) ORDER BY a.o)
        FROM pg_catalog.jsonb_array_elements(p_generation -> 'attempts') WITH ORDINALITY AS a (value, o)
    ), '[]'::jsonb))
$fn$;
COMMENT ON FUNCTION rag._generation_summary(jsonb) IS
'Internal: evidence.generation as the caller gets it: outcomes and rejected numbers, no raw reply or quote.';
