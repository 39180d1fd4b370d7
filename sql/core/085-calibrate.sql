-- Calibrate: run labelled questions, choose the gate threshold that separates answerable from unanswerable
-- ones, store it for the tenant. The threshold is the one of lowest expected cost, a wrong answer costing
-- false_answer_cost (default 2) wrong abstentions (negatives together weighing at most that many times the
-- answerable questions), where each question's score is blurred by a kernel of the width the scores call for
-- (rag._calibration_threshold): the error rates as smooth curves rather than steps, so that no single question
-- (one of few hard negatives) decides the threshold (#11, round 6).

-- The threshold of lowest smoothed cost, for rag.calibrate: p_answerable and p_unanswerable are the gate scores of
-- the two classes (NULL and NaN left out: such a question is never answered).
--   * Each score is spread by a logistic kernel of standard deviation h: the quadratic mean, weighted by the
--     classes' sizes, of each class's bandwidth by Silverman's rule of thumb, 0.9 * min(sd, IQR / 1.34) * n ^ -0.2
--     (sd when the IQR is 0; the other class's when a class has one score; at least 0.001).
--   * cost(t) = sum over answerable of F((t - s) / h) + false_answer_cost * w * sum over unanswerable of
--     F((s - t) / h), F the kernel's distribution function: the expected false abstentions plus the weighted
--     expected false answers at threshold t. w = min(1, answerable / unanswerable): a wrong answer costs
--     false_answer_cost wrong abstentions, but negatives labelled beyond the number of answerable questions do
--     not tilt the threshold further (their weight together is at most false_answer_cost times the answerable
--     questions'; with counts, 50 more negatives moved it by 0.012 and cost an answerable question; with rates
--     alone, each of 7 hard negatives weighed 33 answerable questions: docs/BENCHMARKS.md, #11 round 6).
--   * t is searched on a grid of steps of a quarter of the bandwidth over the scores' range widened by
--     four bandwidths (at most 400 steps), then on 64 steps around the best point; ties go to the higher t.
--   * When the classes separate and that t falls outside their gap (a few questions, wide kernels: it would
--     answer a negative or abstain on an answerable question of the set), the midpoint of the gap instead
--     (rule 'midpoint_of_gap').
-- Cost O(n log n) for the bandwidths plus O(464 n) for the grids. Returns {min_score, rule, bandwidth,
-- expected_false_abstain, expected_false_answer, grid}.
CREATE OR REPLACE FUNCTION rag._calibration_threshold(
    p_answerable float8[], p_unanswerable float8[], p_false_answer_cost float8
)
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH s AS MATERIALIZED (
        SELECT true AS answerable, v FROM pg_catalog.unnest(p_answerable) AS a (v)
        WHERE v IS NOT NULL AND v <> 'NaN'::float8 AND v BETWEEN -1e6 AND 1e6
        UNION ALL
        SELECT false, v FROM pg_catalog.unnest(p_unanswerable) AS u (v)
        WHERE v IS NOT NULL AND v <> 'NaN'::float8 AND v BETWEEN -1e6 AND 1e6
    ),
    st AS (
        SELECT s.answerable, pg_catalog.count(*) AS n, min(s.v) AS lo, max(s.v) AS hi,
            0.9 * CASE
                WHEN pg_catalog.percentile_cont(0.75) WITHIN GROUP (ORDER BY s.v)
                    - pg_catalog.percentile_cont(0.25) WITHIN GROUP (ORDER BY s.v) > 0
                    THEN least(pg_catalog.stddev_samp(s.v),
                        (pg_catalog.percentile_cont(0.75) WITHIN GROUP (ORDER BY s.v)
                            - pg_catalog.percentile_cont(0.25) WITHIN GROUP (ORDER BY s.v)) / 1.34)
                ELSE pg_catalog.stddev_samp(s.v)
            END * pg_catalog.power(pg_catalog.count(*)::float8, -0.2) AS h
        FROM s
        GROUP BY s.answerable
    ),
    -- one bandwidth for both classes: the class bandwidths' quadratic mean weighted by the classes' sizes (a class
    -- of a few questions neither widens nor narrows the kernel much)
    bw AS (
        SELECT y.na, y.nu, y.ha, y.hu, y.lo, y.hi, greatest(pg_catalog.sqrt((y.na * y.ha ^ 2 + y.nu * y.hu ^ 2) / (y.na + y.nu)),
            0.001) AS h
        FROM (
            SELECT a.n::float8 AS na, u.n::float8 AS nu,
                greatest(coalesce(nullif(a.h, 0), nullif(u.h, 0), 0.001), 0.001) AS ha,
                greatest(coalesce(nullif(u.h, 0), nullif(a.h, 0), 0.001), 0.001) AS hu,
                least(a.lo, u.lo) AS lo, greatest(a.hi, u.hi) AS hi
            FROM st AS a, st AS u
            WHERE a.answerable AND NOT u.answerable
        ) AS y
    ),
    coarse_grid AS (
        SELECT r.lo, r.step, g.i, r.lo + g.i * r.step AS t
        FROM (
            SELECT x.lo, x.width / x.n AS step, x.n
            FROM (
                SELECT bw.lo - 4 * bw.h AS lo, bw.hi - bw.lo + 8 * bw.h AS width,
                    least(400, greatest(16, pg_catalog.ceil((bw.hi - bw.lo + 8 * bw.h) / (bw.h / 4))))::integer AS n
                FROM bw
            ) AS x
        ) AS r,
            pg_catalog.generate_series(0, r.n) AS g (i)
    ),
    -- the kernel's distribution function at each grid point, summed per class (a logistic of standard deviation
    -- h: scale h * sqrt(3) / pi; its argument clamped, far points count 0 or 1)
    coarse AS (
        SELECT cg.t, cg.step,
            sum(CASE WHEN s.answerable THEN 1 / (1 + exp(-greatest(least(1.813799364 * (cg.t - s.v) / bw.h, 60), -60)))
                ELSE 0 END) AS fa,
            sum(CASE WHEN s.answerable THEN 0
                ELSE 1 / (1 + exp(-greatest(least(1.813799364 * (s.v - cg.t) / bw.h, 60), -60))) END) AS fn
        FROM coarse_grid AS cg, s, bw
        GROUP BY cg.t, cg.step
    ),
    best_coarse AS (
        SELECT c.t, c.step FROM coarse AS c, bw
        ORDER BY round((c.fa + p_false_answer_cost * least(1, bw.na / bw.nu) * c.fn)::numeric, 9), c.t DESC
        LIMIT 1
    ),
    fine AS (
        SELECT b.t - b.step + g.i * b.step / 32 AS t,
            sum(CASE WHEN s.answerable THEN 1 / (1 + exp(-greatest(least(
                1.813799364 * ((b.t - b.step + g.i * b.step / 32) - s.v) / bw.h, 60), -60))) ELSE 0 END) AS fa,
            sum(CASE WHEN s.answerable THEN 0 ELSE 1 / (1 + exp(-greatest(least(
                1.813799364 * (s.v - (b.t - b.step + g.i * b.step / 32)) / bw.h, 60), -60))) END) AS fn
        FROM best_coarse AS b, pg_catalog.generate_series(0, 64) AS g (i), s, bw
        GROUP BY g.i, b.t, b.step
    )
    SELECT pg_catalog.jsonb_build_object(
        'min_score', round((CASE WHEN x.outside THEN (g.lo + g.hi) / 2 ELSE f.t END)::numeric, 6)::float8,
        'rule', CASE WHEN x.outside THEN 'midpoint_of_gap' ELSE 'smoothed_cost' END,
        'bandwidth', pg_catalog.jsonb_build_object(
            'used', round(bw.h::numeric, 6), 'answerable', round(bw.ha::numeric, 6),
            'out_of_corpus', round(bw.hu::numeric, 6)),
        'expected_false_abstain', round(f.fa::numeric, 3),
        'expected_false_answer', round(f.fn::numeric, 3),
        'grid', round((SELECT b.step FROM best_coarse AS b)::numeric / 32, 9))
    FROM (
        SELECT fine.t, fine.fa, fine.fn FROM fine, bw
        ORDER BY round((fine.fa + p_false_answer_cost * least(1, bw.na / bw.nu) * fine.fn)::numeric, 9), fine.t DESC
        LIMIT 1
    ) AS f, bw,
        -- the classes' gap: lowest answerable score over highest unanswerable one, when they separate
        (SELECT min(s.v) FILTER (WHERE s.answerable) AS lo, max(s.v) FILTER (WHERE NOT s.answerable) AS hi
         FROM s) AS g
        CROSS JOIN LATERAL (SELECT g.lo > g.hi AND NOT (f.t > g.hi AND f.t <= g.lo) AS outside) AS x
$fn$;
COMMENT ON FUNCTION rag._calibration_threshold(float8[], float8[], float8) IS
'Internal: rag.calibrate''s threshold, the lowest expected cost with the scores of each class blurred by a '
'logistic kernel of Silverman''s bandwidth (the midpoint of the gap when the classes separate and it falls '
'outside): {min_score, rule, bandwidth, expected_false_abstain, '
'expected_false_answer, grid}; NULL when a class has no score.';

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
    chosen jsonb;
    decided jsonb;
    qemb public.vector;
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
            -- a question written as a JSON array, object or number was asked as that JSON's text, and an id
            -- as an object or array was reported as its text (security round 10)
            OR pg_catalog.jsonb_typeof(e -> 'question') <> 'string'
            OR pg_catalog.jsonb_typeof(e -> 'id') NOT IN ('string', 'number', 'null')
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'every question needs a non-empty "question" and a "kind" of answerable, typo or out_of_corpus',
            HINT = '"question" is a JSON string; "id", if given, a string or a number.';
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
    -- ids name the rows returned and the ids recorded with the threshold: a repeated id (a given one, or one
    -- equal to another question's position, the id of a question without one) made both ambiguous
    SELECT d.id, d.n INTO r FROM (
        SELECT coalesce(e.value ->> 'id', e.ordinality::text) AS id, pg_catalog.count(*) AS n
        FROM pg_catalog.jsonb_array_elements(_calibrate.questions) WITH ORDINALITY AS e
        GROUP BY 1 HAVING pg_catalog.count(*) > 1 ORDER BY 1 LIMIT 1) AS d;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('question ids must be unique: %s appears %s times',
                pg_catalog.quote_literal(rag._quoted_part(r.id)), r.n),
            HINT = 'A question without "id" is named by its position (1, 2, ...).';
    END IF;
    -- every supplied embedding, id and question is checked before the first question runs (security round 9:
    -- a bad embedding of the last question failed only when that question ran, a number out of single
    -- precision with 22003; an id or a question of any length was taken)
    FOR q IN SELECT e FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e LOOP
        i := i + 1;
        IF pg_catalog.length(q ->> 'id') > 200 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('question %s: "id" is %s characters, over the limit of 200', i,
                    pg_catalog.length(q ->> 'id'));
        END IF;
        IF pg_catalog.length(q ->> 'question') > 4000 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'program_limit_exceeded',
                MESSAGE = pg_catalog.format('question %s is %s characters, over the limit of 4000', i,
                    pg_catalog.length(q ->> 'question')),
                HINT = 'The limit of rag.ask: retrieval works on the gist, not on whole documents.';
        END IF;
        -- at most 256 search terms (54000, security round 11), checked here rather than when it runs
        PERFORM rag._fts_query(t.ts_config, q ->> 'question');
        IF pg_catalog.jsonb_typeof(q -> 'query_embedding') = 'array' THEN
            BEGIN
                qemb := (q -> 'query_embedding')::text::public.vector;
            EXCEPTION WHEN data_exception THEN
                qemb := NULL;
            END;
            IF qemb IS NULL OR public.vector_dims(qemb) <> 384 THEN
                RAISE EXCEPTION USING
                    ERRCODE = 'invalid_parameter_value',
                    MESSAGE = pg_catalog.format('question %s: "query_embedding" must be 384 numbers of single '
                        'precision, not %s numbers%s', i, pg_catalog.jsonb_array_length(q -> 'query_embedding'),
                        CASE WHEN qemb IS NULL THEN ' some out of its range' ELSE '' END),
                    HINT = 'Pass the 384 numbers of the question''s all-MiniLM-L6-v2 embedding, or leave the key '
                        || 'out to embed the question in the database.';
            END IF;
            -- a direction, as rag.ask checks it (22023 with its hint)
            PERFORM rag._query_embedding(NULL, NULL, qemb);
        END IF;
    END LOOP;
    i := 0;
    -- "expect" is read after the questions ran: its shape is checked first (security round 8)
    IF EXISTS (
        SELECT FROM pg_catalog.jsonb_array_elements(_calibrate.questions) AS e
        WHERE pg_catalog.jsonb_typeof(e -> 'expect') NOT IN ('array', 'null')
            OR (pg_catalog.jsonb_typeof(e -> 'expect') = 'array'
                AND EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(e -> 'expect') AS x
                            WHERE pg_catalog.jsonb_typeof(x) <> 'string'))
    ) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'a question''s "expect" must be an array of anchors (strings)',
            HINT = 'For example "expect": ["indexes-types.html#INDEXES-TYPES-BTREE"], or leave the key out.';
    END IF;
    -- NaN and Infinity are refused too (NaN <= 0 is false in PostgreSQL: a NaN cost made every cost NaN and
    -- stored a threshold above every score; security round 8)
    IF _calibrate.false_answer_cost IS NULL OR NOT (_calibrate.false_answer_cost > 0
        AND _calibrate.false_answer_cost <= 1e6) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'false_answer_cost must be a number greater than 0 and at most 1000000 (a wrong answer costs '
                || 'that many wrong abstentions)';
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

    -- the lowest expected cost with each score blurred by its class's kernel: no one question decides it
    -- (the midpoint of the gap, before 0.7.0, moved with the highest negative)
    chosen := rag._calibration_threshold(
        ARRAY(SELECT c.score FROM rag._calibration_rows(rows_so_far) AS c WHERE c.answerable),
        ARRAY(SELECT c.score FROM rag._calibration_rows(rows_so_far) AS c WHERE NOT c.answerable),
        _calibrate.false_answer_cost);
    IF chosen IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'data_exception',
            MESSAGE = 'calibration needs a gate score for at least one answerable and one out_of_corpus question',
            HINT = 'Every question of one class scored NULL or NaN (chunks stored with a zero vector?).';
    END IF;
    threshold := (chosen ->> 'min_score')::float8;

    decided := pg_catalog.jsonb_build_object(
        'min_score', threshold,
        'rule', chosen -> 'rule',
        'bandwidth', chosen -> 'bandwidth',
        'expected_false_abstain', chosen -> 'expected_false_abstain',
        'expected_false_answer', chosen -> 'expected_false_answer',
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
    RAISE NOTICE 'calibrate: min_score = % (lowest smoothed cost, bandwidths % / %): % wrong answers, % wrong '
        'abstentions; %', threshold, chosen -> 'bandwidth' ->> 'answerable', chosen -> 'bandwidth' ->> 'out_of_corpus',
        decided ->> 'false_answer', decided ->> 'false_abstain',
        CASE WHEN min_answerable > max_unanswerable
            THEN 'separable, gap ' || round((min_answerable - max_unanswerable)::numeric, 4)
            ELSE 'overlap of ' || round((max_unanswerable - min_answerable)::numeric, 4) END;
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
    SELECT * FROM rag._calibrate(current_user, calibrate.tenant COLLATE "default", calibrate.questions,
        calibrate.false_answer_cost)
$fn$;
COMMENT ON FUNCTION rag.calibrate(text, jsonb, float8) IS
'Runs labelled questions [{id, question, expect, kind, query_embedding (optional: 384 numbers, else embedded '
'in-database)}] against a tenant, chooses its gate threshold '
'(the lowest expected cost with the scores blurred by a kernel of Silverman''s bandwidth, a wrong answer costing '
'false_answer_cost wrong abstentions, negatives beyond the number of answerable questions not tilting it further), '
'stores it in rag.tenant.gate with the ids used, and returns the table it decided from. Needs pgcite_admin.';

REVOKE ALL ON FUNCTION rag.calibrate(text, jsonb, float8) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag.calibrate(text, jsonb, float8) TO pgcite_admin;
