-- rag.ask: the one call. Validates, answers (rag._answer), logs to the hash-chained audit log.

-- Settings that change an answer; they are logged with every ask and restored by rag.replay.
CREATE OR REPLACE FUNCTION rag._answer_settings()
RETURNS jsonb
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(pg_catalog.jsonb_object_agg(s.name, pg_catalog.current_setting(s.name, true)), '{}')
    FROM pg_catalog.unnest(ARRAY[
        'pgcite.model', 'pgcite.rrf_k', 'pgcite.weight_vector', 'pgcite.weight_fts', 'pgcite.weight_trgm',
        'pgcite.min_title_similarity', 'pgcite.exact_search_limit', 'pgcite.typo_similarity',
        'pgcite.min_score'
    ]) AS s (name)
    WHERE coalesce(pg_catalog.current_setting(s.name, true), '') <> ''
$fn$;
COMMENT ON FUNCTION rag._answer_settings() IS 'Internal: the pgcite.* settings in force that shape an answer.';

CREATE OR REPLACE FUNCTION rag.ask(
    question text, tenant text, k integer DEFAULT 5, query_embedding public.vector DEFAULT NULL,
    options jsonb DEFAULT '{}'
)
RETURNS TABLE (ask_id bigint, status text, answer text, reason text, citations jsonb, evidence jsonb)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t0 timestamptz := pg_catalog.clock_timestamp();
    t1 timestamptz;
    t2 timestamptz;
    p record;
    t rag.tenant;
    r record;
    ids bigint [] := '{}';
    read_only boolean := pg_catalog.pg_is_in_recovery()
        OR pg_catalog.current_setting('transaction_read_only') = 'on';
    timings jsonb;
BEGIN
    IF ask.options IS NOT NULL AND pg_catalog.jsonb_typeof(ask.options) <> 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'options must be a JSON object',
            HINT = 'For example {"max_quotes": 2, "passages": 3}.';
    END IF;
    p := rag._prepare_question(ask.question, ask.tenant, ask.k, ask.query_embedding);
    t := rag._require_tenant(ask.tenant);
    t1 := pg_catalog.clock_timestamp();

    IF NOT p.has_question THEN
        status := 'abstained';
        reason := 'empty_question';
        citations := '[]';
        evidence := pg_catalog.jsonb_build_object('chunks', '[]'::jsonb, 'complete', false,
            'fingerprint', pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex'));
    ELSE
        SELECT * INTO r FROM rag._answer(ask.question, p.corrected, ask.tenant, ask.k, p.qemb, coalesce(ask.options, '{}'));
        status := r.status;
        answer := r.answer;
        reason := r.reason;
        citations := r.citations;
        evidence := r.evidence;
        ids := r.chunk_ids;
    END IF;
    t2 := pg_catalog.clock_timestamp();
    timings := pg_catalog.jsonb_build_object(
        'embed_ms', round((extract(EPOCH FROM coalesce(t1, t0) - t0) * 1000)::numeric, 3),
        'answer_ms', round((extract(EPOCH FROM t2 - coalesce(t1, t0)) * 1000)::numeric, 3),
        'total_ms', round((extract(EPOCH FROM t2 - t0) * 1000)::numeric, 3));

    IF read_only THEN
        -- A hot standby (or read-only transaction) still answers; it cannot append to the log.
        evidence := evidence || '{"logged": false, "log_skipped": "read_only"}'::jsonb;
        ask_id := NULL;
    ELSE
        evidence := evidence || '{"logged": true}'::jsonb;
        INSERT INTO rag.ask_log AS l (
            tenant, seq, role_name, asked_at, question, k, options, settings, model, query_embedding_supplied,
            query_embedding, chunk_ids, status, reason, answer, citations, evidence, timings, fingerprint, row_hash
        )
        VALUES (
            ask.tenant, 0, current_user, t0, coalesce(ask.question, ''), ask.k, coalesce(ask.options, '{}'),
            rag._answer_settings(), t.model, ask.query_embedding IS NOT NULL, p.qemb,
            ids, status, reason, answer, citations, evidence, timings,
            evidence ->> 'fingerprint', ''::bytea
        )
        RETURNING l.ask_id INTO ask_id;
    END IF;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag.ask(text, text, integer, public.vector, jsonb) IS
'Answers a question from a tenant''s corpus with verified verbatim quotes, or abstains with a reason '
'(empty_question, no_relevant_sources, no_verifiable_quote). Always one row; logged to rag.ask_log. '
'options: max_quotes (2), passages (3), quote_margin (0.08), rank_penalty (0.1).';

GRANT EXECUTE ON FUNCTION rag.ask(text, text, integer, public.vector, jsonb) TO pgcite_reader;
