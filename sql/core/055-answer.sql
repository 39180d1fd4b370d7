-- Answer: retrieve -> gate -> pick verbatim sentences -> compose "quote [n]" -> verify -> log.

-- The gate's threshold for a tenant: calibrated (rag.calibrate) over the setting over the default.
-- The gate score combines the evidence signals (see rag._answer), so one threshold suffices.
CREATE OR REPLACE FUNCTION rag._gate_thresholds(p_tenant rag.tenant, p_params jsonb)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT pg_catalog.jsonb_build_object(
            'min_score', coalesce((p_tenant.gate ->> 'min_score')::float8, (p_params ->> 'min_score')::float8),
            'source', CASE WHEN p_tenant.gate ? 'min_score' THEN 'calibrated' ELSE 'setting' END
        )
    );
END
$fn$;
COMMENT ON FUNCTION rag._gate_thresholds(rag.tenant, jsonb) IS
'Internal: the gate threshold of a tenant (calibrated, else the setting min_score of p_params).';

-- At most 60 characters of a caller's value for an error message, marked when cut.
CREATE OR REPLACE FUNCTION rag._quoted_part(p_text text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN pg_catalog.length(p_text) > 60 THEN pg_catalog.left(p_text, 57) || '...' ELSE p_text END
$fn$;
COMMENT ON FUNCTION rag._quoted_part(text) IS
'Internal: a caller''s value as an error message quotes it (at most 60 characters, cut ones end in ...).';

-- The options of rag.ask, checked and completed with their defaults: every key known, every value a JSON
-- number (or integer) within its bounds, generator the name of a generator (sql/core/065-generate.sql); 22023
-- naming the key otherwise.
CREATE OR REPLACE FUNCTION rag._answer_options(p_options jsonb)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    spec CONSTANT jsonb := '{
        "max_quotes": {"default": 2, "min": 1, "max": 10, "integer": true},
        "passages": {"default": 3, "min": 1, "max": 20, "integer": true},
        "quote_margin": {"default": 0.08, "min": 0, "max": 1, "integer": false},
        "rank_penalty": {"default": 0.1, "min": 0, "max": 1, "integer": false},
        "generator": {"default": null, "type": "generator"}
    }';
    o jsonb := coalesce(p_options, '{}');
    e record;
    sp jsonb;
    n numeric;
    out_options jsonb := '{}';
