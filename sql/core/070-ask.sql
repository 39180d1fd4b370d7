-- rag.ask: the one call. Validates, answers (rag._answer; with option generator, rag._generate once the gate
-- has passed), logs to the hash-chained audit log.

CREATE OR REPLACE FUNCTION rag._ask(
    p_caller name, p_question text, p_tenant text, p_k integer, p_query_embedding public.vector, p_options jsonb
)
RETURNS TABLE (ask_id bigint, status text, answer text, reason text, citations jsonb, evidence jsonb)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t0 timestamptz := pg_catalog.clock_timestamp();
    t1 timestamptz;
    t2 timestamptz;
    t rag.tenant := rag._authorize(p_caller, p_tenant, 'read');
    params jsonb := rag._params();
    options jsonb := coalesce(p_options, '{}');
    p record;
    r record;
    ids bigint [] := '{}';
    read_only boolean := pg_catalog.pg_is_in_recovery()
        OR pg_catalog.current_setting('transaction_read_only') = 'on';
    timings jsonb;
    generator text := rag._answer_options(options) ->> 'generator';  -- 22023 before any work
    g jsonb;
    tg timestamptz;
BEGIN
    IF generator IS NOT NULL AND pg_catalog.to_regprocedure('rag._generator_call(text,jsonb)') IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'generated answers in the database need the extension pgcite_python',
            HINT = 'CREATE EXTENSION pgcite_python; or call your own model: rag.context, then rag.answer.';
    END IF;
    p := rag._prepare_question(p_question, p_tenant, p_k, p_query_embedding, params);
    t1 := pg_catalog.clock_timestamp();

    IF NOT p.has_question THEN
        status := 'abstained';
        reason := 'empty_question';
        citations := '[]';
        evidence := pg_catalog.jsonb_build_object('chunks', '[]'::jsonb, 'complete', false,
            'fingerprint', pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex'));
    ELSE
        SELECT * INTO r FROM rag._answer(p_question, p.corrected, p_tenant, p_k, p.qemb, options - 'generator',
            params);
        status := r.status;
        answer := r.answer;
        reason := r.reason;
        citations := r.citations;
        evidence := r.evidence;
        ids := r.chunk_ids;
        -- A generated answer replaces the extractive one only once the gate has passed: a question the gate
        -- refuses never reaches the model.
        IF generator IS NOT NULL AND (r.evidence #>> '{gate,passed}')::boolean THEN
            tg := pg_catalog.clock_timestamp();
            g := rag._generate(generator, p_question, ids, params);
            status := g ->> 'status';
            answer := g ->> 'answer';
            reason := g ->> 'reason';
            citations := g -> 'citations';
        END IF;
    END IF;
    IF p.has_question AND p.qemb IS NULL THEN
        -- embedded in the background (rag._prepare_question): the vector rag._answer used, logged with the ask
        p.qemb := rag._query_embedding(p_question, p.corrected, NULL);
    END IF;
    IF generator IS NOT NULL AND g IS NULL THEN
        evidence := evidence || pg_catalog.jsonb_build_object('generation', pg_catalog.jsonb_build_object(
            'path', 'database', 'generator', generator, 'called', false,
            'model', (SELECT x.model FROM rag.generator AS x WHERE x.name = generator)));
    END IF;
    t2 := pg_catalog.clock_timestamp();
    -- embed_ms: preparing the question (spelling, and its embedding, or only its start when the embedding runs in
    -- the background: the rest of it is then in answer_ms, waited for by the vector leg)
    timings := pg_catalog.jsonb_build_object(
        'embed_ms', round((extract(EPOCH FROM coalesce(t1, t0) - t0) * 1000)::numeric, 3),
        'answer_ms', round((extract(EPOCH FROM coalesce(tg, t2) - coalesce(t1, t0)) * 1000)::numeric, 3),
        'total_ms', round((extract(EPOCH FROM t2 - t0) * 1000)::numeric, 3));
    IF tg IS NOT NULL THEN
        timings := timings || pg_catalog.jsonb_build_object(
            'generate_ms', round((extract(EPOCH FROM t2 - tg) * 1000)::numeric, 3));
    END IF;

    IF read_only THEN
        -- A hot standby (or read-only transaction) still answers; it cannot append to the log.
        evidence := evidence || '{"logged": false, "log_skipped": "read_only"}'::jsonb;
        ask_id := NULL;
    ELSE
        evidence := evidence || '{"logged": true}'::jsonb;
        -- the log keeps the whole generation (raw replies, rejections and why); the caller gets its summary
        ask_id := rag._append_log(p_caller, p_tenant, t0, coalesce(p_question, ''), p_k, options, params, t.model,
            p_query_embedding IS NOT NULL, p.qemb, ids, status, reason, answer, citations,
            evidence || CASE WHEN g IS NULL THEN '{}'::jsonb
                ELSE pg_catalog.jsonb_build_object('generation', g -> 'generation') END, timings);
    END IF;
    IF g IS NOT NULL THEN
        evidence := evidence || pg_catalog.jsonb_build_object('generation', rag._generation_summary(g -> 'generation'));
    END IF;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._ask(name, text, text, integer, public.vector, jsonb) IS
'Internal (SECURITY DEFINER: appends to rag.ask_log, reads embeddings): rag.ask for the checked caller. The '
'answer is computed here, so what is logged is what was answered.';

CREATE OR REPLACE FUNCTION rag.ask(
    question text, tenant text, k integer DEFAULT 5, query_embedding public.vector DEFAULT NULL,
    options jsonb DEFAULT '{}'
)
RETURNS TABLE (ask_id bigint, status text, answer text, reason text, citations jsonb, evidence jsonb)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- PL/pgSQL: a sql function with SET is planned again on every call
    -- the question in the database's collation (as rag.retrieve passes it)
    RETURN QUERY SELECT * FROM rag._ask(current_user, ask.question COLLATE "default", ask.tenant, ask.k,
        ask.query_embedding, ask.options);
END
$fn$;
COMMENT ON FUNCTION rag.ask(text, text, integer, public.vector, jsonb) IS
'Answers a question from a tenant''s corpus with verified verbatim quotes, or abstains with a reason '
'(empty_question, no_relevant_sources, no_verifiable_quote). Always one row; logged to rag.ask_log. '
'options: max_quotes (2), passages (3), quote_margin (0.08), rank_penalty (0.1); generator (a name from '
'rag.generators): a generated answer held to the same proof, or abstained (docs/generation.md).';

GRANT EXECUTE ON FUNCTION rag.ask(text, text, integer, public.vector, jsonb) TO pgcite_reader;
