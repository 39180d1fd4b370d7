-- Calibrate: run labelled questions, choose the gate threshold that separates answerable from unanswerable
-- ones, store it for the tenant. Midpoint of the gap when they separate; otherwise the threshold with the
-- lowest cost, where a wrong answer costs false_answer_cost (default 2) wrong abstentions (ties: fewer wrong
-- answers, then the higher threshold), reported with the overlap.

-- The calibration table rag.calibrate decides from, as rows (kept as a JSON array while it is built).
CREATE OR REPLACE FUNCTION rag._calibration_rows(p_rows jsonb)
RETURNS TABLE (
    ord integer, id text, kind text, answerable boolean, score float8, similarity float8, coverage float8,
    sentence float8, names float8, top_anchor text, expected_in_top_k boolean
)
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM pg_catalog.jsonb_to_recordset(p_rows) AS c (
        ord integer, id text, kind text, answerable boolean, score float8, similarity float8, coverage float8,
        sentence float8, names float8, top_anchor text, expected_in_top_k boolean
    )
$fn$;
COMMENT ON FUNCTION rag._calibration_rows(jsonb) IS 'Internal: rag.calibrate''s table, from its JSON rows.';

CREATE OR REPLACE FUNCTION rag._calibrate(
    p_caller name, tenant text, questions jsonb, false_answer_cost float8
)
RETURNS TABLE (
    id text, kind text, answerable boolean, score float8, similarity float8, coverage float8, sentence float8,
    names float8, top_anchor text, expected_in_top_k boolean, answered_at_threshold boolean
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._authorize(p_caller, _calibrate.tenant, 'admin');
    params jsonb := rag._params();
    -- the rows decided from: a local value, never a temporary table (a caller's own temporary table of the
    -- same name, with a trigger, would run the caller's code with this function's rights)
    rows_so_far jsonb := '[]';
    row_list jsonb [] := '{}';
    q jsonb;
    p record;
    r record;
    n integer;
    i integer := 0;
    threshold float8;
    min_answerable float8;
    max_unanswerable float8;
    best record;
    decided jsonb;
BEGIN
    IF _calibrate.questions IS NULL OR pg_catalog.jsonb_typeof(_calibrate.questions) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'questions must be a JSON array',
            HINT = 'Each element: {"id": "q1", "question": "...", "expect": ["ANCHOR"], '
                || '"kind": "answerable" | "typo" | "out_of_corpus"}.';
    END IF;
    IF EXISTS (
        SELECT FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e
        WHERE pg_catalog.jsonb_typeof(e) <> 'object' OR coalesce(e ->> 'question', '') = ''
            OR coalesce(e ->> 'kind', '') NOT IN ('answerable', 'typo', 'out_of_corpus')
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'every question needs a non-empty "question" and a "kind" of answerable, typo or out_of_corpus';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e
                   WHERE e ->> 'kind' <> 'out_of_corpus')
        OR NOT EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e
                       WHERE e ->> 'kind' = 'out_of_corpus') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'calibration needs both answerable and out_of_corpus questions';
    END IF;
    IF EXISTS (
        SELECT FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e
        WHERE pg_catalog.jsonb_typeof(e -> 'query_embedding') NOT IN ('array', 'null')
            OR (pg_catalog.jsonb_typeof(e -> 'query_embedding') = 'array' AND (
                pg_catalog.jsonb_array_length(e -> 'query_embedding') = 0
                OR EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(e -> 'query_embedding') AS x
                           WHERE pg_catalog.jsonb_typeof(x) <> 'number')))
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'a question''s "query_embedding" must be an array of numbers',
            HINT = 'Pass the 384 numbers of the question''s all-MiniLM-L6-v2 embedding, or leave the key out '
                || 'to embed the question in the database.';
    END IF;
    IF _calibrate.false_answer_cost IS NULL OR _calibrate.false_answer_cost <= 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'false_answer_cost must be a positive number (a wrong answer costs that many wrong abstentions)';
    END IF;
    n := pg_catalog.jsonb_array_length(_calibrate.questions);


    FOR q IN SELECT e FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e LOOP
        i := i + 1;
        -- a question's embedding, when the caller embedded it (a client without pgcite_python in the server)
        p := rag._prepare_question(q ->> 'question', _calibrate.tenant, 5,
            CASE WHEN pg_catalog.jsonb_typeof(q -> 'query_embedding') = 'array'
                THEN (q -> 'query_embedding')::text::public.vector END, params);
        SELECT * INTO r FROM rag._answer(q ->> 'question', p.corrected, _calibrate.tenant, 5, p.qemb, '{}', params);
        row_list := row_list || pg_catalog.jsonb_build_object(
            'ord', i, 'id', coalesce(q ->> 'id', i::text), 'kind', q ->> 'kind',
            'answerable', q ->> 'kind' <> 'out_of_corpus',
            'score', r.evidence -> 'gate' -> 'signals' -> 'score',
            'similarity', r.evidence -> 'gate' -> 'signals' -> 'similarity',
            'coverage', r.evidence -> 'gate' -> 'signals' -> 'coverage',
            'sentence', r.evidence -> 'gate' -> 'signals' -> 'sentence',
            'names', r.evidence -> 'gate' -> 'signals' -> 'names',
            'top_anchor', r.evidence -> 'chunks' -> 0 -> 'anchor',
            'expected_in_top_k', EXISTS (
                SELECT FROM pg_catalog.jsonb_array_elements(r.evidence -> 'chunks') AS c,
                    pg_catalog.jsonb_array_elements_text(coalesce(q -> 'expect', '[]')) AS a
                WHERE c ->> 'anchor' = a));
        IF i % 10 = 0 OR i = n THEN
            RAISE NOTICE 'calibrate: % of % questions', i, n;
        END IF;
    END LOOP;
    -- one array at the end: appending each row to a JSON array copied all the rows before it (quadratic)
    rows_so_far := pg_catalog.to_jsonb(row_list);

    SELECT min(c.score) FILTER (WHERE c.answerable), max(c.score) FILTER (WHERE NOT c.answerable)
    INTO min_answerable, max_unanswerable
    FROM rag._calibration_rows(rows_so_far) AS c;

    IF min_answerable > max_unanswerable THEN
        threshold := (min_answerable + max_unanswerable) / 2;
    ELSE
        -- candidate thresholds: midpoints between consecutive distinct scores, and the ends. Each one's false
        -- abstentions (answerable, score < th) and false answers (not answerable, score >= th) counted in one
        -- sorted pass over the scores and the thresholds together, a threshold before the scores equal to it
        -- (counting the rows for each threshold was quadratic: 1.3 s at 3,000 questions; security round 5)
        WITH cal AS MATERIALIZED (
            SELECT c.score, c.answerable FROM rag._calibration_rows(rows_so_far) AS c
        ),
        x AS (
            SELECT (s.score + coalesce(pg_catalog.lead(s.score) OVER (ORDER BY s.score), s.score + 0.001)) / 2 AS th
            FROM (SELECT DISTINCT cal.score FROM cal) AS s
        ),
        u AS (
            SELECT cal.score AS v, 1 AS kind, CASE WHEN cal.answerable THEN 1 ELSE 0 END AS a,
                CASE WHEN cal.answerable THEN 0 ELSE 1 END AS na
            FROM cal
            UNION ALL
            SELECT x.th, 0, 0, 0 FROM x
        )
        SELECT y.th, y.fa, y.fn
        INTO best
        FROM (
            SELECT u.v AS th, u.kind,
                CASE WHEN u.v IS NULL THEN 0 ELSE sum(u.a) OVER w END AS fa,
                CASE WHEN u.v IS NULL THEN 0 ELSE (
                    SELECT count(*) FROM cal WHERE NOT cal.answerable AND cal.score IS NOT NULL
                ) - sum(u.na) OVER w END AS fn
            FROM u
            WINDOW w AS (ORDER BY u.v, u.kind ROWS UNBOUNDED PRECEDING)
        ) AS y
        WHERE y.kind = 0
        ORDER BY y.fa + _calibrate.false_answer_cost * y.fn, y.fn, y.th DESC
        LIMIT 1;
        threshold := best.th;
    END IF;
    threshold := round(threshold::numeric, 6)::float8;

    decided := pg_catalog.jsonb_build_object(
        'min_score', threshold,
        'separable', min_answerable > max_unanswerable,
        'gap', round((min_answerable - max_unanswerable)::numeric, 6),
        'false_abstain', (SELECT count(*) FROM rag._calibration_rows(rows_so_far) AS c WHERE c.answerable AND c.score < threshold),
        'false_answer',
        (SELECT count(*) FROM rag._calibration_rows(rows_so_far) AS c WHERE NOT c.answerable AND c.score >= threshold),
        'questions', n,
        'false_answer_cost', _calibrate.false_answer_cost,
        'calibrated_on', (SELECT pg_catalog.jsonb_agg(c.id ORDER BY c.ord) FROM rag._calibration_rows(rows_so_far) AS c),
        'calibrated_at', pg_catalog.now(),
        'calibrated_by', p_caller
    );
    UPDATE rag.tenant AS tt SET gate = decided WHERE tt.tenant = _calibrate.tenant;
    IF NOT found THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = 'only pgcite_admin (or a superuser) can store a tenant''s calibration';
    END IF;
    IF min_answerable > max_unanswerable THEN
        RAISE NOTICE 'calibrate: separable; gap % ; min_score = % (midpoint)',
            round((min_answerable - max_unanswerable)::numeric, 4), threshold;
    ELSE
        RAISE NOTICE 'calibrate: overlap of % ; min_score = % (lowest cost: % wrong answers, % wrong abstentions)',
            round((max_unanswerable - min_answerable)::numeric, 4), threshold,
            decided ->> 'false_answer', decided ->> 'false_abstain';
    END IF;
    RAISE NOTICE 'calibrate: these questions must not be used to score this tenant (see rag.tenant.gate.calibrated_on)';

    RETURN QUERY
    SELECT c.id, c.kind, c.answerable, c.score, c.similarity, c.coverage, c.sentence, c.names, c.top_anchor,
        c.expected_in_top_k, c.score >= threshold
    FROM rag._calibration_rows(rows_so_far) AS c
    ORDER BY c.ord;