BEGIN
    IF pg_catalog.jsonb_typeof(o) <> 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'options must be a JSON object',
            HINT = 'For example {"max_quotes": 2, "passages": 3}.';
    END IF;
    FOR e IN SELECT x.key, x.value FROM pg_catalog.jsonb_each(o) AS x LOOP
        sp := spec -> e.key;
        IF sp IS NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                -- what a message quotes is bounded: a megabyte of key or value came back whole (0.9.0)
                MESSAGE = pg_catalog.format('unknown option "%s"', rag._quoted_part(e.key)),
                HINT = 'Options: max_quotes, passages, quote_margin, rank_penalty, generator (docs/sql.md).';
        END IF;
        IF sp ->> 'type' = 'generator' THEN
            IF pg_catalog.jsonb_typeof(e.value) <> 'string'
                OR NOT EXISTS (SELECT FROM rag.generator AS g WHERE g.name = e.value #>> '{}') THEN
                RAISE EXCEPTION USING
                    ERRCODE = 'invalid_parameter_value',
                    MESSAGE = pg_catalog.format('option "generator" must name a generator, not %s',
                        rag._quoted_part(e.value::text)),
                    HINT = 'SELECT name FROM rag.generators lists them (docs/generation.md).';
            END IF;
            CONTINUE;
        END IF;
        n := CASE WHEN pg_catalog.jsonb_typeof(e.value) = 'number' THEN (e.value #>> '{}')::numeric END;
        IF n IS NULL OR n < (sp ->> 'min')::numeric OR n > (sp ->> 'max')::numeric
            OR ((sp ->> 'integer')::boolean AND n <> pg_catalog.trunc(n)) THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('option "%s" must be %s from %s to %s, not %s', e.key,
                    CASE WHEN (sp ->> 'integer')::boolean THEN 'an integer' ELSE 'a number' END,
                    sp ->> 'min', sp ->> 'max', rag._quoted_part(e.value::text));
        END IF;
    END LOOP;
    SELECT pg_catalog.jsonb_object_agg(x.key, coalesce(o -> x.key, x.value -> 'default'))
    INTO out_options
    FROM pg_catalog.jsonb_each(spec) AS x;
    RETURN out_options;
END
$fn$;
COMMENT ON FUNCTION rag._answer_options(jsonb) IS
'Internal: rag.ask''s options checked (22023 naming an unknown key, a value of the wrong type or range, or a '
'generator that does not exist) and completed with defaults.';

-- The other chunks of the passages' sections, for quotes (rag._answer's section reach): live chunks of the same
-- document version, anchor and section path as a passage, not passages themselves, each once with the rank of the
-- best-ranked passage of its section; the p_reach nearest (by chunk index) of each passage, nearest first.
-- [{chunk_id, rank, section_of, next}] (section_of: the passage's chunk_id; next: it follows a passage).
CREATE OR REPLACE FUNCTION rag._section_chunks(p_tenant text, p_passages bigint[], p_reach integer)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
-- generic plans: every statement here takes arrays or JSON (a custom plan estimates = ANY (p_ids) from the
-- array's length and was chosen on every call, 0.05-0.3 ms of planning each); nested calls inherit it
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'chunk_id', z.chunk_id, 'rank', z.r, 'section_of', z.passage, 'next', z.next)
            ORDER BY z.r, z.dist, z.chunk_id), '[]')
        FROM (
            SELECT y.*, pg_catalog.row_number() OVER (PARTITION BY y.passage ORDER BY y.dist, y.chunk_id) AS nth
            FROM (
                SELECT DISTINCT ON (c2.chunk_id) c2.chunk_id, o.r, c1.chunk_id AS passage,
                    abs(c2.chunk_index - c1.chunk_index) AS dist,
                    EXISTS (SELECT FROM rag.chunk AS c3 WHERE c3.chunk_id = ANY (p_passages)
                        AND c3.document_id = c2.document_id AND c3.chunk_index = c2.chunk_index - 1) AS next
                FROM pg_catalog.unnest(p_passages) WITH ORDINALITY AS o (id, r)
                -- each passage by primary key, then its section's chunks: the two LATERAL ... OFFSET 0 keep that
                -- order in the generic plan PL/pgSQL caches too, where tenant = $1 is estimated at 0.5 % of the table
                -- (pgcite's tenant columns have no statistics) and the planner otherwise read all of a small
                -- database's chunks of the tenant first (2,700 buffers, 2.5-10 ms per ask on the four manual chapters)
                CROSS JOIN LATERAL (
                    SELECT x.chunk_id, x.document_id, x.doc_key, x.doc_version, x.chunk_index, x.anchor, x.section_path
                    FROM rag.chunk AS x WHERE x.chunk_id = o.id OFFSET 0
                ) AS c1
                -- tenant, doc_key, doc_version: the prefix of chunk's unique index (a document version is unique per
                -- tenant), the tenant in the index's collation (a function's text arguments may arrive in "C")
                CROSS JOIN LATERAL (
                    SELECT x.chunk_id, x.document_id, x.chunk_index
                    FROM rag.chunk AS x
                    WHERE x.tenant = (p_tenant COLLATE "default") AND x.doc_key = c1.doc_key
                        AND x.doc_version = c1.doc_version AND x.document_id = c1.document_id
                        AND x.anchor IS NOT DISTINCT FROM c1.anchor AND x.section_path = c1.section_path
                        AND x.retired_at IS NULL AND NOT x.chunk_id = ANY (p_passages)
                    OFFSET 0
                ) AS c2
                ORDER BY c2.chunk_id, o.r
            ) AS y
        ) AS z
        WHERE z.nth <= p_reach
    );
END
$fn$;
COMMENT ON FUNCTION rag._section_chunks(text, bigint[], integer) IS
'Internal: the other chunks of the passages'' sections, nearest first, ranked as their passage, for quotes '
'(rag._answer''s section reach): [{chunk_id, rank, section_of, next}].';

