-- Bring your own generator (managed PostgreSQL, no PL/Python): rag.context runs retrieval and the gate and
-- hands out the numbered sources and the prompt; the caller runs its own model; rag.answer applies exactly the
-- checks of a generated rag.ask (rag._generation_step) to the caller's CitedAnswer and logs the result in the
-- same audit chain. A context answers once, and only members of its tenant can use it.

CREATE OR REPLACE FUNCTION rag._context(
    p_caller name, p_question text, p_tenant text, p_k integer, p_query_embedding public.vector, p_options jsonb
)
RETURNS TABLE (
    context_id bigint, ask_id bigint, status text, reason text, sources jsonb, prompt jsonb, evidence jsonb
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t0 timestamptz := pg_catalog.clock_timestamp();
    t1 timestamptz;
    t rag.tenant := rag._authorize(p_caller, p_tenant, 'read');
    params jsonb := rag._params();
    options jsonb := coalesce(p_options, '{}');
    p record;
    r record;
    passed boolean := false;
    timings jsonb;
BEGIN
    IF rag._answer_options(options) ->> 'generator' IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'option "generator" is for rag.ask: rag.context hands the prompt to your own generator',
            HINT = 'Send the prompt to your model, then pass its reply to rag.answer(context_id, reply).';
    END IF;
    p := rag._prepare_question(p_question, p_tenant, p_k, p_query_embedding, params);
    t1 := pg_catalog.clock_timestamp();
    IF p.has_question THEN
        SELECT * INTO r FROM rag._answer(p_question, p.corrected, p_tenant, p_k, p.qemb, options, params);
        passed := (r.evidence #>> '{gate,passed}')::boolean;
        IF p.qemb IS NULL THEN
            -- embedded in the background (rag._prepare_question): the vector rag._answer used, logged
            p.qemb := rag._query_embedding(p_question, p.corrected, NULL);
        END IF;
    ELSE
        SELECT NULL::jsonb AS evidence, '{}'::bigint [] AS chunk_ids, 'empty_question'::text AS reason INTO r;
    END IF;
    timings := pg_catalog.jsonb_build_object(
        'embed_ms', round((extract(EPOCH FROM t1 - t0) * 1000)::numeric, 3),
        'answer_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t1) * 1000)::numeric, 3));

    IF NOT passed THEN
        -- nothing to generate from: the abstention is logged now, as rag.ask logs it
        status := 'abstained';
        reason := r.reason;
        sources := '[]';
        evidence := coalesce(r.evidence, pg_catalog.jsonb_build_object('chunks', '[]'::jsonb, 'complete', false,
            'fingerprint', pg_catalog.encode(pg_catalog.sha256(''::bytea), 'hex')))
            || '{"generation": {"path": "caller", "called": false}, "logged": true}'::jsonb;
        ask_id := rag._append_log(p_caller, p_tenant, t0, coalesce(p_question, ''), p_k, options, params, t.model,
            p_query_embedding IS NOT NULL, p.qemb, coalesce(r.chunk_ids, '{}'), status, reason, NULL, '[]',
            evidence, timings);
        RETURN NEXT;
        RETURN;
    END IF;

    sources := rag._generation_sources(r.chunk_ids);
    prompt := rag._generation_prompt(p_question, sources);
    INSERT INTO rag.context AS x (
        tenant, role_name, created_at, question, k, options, settings, model, query_embedding_supplied,
        query_embedding, chunk_ids, sources, prompt, evidence, timings
    )
    VALUES (
        p_tenant, p_caller, t0, p_question, p_k, options, params, t.model, p_query_embedding IS NOT NULL, p.qemb,
        r.chunk_ids, sources, prompt, r.evidence, timings
    )
    RETURNING x.context_id INTO context_id;
    status := 'ready';
    evidence := r.evidence || pg_catalog.jsonb_build_object('context_id', context_id);
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._context(name, text, text, integer, public.vector, jsonb) IS
'Internal (SECURITY DEFINER: writes rag.context and the log): rag.context for the checked caller.';

CREATE OR REPLACE FUNCTION rag.context(
    question text, tenant text, k integer DEFAULT 5, query_embedding public.vector DEFAULT NULL,
    options jsonb DEFAULT '{}'
)
RETURNS TABLE (
    context_id bigint, ask_id bigint, status text, reason text, sources jsonb, prompt jsonb, evidence jsonb
)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._context(current_user, context.question COLLATE "default", context.tenant, context.k,
        context.query_embedding, context.options)
$fn$;
COMMENT ON FUNCTION rag.context(text, text, integer, public.vector, jsonb) IS
'Retrieval and the gate of rag.ask, for your own generator: status ready with the numbered sources [{n, '
'chunk_id, ..., content}], the chat-completions prompt {messages, response_format} and a context_id for '
'rag.answer; or status abstained (the gate refused, or an empty question), already logged with its ask_id.';

CREATE OR REPLACE FUNCTION rag._answer_context(
    p_caller name, p_context bigint, p_reply jsonb, p_generator text, p_error text
)
RETURNS TABLE (ask_id bigint, status text, answer text, reason text, citations jsonb, evidence jsonb)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    who regrole := rag._caller(p_caller);
    c rag.context;
    n_attempt integer;
    messages jsonb;
    step jsonb;
    rec jsonb;
    all_attempts jsonb;
    t_start timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- Everything the caller sends is kept in rag.context and then in the log, which is append-only: a reader's
    -- two replies of 35 MB (over the checks' 262,144 bytes, so "invalid output", but stored raw) and a 1 MB
    -- generator name and error added 144 MB to it for good (security round 5). Bounded before anything is read
    -- or written: 54000.
    IF pg_catalog.octet_length(p_reply::text) > 262144 OR pg_catalog.length(p_generator) > 200
        OR pg_catalog.length(p_error) > 4000 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('the reply (%s bytes), generator (%s characters) or error (%s characters) is '
                'over its limit of 262144 bytes, 200 and 4000 characters', coalesce(pg_catalog.octet_length(
                    p_reply::text), 0), coalesce(pg_catalog.length(p_generator), 0),
                coalesce(pg_catalog.length(p_error), 0)),
            HINT = 'Nothing was recorded; send your model''s reply as it is (a real answer is far shorter).';
    END IF;
    -- another tenant's context does not exist for this caller (its tenant is not even named). Its tenant is read
    -- and checked before the row is locked: locked first, a context another tenant's member was answering in an
    -- open transaction made a non-member's call wait for that transaction (55P03 under a lock_timeout instead
    -- of 42704), which told which ids of other tenants were being answered (session 27's review). A context's
    -- tenant never changes, so the locked row is the one checked (or gone: deleted meanwhile, 42704 as well).
    SELECT x.tenant INTO c.tenant FROM rag.context AS x WHERE x.context_id = p_context;
    IF found AND rag._is_member(who, c.tenant) THEN
        SELECT * INTO c FROM rag.context AS x WHERE x.context_id = p_context FOR UPDATE;
    END IF;
    IF NOT found OR NOT rag._is_member(who, c.tenant) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'undefined_object',
            MESSAGE = pg_catalog.format('context %s not found', p_context),
            HINT = 'Only contexts of tenants you are a member of can be answered.';
    END IF;
    PERFORM rag._authorize(p_caller, c.tenant, 'read');
    IF c.ask_id IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = pg_catalog.format('context %s was already answered (ask %s)', p_context, c.ask_id),
            HINT = 'A context answers once; call rag.context again for a new answer.';
    END IF;
    n_attempt := pg_catalog.jsonb_array_length(c.attempts) + 1;
    messages := CASE WHEN n_attempt = 1 THEN c.prompt -> 'messages' ELSE c.attempts -> -1 -> 'retry_messages' END;
    step := rag._generation_step(c.sources, messages, p_reply, n_attempt, (c.settings ->> 'min_support')::float8,
        CASE WHEN p_reply IS NULL THEN pg_catalog.jsonb_build_object('ok', false,
            'error', coalesce(p_error, 'the caller''s generator returned no reply'))
        ELSE '{"ok": true}'::jsonb END);
    rec := (step -> 'attempt') || rag._without_nulls(pg_catalog.jsonb_build_object(
        'generator', p_generator, 'role_name', p_caller));
    IF NOT (step ->> 'final')::boolean THEN
        -- the one retry: the caller sends the errors back to its model and calls rag.answer again
        UPDATE rag.context AS x
        SET attempts = c.attempts || (rec || pg_catalog.jsonb_build_object('retry_messages', step -> 'retry_messages'))
        WHERE x.context_id = p_context;
        ask_id := NULL;
        status := 'retry';
        reason := step ->> 'reason';
        citations := '[]';
        evidence := pg_catalog.jsonb_build_object('context_id', p_context, 'attempt', n_attempt,
            'errors', step #> '{attempt,errors}', 'rejected', step #> '{attempt,rejected}',
            'retry', pg_catalog.jsonb_build_object('messages', step -> 'retry_messages',
                'response_format', c.prompt -> 'response_format'));
        RETURN NEXT;
        RETURN;
    END IF;
    status := step ->> 'status';
    answer := step ->> 'answer';
    reason := step ->> 'reason';
    citations := step -> 'citations';
    evidence := c.evidence || pg_catalog.jsonb_build_object('context_id', p_context, 'logged', true,
        'generation', rag._without_nulls(pg_catalog.jsonb_build_object(
            'path', 'caller', 'generator', p_generator, 'called', true,
            'sources', (SELECT pg_catalog.jsonb_agg(
                pg_catalog.jsonb_build_object('n', s -> 'n', 'chunk_id', s -> 'chunk_id') ORDER BY (s ->> 'n')::integer)
                FROM pg_catalog.jsonb_array_elements(c.sources) AS s),
            'min_support', (c.settings ->> 'min_support')::float8,
            'attempts', (SELECT pg_catalog.jsonb_agg(a.value - 'retry_messages' ORDER BY a.o)
                FROM pg_catalog.jsonb_array_elements(c.attempts || rec) WITH ORDINALITY AS a (value, o)),
            'outcome', coalesce(step ->> 'reason', 'answered'),
            'model_abstain_reason', step -> 'model_abstain_reason')));
    ask_id := rag._append_log(p_caller, c.tenant, c.created_at, c.question, c.k, c.options, c.settings, c.model,
        c.query_embedding_supplied, c.query_embedding, c.chunk_ids, status, reason, answer, citations, evidence,
        c.timings || pg_catalog.jsonb_build_object(
            'answer_check_ms', round((extract(EPOCH FROM pg_catalog.clock_timestamp() - t_start) * 1000)::numeric, 3),
            'context_to_answer_ms',
            round((extract(EPOCH FROM pg_catalog.clock_timestamp() - c.created_at) * 1000)::numeric, 3)));
    all_attempts := c.attempts || rec;
    UPDATE rag.context AS x SET attempts = all_attempts, ask_id = _answer_context.ask_id,
        answered_at = pg_catalog.clock_timestamp()
    WHERE x.context_id = p_context;
    -- the log keeps the whole generation; the caller gets its summary (no raw reply, no rejected quote)
    evidence := evidence || pg_catalog.jsonb_build_object('generation',
        rag._generation_summary(evidence -> 'generation'));
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._answer_context(name, bigint, jsonb, text, text) IS
'Internal (SECURITY DEFINER: reads and writes rag.context, appends to the log): rag.answer for the checked caller.';

CREATE OR REPLACE FUNCTION rag.answer(
    context_id bigint, reply jsonb, generator text DEFAULT NULL, error text DEFAULT NULL
)
RETURNS TABLE (ask_id bigint, status text, answer text, reason text, citations jsonb, evidence jsonb)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._answer_context(current_user, answer.context_id, answer.reply, answer.generator, answer.error)
$fn$;
COMMENT ON FUNCTION rag.answer(bigint, jsonb, text, text) IS
'Checks your generator''s CitedAnswer for a rag.context (reply: the JSON object, or a JSON string of the model''s '
'raw text) exactly as rag.ask checks a configured generator''s, and returns rag.ask''s row, logged. Status retry '
'(once, not logged yet): send evidence.retry.messages to your model and call again. reply NULL (with error) '
'records that your generator failed: abstained, generator_unavailable. generator: your model''s name, logged.';