END
$fn$;
COMMENT ON FUNCTION rag._calibrate(name, text, jsonb, float8) IS
'Internal (SECURITY DEFINER: writes rag.tenant.gate): rag.calibrate for the checked caller.';

CREATE OR REPLACE FUNCTION rag.calibrate(tenant text, questions jsonb, false_answer_cost float8 DEFAULT 2)
RETURNS TABLE (
    id text, kind text, answerable boolean, score float8, similarity float8, coverage float8, sentence float8,
    names float8, top_anchor text, expected_in_top_k boolean, answered_at_threshold boolean
)
LANGUAGE sql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT * FROM rag._calibrate(current_user, calibrate.tenant, calibrate.questions, calibrate.false_answer_cost)
$fn$;
COMMENT ON FUNCTION rag.calibrate(text, jsonb, float8) IS
'Runs labelled questions [{id, question, expect, kind, query_embedding (optional: 384 numbers, else embedded '
'in-database)}] against a tenant, chooses its gate threshold '
'(midpoint of the gap between answerable and out_of_corpus scores, or the lowest cost when they overlap, a wrong '
'answer costing false_answer_cost wrong abstentions), '
'stores it in rag.tenant.gate with the ids used, and returns the table it decided from. Needs pgcite_admin.';

REVOKE ALL ON FUNCTION rag.calibrate(text, jsonb, float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.calibrate(text, jsonb, float8) TO pgcite_admin;