-- The whole answer pipeline for one question, without logging (rag.ask logs, rag.replay compares).
CREATE OR REPLACE FUNCTION rag._answer(
    p_question text, p_corrected text, p_tenant text, p_k integer, p_qemb public.vector, p_options jsonb,
    p_params jsonb
)
RETURNS TABLE (status text, answer text, reason text, citations jsonb, evidence jsonb, chunk_ids bigint[])
LANGUAGE plpgsql
STABLE
-- bounded work on a few chunks and sentences: parallel workers and JIT cost more than they save (a Gather
-- for 36 sentences took 15-20 ms on the 2-core benchmark machine); nested calls inherit both
SET max_parallel_workers_per_gather = 0
SET jit = off
-- generic plans for its statements and its helpers' (rag._candidates chooses its own): they read a few chunks by
-- primary key from arrays and JSON, and a custom plan, estimated from the array's length and the JSON, was chosen
-- on every call (0.05-0.4 ms of planning each, 32 plans per ask); the same plans whatever the tenant
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    corrected text := p_corrected;
    as_embedded text;  -- the question as embedded (rag._embedding_text), read by the span scores' overlap
    term_weights jsonb;  -- its terms' weights in the tenant (rag._question_term_weights)
    quote_features jsonb;  -- what quote choice reads from the question alone (rag._quote_features)
    q tsquery := rag._fts_query(t.ts_config, corrected);
    thresholds jsonb := rag._gate_thresholds(t, p_params);
    opts jsonb := rag._answer_options(p_options);
    max_quotes integer := (opts ->> 'max_quotes')::integer;
    n_passages integer := (opts ->> 'passages')::integer;
    margin float8 := (opts ->> 'quote_margin')::float8;
    rank_penalty float8 := (opts ->> 'rank_penalty')::float8;
    ranked jsonb;
    ids bigint [];
    n_visible bigint;
    best_sim float8;
    coverage float8;
    covered jsonb;
    names_found float8;
    names text [];
    foreign_names text [];
    defined tsquery;
    best_sentence float8;
    gate_score float8;
    passages jsonb;
    scored jsonb;
    picked jsonb;
    draft text;
    draft_citations jsonb;
    v record;
    gate jsonb;
    fingerprint text;
    failed text [] := '{}';
    reach jsonb := '[]';
    reach_ids bigint [];
    reach_scored jsonb;
    quoted_reach bigint [];
    -- lower chunks (weights.lower): chunks ranked below the passages (down to rank weights.lower, which may be
    -- below k) whose best sentence clearly beats every passage's
    w_lower integer := coalesce((rag._quote_weights() ->> 'lower')::integer, 0);
    lower_ranked jsonb;  -- [{chunk_id, rank}] of the fused ranks n_passages + 1 .. weights.lower
    lower_ids bigint [];
    lower_scored jsonb;
    lower_kept jsonb := '[]';  -- [{chunk_id, rank, counted_as}] of those that compete for quotes
    quoted_lower bigint [];
    -- weights.sibling: how much lower a passage's spans score when they compete as a section chunk of a better-ranked
    -- passage of their section (negative: off)
    w_sibling float8 := coalesce((rag._quote_weights() ->> 'sibling')::float8, -1);
BEGIN
    -- What the gate reads from the question alone, before retrieval: while the question's embedding is computed
    -- in the background (rag._prepare_question), this runs on the backend's thread instead of waiting for it.
    -- The question's names (rag._foreign_names: words the corpus never uses; rag._question_names, rag._proper_names)
    foreign_names := rag._foreign_names(p_tenant, t.ts_config, p_question, corrected);
    names := ARRAY(
        SELECT DISTINCT y.name FROM pg_catalog.unnest(rag._question_names(corrected)
            || ARRAY(SELECT pg_catalog.lower(z.name) FROM pg_catalog.unnest(rag._proper_names(p_question)) AS z (name))
            || foreign_names) AS y (name)
    );
    -- and a short definition question's term (rag._defined_term)
    defined := rag._defined_term(t.ts_config, corrected);
    -- the overlap part of span scores reads the question as embedded: typo-corrected when a word was unknown to
    -- the corpus (rag._embedding_text), as the lexical path's query is
    as_embedded := rag._embedding_text(p_question, corrected);
    -- and its terms' weights in the tenant (rag._tenant_term_weights; the question and the tenant are all they
    -- read), where the span scores will use them whatever the passages: with pgcite_python, which embeds the
    -- sentences of a passage stored without them (the lexical path's condition is read after retrieval, below)
    IF pg_catalog.to_regprocedure('rag._sentence_vectors(jsonb)') IS NOT NULL THEN
        term_weights := rag._tenant_term_weights(as_embedded, t.tenant, t.ts_config);
    END IF;
    -- and what quote choice reads from the question alone, when the question's embedding runs in the background
    -- (no p_qemb): the vector leg waits for it anyway, so this costs an answer nothing; with p_qemb it would
    -- only add to an abstention, and rag._choose_quotes computes it when the gate has passed (issue #10, session 20)
    IF p_qemb IS NULL THEN
        quote_features := rag._quote_features(p_question, corrected);
    END IF;
    SELECT
        coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'rank', x.fused_rank, 'chunk_id', x.chunk_id, 'doc_key', x.doc_key, 'chunk_index', x.chunk_index,
            'anchor', c.anchor, 'title', c.title, 'distance', x.distance, 'vec_rank', x.vec_rank,
            'fts_rank', x.fts_rank, 'fts_score', x.fts_score, 'trgm_rank', x.trgm_rank, 'trgm_score', x.trgm_score,
            'fused_score', x.fused_score
        ) ORDER BY x.fused_rank) FILTER (WHERE x.fused_rank <= p_k), '[]'),
        pg_catalog.array_agg(x.chunk_id ORDER BY x.fused_rank) FILTER (WHERE x.fused_rank <= p_k),
        max(1 - x.distance) FILTER (WHERE x.fused_rank <= p_k),
        pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
            coalesce(pg_catalog.string_agg(x.chunk_id || ':' || x.fused_score, ',' ORDER BY x.fused_rank)
                FILTER (WHERE x.fused_rank <= p_k), ''),
            'UTF8')), 'hex'),
        coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('chunk_id', x.chunk_id, 'rank', x.fused_rank)
            ORDER BY x.fused_rank) FILTER (WHERE x.fused_rank > n_passages), '[]')
    INTO ranked, ids, best_sim, fingerprint, lower_ranked
    FROM rag._candidates(p_tenant, corrected, p_qemb, greatest(p_k * 4, 40), p_params, p_question) AS x
    INNER JOIN rag.chunk AS c ON c.chunk_id = x.chunk_id
    WHERE x.fused_rank <= greatest(p_k, w_lower);
    -- the question's embedding, if it was being computed in the background: rag._candidates' vector leg ended it,
    -- and the worker's vector is read again (no second embedding)
    IF p_qemb IS NULL THEN
        p_qemb := rag._query_embedding(p_question, corrected, NULL);
    END IF;

    n_visible := rag._live_chunks(p_tenant);

    -- Share of the question's specific words (after typo correction; generic words and words bound to a longer
    -- term do not count, short questions are drawn towards 0.5) that the top passages contain: rag._coverage.
    covered := rag._coverage(p_tenant, t.ts_config, corrected, ids[1:n_passages], n_visible);
    coverage := (covered ->> 'coverage')::float8;

    -- The question's names (rag._question_names: settings, functions, not the user's own objects; and
    -- rag._proper_names: products, languages, places as asked): the share of them that the top passages
    -- contain. A passage that never names the setting, function or product asked about does not answer the
    -- question, however close its topic. NULL: the question names none.
    -- Foreign names (rag._foreign_names: words the corpus never uses, not typos of its words, no common English
    -- words: "nginx", "EBS") are names too, never found in the passages.
    -- (the names and the defined term are read from the question before retrieval, above)
    SELECT avg((EXISTS (
        SELECT FROM rag.chunk AS c
        WHERE c.chunk_id = ANY (ids[1:n_passages])
            AND pg_catalog.lower(c.title || ' ' || c.content) ~ ('\m' || x.name || '\M')
    ))::integer)
    INTO names_found
    FROM pg_catalog.unnest(names) AS x (name);
    -- A short definition question's term of two words or more (rag._defined_term) counts as one more name: one of
    -- the chunks retrieved (the k, not only the passages) must hold its words in that order.
    IF defined IS NOT NULL THEN
        SELECT (coalesce(names_found * n.n, 0) + EXISTS (
            SELECT FROM rag.chunk AS c WHERE c.chunk_id = ANY (ids) AND c.tsv @@ defined)::integer)
            / (n.n + 1)
        INTO names_found
        FROM (SELECT pg_catalog.cardinality(names)::float8 AS n) AS n;
    END IF;

    -- the question's term weights, once for the passages' and the section chunks' spans; not for the lexical path
    -- (rag._sentence_scores is NULL when a passage has no stored sentences and pgcite_python is absent). With
    -- pgcite_python they were computed before retrieval (above).
    IF term_weights IS NULL AND NOT EXISTS (
        SELECT FROM pg_catalog.unnest(ids[1:n_passages]) AS r (id)
        WHERE NOT EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = r.id)) THEN
        term_weights := rag._question_term_weights(as_embedded, ids[1]);
    END IF;
    scored := rag._sentence_scores(as_embedded, p_qemb, ids[1:n_passages], term_weights);
    IF scored IS NULL THEN
        -- the passages' texts, for the lexical path only
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('chunk_id', c.chunk_id, 'content', c.content)
            ORDER BY o.n), '[]')
        INTO passages
        FROM pg_catalog.unnest(ids[1:n_passages]) WITH ORDINALITY AS o (chunk_id, n)
        INNER JOIN rag.chunk AS c ON c.chunk_id = o.chunk_id;
        scored := rag._lexical_sentences(t.ts_config, q, passages);
    ELSE
        SELECT max((s ->> 'sim')::float8) INTO best_sentence FROM pg_catalog.jsonb_array_elements(scored) AS s
        WHERE (s ->> 'end')::integer - (s ->> 'start')::integer >= 20;
    END IF;

    -- Gate: the score is the weighted geometric mean of the signals that exist (similarity of the best chunk,
    -- weight 1.75; share of the question's words in the top passages, 1; similarity of the best sentence, 0.5),
    -- so one weak signal cannot be outvoted by the others. The chunk's similarity weighs most: a short question
    -- that shares one word with the corpus gets coverage 0.75 and a close sentence from that word alone, not
    -- a close chunk (#11 gate round 8: 9 -> 7 of 346 calibration negatives answered, false abstentions
    -- unchanged; docs/BENCHMARKS.md). Names the passages lack can only lower it: by the fourth root of
    -- the share found, floored at 0.25, so a question whose one name is missing keeps 0.71 of its score
    -- (a user's own column name is a name the corpus cannot know). The score must reach min_score.
    SELECT round((exp(sum(x.w * ln(greatest(x.v, 1e-6))) / sum(x.w))
        * pg_catalog.power(greatest(coalesce(names_found, 1), 0.25), 0.25))::numeric, 6)::float8
    INTO gate_score
    FROM (VALUES (coalesce(best_sim, 0), 1.75), (coverage, 1.0), (best_sentence, 0.5)) AS x (v, w)
    WHERE x.v IS NOT NULL;
    -- NaN (a chunk stored with a zero vector before 0.3.0) sorts above every number in PostgreSQL: it fails.
    IF gate_score IS NULL OR gate_score = 'NaN'::float8 OR gate_score < (thresholds ->> 'min_score')::float8 THEN
        failed := failed || 'score'::text;
    END IF;
    gate := pg_catalog.jsonb_build_object(
        'signals', pg_catalog.jsonb_build_object(
            'score', gate_score, 'similarity', round(best_sim::numeric, 6), 'coverage', round(coverage::numeric, 6),
            'sentence', round(best_sentence::numeric, 6), 'names', round(names_found::numeric, 6)),
        'thresholds', thresholds, 'failed', pg_catalog.to_jsonb(failed), 'passed', failed = '{}',
        'corrected_question', corrected, 'words', covered -> 'words', 'foreign', pg_catalog.to_jsonb(foreign_names));
    evidence := pg_catalog.jsonb_build_object(
        'chunks', ranked, 'gate', gate, 'complete', n_visible >= p_k, 'visible_chunks', n_visible,
        'fingerprint', fingerprint,
        'sentence_scoring', CASE WHEN best_sentence IS NULL THEN 'lexical' ELSE 'minilm' END);
    chunk_ids := coalesce(ids, '{}');

    IF failed <> '{}' THEN
        status := 'abstained';
        reason := 'no_relevant_sources';
        citations := '[]';
        RETURN NEXT;
        RETURN;
    END IF;

    -- Section reach: the other chunks of the passages' sections (rag._section_chunks), their spans scored the
    -- same way, lowered by weights.section and ranked as their passage, are candidates for quotes too (not for
    -- the gate). A chunk quoted that way is listed in evidence.section_chunks and in chunk_ids. Only with MiniLM
    -- scores from stored sentences: weights.section is a cosine margin, meaningless next to ts_rank's scores,
    -- and embedding a section's chunks at ask time would cost more than the answer. Section and lower chunks
    -- (below) compete for quotes, never for the gate: read once the gate has passed (an abstention needs neither).
    IF best_sentence IS NOT NULL THEN
        reach := rag._section_chunks(p_tenant, ids[1:n_passages], (rag._quote_weights() ->> 'reach')::integer);
    END IF;
    IF pg_catalog.jsonb_array_length(reach) > 0 THEN
        reach_ids := ARRAY(SELECT (e ->> 'chunk_id')::bigint FROM pg_catalog.jsonb_array_elements(reach) AS e);
        IF NOT EXISTS (SELECT FROM pg_catalog.unnest(reach_ids) AS r (id)
            WHERE NOT EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = r.id)) THEN
            reach_scored := rag._sentence_scores(as_embedded, p_qemb, reach_ids, term_weights);
        END IF;
        -- a section chunk is kept when its best span (lowered, with the rank penalty of its passage) comes within
        -- weights.complete of the passages' best span, or when it follows a passage (a block may carry on there):
        -- others could never be quoted, and each span costs quote choice time
        SELECT coalesce(pg_catalog.jsonb_agg(x.s || pg_catalog.jsonb_build_object('score', x.score, 'rank', x.r)
            ORDER BY (x.s ->> 'chunk_id')::bigint, (x.s ->> 'start')::integer), '[]')
        INTO reach_scored
        FROM (
            SELECT s.value AS s, (r ->> 'rank')::integer AS r, (r ->> 'next')::boolean AS next,
                (s.value ->> 'score')::float8 - (rag._quote_weights() ->> 'section')::float8 AS score,
                max((s.value ->> 'score')::float8) OVER (PARTITION BY s.value ->> 'chunk_id')
                    - (rag._quote_weights() ->> 'section')::float8
                    - rank_penalty * ((r ->> 'rank')::integer - 1) AS chunk_best
            FROM pg_catalog.jsonb_array_elements(coalesce(reach_scored, '[]')) AS s
            INNER JOIN pg_catalog.jsonb_array_elements(reach) AS r ON r ->> 'chunk_id' = s.value ->> 'chunk_id'
        ) AS x
        WHERE x.next OR x.chunk_best >= (
            SELECT max((s3 ->> 'score')::float8 - rank_penalty * (o.r - 1))
            FROM pg_catalog.jsonb_array_elements(scored) AS s3
            INNER JOIN pg_catalog.unnest(ids[1:n_passages]) WITH ORDINALITY AS o (id, r)
                ON o.id = (s3 ->> 'chunk_id')::bigint
        ) - (rag._quote_weights() ->> 'complete')::float8;
    END IF;

    -- Lower chunks: a chunk ranked below the passages (fused rank n_passages + 1 to weights.lower, which may reach
    -- below k), not one of their sections' chunks, competes for quotes when its best sentence span (stored
    -- sentence embeddings: the same span score as the passages') beats the best span of every passage by
    -- weights.lower_margin: late-interaction evidence next to the fused rank, not instead of it. It then counts as
    -- rank weights.lower_rank for the rank penalty. A chunk quoted that way is listed in evidence.lower_chunks and
    -- in chunk_ids. Only with MiniLM scores from stored sentences (a margin in cosine units; the lexical path
    -- keeps its passages), and never for the gate.
    IF best_sentence IS NOT NULL AND w_lower > n_passages THEN
        lower_ids := ARRAY(
            SELECT (e ->> 'chunk_id')::bigint FROM pg_catalog.jsonb_array_elements(lower_ranked) AS e
            WHERE (e ->> 'rank')::integer <= w_lower
                AND NOT (e ->> 'chunk_id')::bigint = ANY (coalesce(reach_ids, '{}'))
                AND EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = (e ->> 'chunk_id')::bigint)
            ORDER BY (e ->> 'rank')::integer);
    END IF;
    -- only those whose best span may beat the passages' by the margin are scored (rag._may_score_at_least: an
    -- upper bound of each span's score from the stored sentences; the others could not compete)
    IF pg_catalog.cardinality(lower_ids) > 0 THEN
        lower_ids := rag._may_score_at_least(as_embedded, p_qemb, lower_ids, term_weights, (
            SELECT max((s ->> 'score')::float8) FROM pg_catalog.jsonb_array_elements(scored) AS s
            WHERE (s ->> 'end')::integer - (s ->> 'start')::integer >= 20
        ) + (rag._quote_weights() ->> 'lower_margin')::float8);
    END IF;
    IF pg_catalog.cardinality(lower_ids) > 0 THEN
        lower_scored := rag._sentence_scores(as_embedded, p_qemb, lower_ids, term_weights);
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('chunk_id', y.id, 'rank', y.r,
            'counted_as', least(y.r, (rag._quote_weights() ->> 'lower_rank')::integer)) ORDER BY y.r), '[]')
        INTO lower_kept
        FROM (
            SELECT (e ->> 'chunk_id')::bigint AS id, (e ->> 'rank')::integer AS r,
                (SELECT max((s ->> 'score')::float8) FROM pg_catalog.jsonb_array_elements(lower_scored) AS s
                    WHERE s ->> 'chunk_id' = e ->> 'chunk_id'
                        AND (s ->> 'end')::integer - (s ->> 'start')::integer >= 20) AS chunk_best
            FROM pg_catalog.jsonb_array_elements(lower_ranked) AS e
            WHERE (e ->> 'chunk_id')::bigint = ANY (lower_ids)
        ) AS y
        WHERE y.chunk_best >= (
            SELECT max((s ->> 'score')::float8) FROM pg_catalog.jsonb_array_elements(scored) AS s
            WHERE (s ->> 'end')::integer - (s ->> 'start')::integer >= 20
        ) + (rag._quote_weights() ->> 'lower_margin')::float8;
        SELECT coalesce(pg_catalog.jsonb_agg(s || pg_catalog.jsonb_build_object('rank', (k ->> 'counted_as')::integer)
            ORDER BY (s ->> 'chunk_id')::bigint, (s ->> 'start')::integer), '[]')
        INTO lower_scored
        FROM pg_catalog.jsonb_array_elements(lower_scored) AS s
        INNER JOIN pg_catalog.jsonb_array_elements(lower_kept) AS k ON k ->> 'chunk_id' = s ->> 'chunk_id';
        lower_ids := ARRAY(SELECT (k ->> 'chunk_id')::bigint FROM pg_catalog.jsonb_array_elements(lower_kept) AS k
            ORDER BY (k ->> 'rank')::integer);
    END IF;

    -- A passage of the same section (document version, anchor, section path) as a better-ranked passage competes for
    -- quotes as that passage's section chunk would (its rank, its spans lowered by weights.sibling) when that costs
    -- it less than its own rank penalty: retrieving a chunk of the section never makes its spans count for less
    -- than leaving it to the section reach. Both paths; not for the gate (read above).
    IF w_sibling >= 0 THEN
        SELECT coalesce(pg_catalog.jsonb_agg(CASE
                WHEN sib.r IS NOT NULL AND rank_penalty * (own.r - sib.r) > w_sibling
                THEN s.value || pg_catalog.jsonb_build_object('rank', sib.r,
                    'score', (s.value ->> 'score')::float8 - w_sibling)
                ELSE s.value END ORDER BY (s.value ->> 'chunk_id')::bigint, (s.value ->> 'start')::integer), '[]')
        INTO scored
        FROM pg_catalog.jsonb_array_elements(scored) AS s
        INNER JOIN pg_catalog.unnest(ids[1:n_passages]) WITH ORDINALITY AS own (id, r)
            ON own.id = (s.value ->> 'chunk_id')::bigint
        LEFT JOIN LATERAL (
            SELECT min(o2.r) AS r
            FROM pg_catalog.unnest(ids[1:n_passages]) WITH ORDINALITY AS o2 (id, r)
            INNER JOIN rag.chunk AS c2 ON c2.chunk_id = o2.id
            INNER JOIN rag.chunk AS c1 ON c1.chunk_id = own.id
            WHERE o2.r < own.r AND c2.document_id = c1.document_id AND c2.anchor IS NOT DISTINCT FROM c1.anchor
                AND c2.section_path = c1.section_path
        ) AS sib ON true;
    END IF;

    -- Verbatim quotes (rag._choose_quotes), best first; sources numbered in the order they are first quoted.
    picked := rag._choose_quotes(p_question, corrected,
        ids[1:n_passages] || coalesce(reach_ids, '{}') || coalesce(lower_ids, '{}'),
        scored || coalesce(reach_scored, '[]') || coalesce(lower_scored, '[]'), max_quotes, margin, rank_penalty,
        quote_features);
    -- the section chunks quoted join the evidence (those retrieved below the passages are listed already)
    SELECT coalesce(pg_catalog.array_agg(x.id ORDER BY x.id), '{}') INTO quoted_reach
    FROM (SELECT DISTINCT (e ->> 'chunk_id')::bigint AS id FROM pg_catalog.jsonb_array_elements(picked) AS e) AS x
    WHERE x.id = ANY (coalesce(reach_ids, '{}')) AND NOT x.id = ANY (coalesce(ids, '{}'));
    IF quoted_reach <> '{}' THEN
        chunk_ids := chunk_ids || quoted_reach;
        evidence := evidence || pg_catalog.jsonb_build_object('section_chunks', (
            SELECT pg_catalog.jsonb_agg(r || pg_catalog.jsonb_build_object('doc_key', c.doc_key,
                'chunk_index', c.chunk_index, 'anchor', c.anchor, 'title', c.title) ORDER BY c.chunk_id)
            FROM pg_catalog.jsonb_array_elements(reach) AS r
            INNER JOIN rag.chunk AS c ON c.chunk_id = (r ->> 'chunk_id')::bigint
            WHERE c.chunk_id = ANY (quoted_reach)));
    END IF;
    -- the lower chunks quoted likewise (those within the k are listed in evidence.chunks already, those below
    -- are added to chunk_ids)
    SELECT coalesce(pg_catalog.array_agg(x.id ORDER BY x.id), '{}') INTO quoted_lower
    FROM (SELECT DISTINCT (e ->> 'chunk_id')::bigint AS id FROM pg_catalog.jsonb_array_elements(picked) AS e) AS x
    WHERE x.id = ANY (coalesce(lower_ids, '{}'));
    IF quoted_lower <> '{}' THEN
        chunk_ids := chunk_ids || ARRAY(SELECT x.id FROM pg_catalog.unnest(quoted_lower) AS x (id)
            WHERE NOT x.id = ANY (chunk_ids) ORDER BY x.id);
        evidence := evidence || pg_catalog.jsonb_build_object('lower_chunks', (
            SELECT pg_catalog.jsonb_agg(k || pg_catalog.jsonb_build_object('doc_key', c.doc_key,
                'chunk_index', c.chunk_index, 'anchor', c.anchor, 'title', c.title) ORDER BY (k ->> 'rank')::integer)
            FROM pg_catalog.jsonb_array_elements(lower_kept) AS k
            INNER JOIN rag.chunk AS c ON c.chunk_id = (k ->> 'chunk_id')::bigint
            WHERE c.chunk_id = ANY (quoted_lower)));
    END IF;
    SELECT
        pg_catalog.string_agg((x.q ->> 'quote') || ' [' || x.n || ']', ' ' ORDER BY x.o),
        pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'n', x.n, 'chunk_id', (x.q ->> 'chunk_id')::bigint, 'quote', x.q ->> 'quote') ORDER BY x.o)
    INTO draft, draft_citations
    FROM (
        SELECT e.q, e.o, pg_catalog.dense_rank() OVER (ORDER BY f.first_o) AS n
        FROM pg_catalog.jsonb_array_elements(picked) WITH ORDINALITY AS e (q, o)
        INNER JOIN (
            SELECT e2.q ->> 'chunk_id' AS chunk_id, min(e2.o) AS first_o
            FROM pg_catalog.jsonb_array_elements(picked) WITH ORDINALITY AS e2 (q, o)
            GROUP BY e2.q ->> 'chunk_id'
        ) AS f ON f.chunk_id = e.q ->> 'chunk_id'
    ) AS x;

    SELECT * INTO v FROM rag.verify(draft, draft_citations, chunk_ids);
    status := v.status;
    answer := v.answer;
    reason := v.reason;
    citations := v.citations;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION rag._answer(text, text, text, integer, public.vector, jsonb, jsonb) IS
'Internal: retrieve, gate, pick and verify quotes for one question; no logging (rag.ask logs).';
