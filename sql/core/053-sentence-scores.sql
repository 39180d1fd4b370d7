-- Sentence scores: every sentence of the top passages scored against the question (stored sentence
-- embeddings, else embedded now, else lexically). The gate reads the best one; quote choice ranks them.

-- Sentences of the passages scored lexically in SQL: the fallback when a passage has no stored sentences and
-- pgcite_python is not installed. Spans from rag._text_spans (052-spans.sql), scored by weights.lexical_share x
-- the share of the question's lexemes (of p_query) the span holds, each lexeme weighted by how specific it is in
-- the tenant of the first passage (rag._term_weights with weights.idf), plus its ts_rank: ts_rank alone is mostly
-- under 0.1, too small next to the margins and preferences of quote choice, which are in the units of a MiniLM
-- similarity.
CREATE OR REPLACE FUNCTION rag._lexical_sentences(p_config regconfig, p_query tsquery, p_passages jsonb)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- rag._quote_weights is defined in 056-quote-forms.sql, after this file: PL/pgSQL resolves it at call time
    w_share float8 := (rag._quote_weights() ->> 'lexical_share')::float8;
    w_idf float8 := coalesce((rag._quote_weights() ->> 'idf')::float8, 0);
    lex_w jsonb := '{}';  -- with weights.idf: each lexeme's weight, from how specific it is in the tenant
BEGIN
    IF w_idf > 0 THEN
        SELECT coalesce(pg_catalog.jsonb_object_agg(x.lexeme, x.weight), '{}') INTO lex_w
        FROM (
            SELECT DISTINCT ON (tw.lexeme) tw.lexeme, tw.weight
            FROM rag.chunk AS c,
                rag._term_weights(c.tenant, p_config, pg_catalog.array_to_string(ARRAY(
                    SELECT pg_catalog.replace(m.a[1], '''''', '''')
                    FROM pg_catalog.regexp_matches(p_query::text, '''((?:[^'']|'''')+)''', 'g') AS m (a)), ' '),
                    w_idf) AS tw
            WHERE c.chunk_id = (p_passages -> 0 ->> 'chunk_id')::bigint AND tw.lexeme IS NOT NULL
            ORDER BY tw.lexeme, tw.weight DESC
        ) AS x;
    END IF;
    RETURN (
    SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
        'chunk_id', x.chunk_id, 'start', x.start_pos, 'end', x.end_pos, 'quote', x.sentence, 'sim', NULL,
        'score', round((w_share * x.share + x.rank)::numeric, 6),
        'share', round(x.share::numeric, 6)
    ) ORDER BY x.chunk_id, x.start_pos), '[]')
    FROM (
        SELECT y.*, pg_catalog.ts_rank(y.tsv, p_query) AS rank,
            CASE WHEN pg_catalog.cardinality(q.lexemes) = 0 THEN 0
            WHEN w_idf = 0 THEN
                pg_catalog.cardinality(ARRAY(SELECT pg_catalog.unnest(pg_catalog.tsvector_to_array(y.tsv))
                    INTERSECT SELECT pg_catalog.unnest(q.lexemes)))::float8 / pg_catalog.cardinality(q.lexemes)
            ELSE (SELECT coalesce(sum(coalesce((lex_w ->> l.x)::float8, 1)), 0)
                    FROM pg_catalog.unnest(q.lexemes) AS l (x) WHERE l.x = ANY (pg_catalog.tsvector_to_array(y.tsv)))
                / (SELECT sum(coalesce((lex_w ->> l.x)::float8, 1)) FROM pg_catalog.unnest(q.lexemes) AS l (x))
            END AS share
        FROM (
            SELECT (p.value ->> 'chunk_id')::bigint AS chunk_id, s.start_pos, s.end_pos,
                pg_catalog.substr(p.value ->> 'content', s.start_pos + 1, s.end_pos - s.start_pos) AS sentence,
                pg_catalog.to_tsvector(p_config,
                    pg_catalog.substr(p.value ->> 'content', s.start_pos + 1, s.end_pos - s.start_pos)) AS tsv
            FROM pg_catalog.jsonb_array_elements(p_passages) AS p,
                rag._text_spans(p.value ->> 'content') AS s
        ) AS y
        CROSS JOIN (
            -- the lexemes of the question's query, as written in its text form ('it''s' stands for it's)
            SELECT ARRAY(SELECT DISTINCT pg_catalog.replace(m.a[1], '''''', '''')
                FROM pg_catalog.regexp_matches(p_query::text, '''((?:[^'']|'''')+)''', 'g') AS m (a)) AS lexemes
        ) AS q
    ) AS x
    );
END
$fn$;
COMMENT ON FUNCTION rag._lexical_sentences(regconfig, tsquery, jsonb) IS
'Internal: the sentence spans of passages (rag._text_spans) scored lexically against the question (share of its '
'lexemes and ts_rank; used when sentences are neither stored nor computable: no pgcite_python).';

-- The content words of a text as the quote scorer compares them: words of letters, digits and "_" longer than
-- two characters, lower case, not stop words, with a small suffix stemmer (plural and verb forms of a word meet).
-- PL/pgSQL: its plan is kept for the session (as a LANGUAGE sql function with SET search_path it was planned again
-- on every call from another function: per span and per question word).
CREATE OR REPLACE FUNCTION rag._content_terms(p_text text)
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT coalesce(pg_catalog.array_agg(DISTINCT x.term ORDER BY x.term), '{}')
        FROM (
            SELECT CASE
                WHEN pg_catalog.length(w.w) > 9 AND pg_catalog.right(w.w, 6) = 'ations' THEN pg_catalog.left(w.w, -6)
                WHEN pg_catalog.length(w.w) > 8 AND pg_catalog.right(w.w, 5) = 'ation' THEN pg_catalog.left(w.w, -5)
                WHEN pg_catalog.length(w.w) > 7 AND pg_catalog.right(w.w, 4) = 'ings' THEN pg_catalog.left(w.w, -4)
                WHEN pg_catalog.length(w.w) > 6 AND pg_catalog.right(w.w, 3) = 'ing' THEN pg_catalog.left(w.w, -3)
                WHEN pg_catalog.length(w.w) > 6 AND pg_catalog.right(w.w, 3) = 'ies' THEN pg_catalog.left(w.w, -3)
                WHEN pg_catalog.length(w.w) > 5 AND pg_catalog.right(w.w, 2) = 'es' THEN pg_catalog.left(w.w, -2)
                WHEN pg_catalog.length(w.w) > 5 AND pg_catalog.right(w.w, 2) = 'ed' THEN pg_catalog.left(w.w, -2)
                WHEN pg_catalog.length(w.w) > 4 AND pg_catalog.right(w.w, 1) = 's' THEN pg_catalog.left(w.w, -1)
                ELSE w.w
            END AS term
            FROM (
                SELECT pg_catalog.lower(m.a[1]) AS w
                FROM pg_catalog.regexp_matches(coalesce(p_text, ''), '[A-Za-z0-9_]+', 'g') AS m (a)
            ) AS w
            WHERE pg_catalog.length(w.w) > 2 AND NOT w.w = ANY ('{a,an,and,are,as,at,be,by,can,could,do,does,did,for,
                from,how,i,if,in,into,is,it,its,me,my,of,on,or,should,so,than,that,the,their,them,then,there,these,
                this,those,to,was,were,what,when,where,which,who,whom,why,will,with,would,you,your,we,our,us,use,used,
                using,about,after,before,between,both,each,few,more,most,other,some,such,only,own,same,too,very,just,
                also,any,all,not,no,nor,one,get,make,want,need}'::text [])
        ) AS x
    );
END
$fn$;
COMMENT ON FUNCTION rag._content_terms(text) IS
'Internal: the distinct stemmed content words of a text (the lexical part of quote scoring).';

-- The content term of each word of p_words, in order: (rag._content_terms(word))[1] for each word of letters, digits
-- and "_" (a word as rag._content_terms splits a text into), NULL for a word that has none (two characters or
-- fewer, a stop word). The same lower case, stop words and stemmer as rag._content_terms, for all the words at once:
-- rag._term_weights took one rag._content_terms call per question word (~10 PL/pgSQL calls per ask; issue #10,
-- session 15). tests/test_quotes.py holds the two to the same terms.
CREATE OR REPLACE FUNCTION rag._word_terms(p_words text[])
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN ARRAY(
        SELECT CASE WHEN pg_catalog.length(w.w) > 2 AND NOT w.w = ANY ('{a,an,and,are,as,at,be,by,can,could,do,does,
                did,for,from,how,i,if,in,into,is,it,its,me,my,of,on,or,should,so,than,that,the,their,them,then,there,
                these,this,those,to,was,were,what,when,where,which,who,whom,why,will,with,would,you,your,we,our,us,use,
                used,using,about,after,before,between,both,each,few,more,most,other,some,such,only,own,same,too,very,
                just,also,any,all,not,no,nor,one,get,make,want,need}'::text [])
            THEN CASE
                WHEN pg_catalog.length(w.w) > 9 AND pg_catalog.right(w.w, 6) = 'ations' THEN pg_catalog.left(w.w, -6)
                WHEN pg_catalog.length(w.w) > 8 AND pg_catalog.right(w.w, 5) = 'ation' THEN pg_catalog.left(w.w, -5)
                WHEN pg_catalog.length(w.w) > 7 AND pg_catalog.right(w.w, 4) = 'ings' THEN pg_catalog.left(w.w, -4)
                WHEN pg_catalog.length(w.w) > 6 AND pg_catalog.right(w.w, 3) = 'ing' THEN pg_catalog.left(w.w, -3)
                WHEN pg_catalog.length(w.w) > 6 AND pg_catalog.right(w.w, 3) = 'ies' THEN pg_catalog.left(w.w, -3)
                WHEN pg_catalog.length(w.w) > 5 AND pg_catalog.right(w.w, 2) = 'es' THEN pg_catalog.left(w.w, -2)
                WHEN pg_catalog.length(w.w) > 5 AND pg_catalog.right(w.w, 2) = 'ed' THEN pg_catalog.left(w.w, -2)
                WHEN pg_catalog.length(w.w) > 4 AND pg_catalog.right(w.w, 1) = 's' THEN pg_catalog.left(w.w, -1)
                ELSE w.w
            END
        END
        FROM (
            SELECT pg_catalog.lower(u.word) AS w, u.n
            FROM pg_catalog.unnest(p_words) WITH ORDINALITY AS u (word, n)
        ) AS w
        ORDER BY w.n
    );
END
$fn$;
COMMENT ON FUNCTION rag._word_terms(text[]) IS
'Internal: the content term of each word (rag._content_terms of the word alone), in order, NULL for none.';

-- How specific each word of a text is in a tenant, for weighting the question's words in span scores: 1 - p_a +
-- p_a x idf, idf = ln(N / df) / ln(N) over the tenant's N live chunks, df the number of them holding the word's
-- lexeme (rag.tenant_lexeme); a word no chunk holds weighs 1. term: the word as rag._content_terms has it (the
-- MiniLM path's overlap), lexeme: as the tenant's configuration has it (the lexical path's share).
CREATE OR REPLACE FUNCTION rag._term_weights(p_tenant text, p_config regconfig, p_text text, p_a float8)
RETURNS TABLE (term text, lexeme text, weight float8)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- the text's words, and their content terms all at once (rag._word_terms: one call, was one
    -- rag._content_terms call per word)
    words text [] := ARRAY(
        SELECT m.a[1]
        FROM pg_catalog.regexp_matches(coalesce(p_text, ''), '[A-Za-z0-9_]+', 'g') WITH ORDINALITY AS m (a, n)
        ORDER BY m.n
    );
    terms text [] := rag._word_terms(words);
BEGIN
    RETURN QUERY
    SELECT w.term, w.lexeme, 1 - p_a + p_a * CASE
        WHEN w.live < 2 OR w.df = 0 THEN 1
        ELSE greatest(ln(w.live::float8 / w.df) / ln(w.live::float8), 0) END
    FROM (
        -- the tenant's live chunks once (an InitPlan; a joined subquery was evaluated again for every word)
        SELECT t.term, l.lexeme, (SELECT rag._live_chunks(p_tenant)) AS live,
            -- one row of rag.tenant_lexeme's primary key per word (a join would read all the tenant's lexemes)
            coalesce((
                SELECT s.live_chunks FROM rag.tenant_lexeme AS s
                WHERE s.tenant = p_tenant COLLATE "default" AND s.lexeme = l.lexeme COLLATE "default"
            ), 0) AS df
        FROM pg_catalog.generate_subscripts(words, 1) AS g (i)
        CROSS JOIN LATERAL (SELECT terms[g.i] AS term) AS t
        CROSS JOIN LATERAL (
            SELECT (pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, words[g.i])))[1] AS lexeme
        ) AS l
        WHERE t.term IS NOT NULL OR l.lexeme IS NOT NULL
    ) AS w;
END
$fn$;
COMMENT ON FUNCTION rag._term_weights(text, regconfig, text, float8) IS
'Internal: how specific each word of a text is in a tenant (1 - a + a x idf over its live chunks), by content term '
'and by lexeme, for weighting the question''s words in span scores (weights.idf).';

-- The question's term weights of rag._sentence_scores (weights.idf; {} without): rag._term_weights of a tenant,
-- each content term once with its highest weight. They depend on the question and the tenant only: rag._answer
-- computes them once, before retrieval (they then run while the question's embedding is computed in the
-- background), for the passages' and the section chunks' spans.
CREATE OR REPLACE FUNCTION rag._tenant_term_weights(p_question text, p_tenant text, p_config regconfig)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- rag._quote_weights is defined in 056-quote-forms.sql, after this file: PL/pgSQL resolves it at call time
    w_idf float8 := coalesce((rag._quote_weights() ->> 'idf')::float8, 0);
    term_w jsonb := '{}';
BEGIN
    IF w_idf > 0 AND p_tenant IS NOT NULL THEN
        SELECT coalesce(pg_catalog.jsonb_object_agg(x.term, x.weight), '{}') INTO term_w
        FROM (
            SELECT DISTINCT ON (tw.term) tw.term, tw.weight
            FROM rag._term_weights(p_tenant, p_config, p_question, w_idf) AS tw
            WHERE tw.term IS NOT NULL
            ORDER BY tw.term, tw.weight DESC
        ) AS x;
    END IF;
    RETURN term_w;
END
$fn$;
COMMENT ON FUNCTION rag._tenant_term_weights(text, text, regconfig) IS
'Internal: {term: weight} of the question''s content terms in a tenant (weights.idf; {} without), for '
'rag._sentence_scores.';

-- The same for the tenant of p_chunk (a chunk of the passages; {} for none): what rag._sentence_scores computes
-- when its caller passes no term weights.
CREATE OR REPLACE FUNCTION rag._question_term_weights(p_question text, p_chunk bigint)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t rag.tenant;
BEGIN
    SELECT x.* INTO t FROM rag.chunk AS c INNER JOIN rag.tenant AS x ON x.tenant = c.tenant WHERE c.chunk_id = p_chunk;
    RETURN rag._tenant_term_weights(p_question, t.tenant, t.ts_config);
END
$fn$;
COMMENT ON FUNCTION rag._question_term_weights(text, bigint) IS
'Internal: {term: weight} of the question''s content terms in the tenant of p_chunk (weights.idf; {} without), '
'for rag._sentence_scores.';

-- Every sentence span of the given chunks scored against the question: MiniLM cosine
-- similarity to the question plus 0.25 x the share of the question's content words it contains, each word
-- weighted by how specific it is in the tenant (rag._term_weights with weights.idf). With weights.context, that
-- similarity is (1 - context) x the sentence's own + context x that of the mean embedding of the sentence and
-- its neighbours in the chunk (the one before and the one after): a sentence that carries on what its neighbours
-- say about the question's subject ranks above one that only shares its words. sim stays the sentence's own
-- similarity (the gate reads it). Sentences and
-- their embeddings come from rag.sentence (stored at ingest); for chunks stored without them,
-- rag._sentence_vectors (pgcite_python) splits and embeds them now. NULL when a chunk has no stored sentences
-- and pgcite_python is not installed, or when they have more sentences than it embeds in one call (256): the
-- caller then scores lexically. p_term_weights: the question's term
-- weights (rag._question_term_weights), NULL to compute them here.
CREATE OR REPLACE FUNCTION rag._sentence_scores(
    p_question text, p_qemb public.vector, p_ids bigint[], p_term_weights jsonb
)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
-- generic plans: every statement here takes arrays or JSON (a custom plan estimates = ANY (p_ids) from the
-- array's length and was chosen on every call, 0.05-0.3 ms of planning each); nested calls inherit it
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    missing jsonb;
    live jsonb := '[]';
    q_terms text[] := rag._content_terms(p_question);
    -- rag._quote_weights is defined in 056-quote-forms.sql, after this file: PL/pgSQL resolves it at call time
    w_idf float8 := coalesce((rag._quote_weights() ->> 'idf')::float8, 0);
    w_ctx float8 := coalesce((rag._quote_weights() ->> 'context')::float8, 0);
    -- with weights.idf: each question term's weight, from how specific it is in the tenant (given by the caller,
    -- else computed here once the chunks are known to be scored here)
    term_w jsonb := p_term_weights;
BEGIN
    SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('chunk_id', c.chunk_id, 'content', c.content))
    INTO missing
    FROM rag.chunk AS c
    WHERE c.chunk_id = ANY (p_ids) AND NOT EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = c.chunk_id);
    IF missing IS NOT NULL THEN
        IF pg_catalog.to_regprocedure('rag._sentence_vectors(jsonb)') IS NULL THEN
            RETURN NULL;
        END IF;
        EXECUTE 'SELECT rag._sentence_vectors($1)' INTO live USING missing;
        -- NULL: more sentences than pgcite_python embeds in one call (udf.MAX_LIVE_SENTENCES, 256): the caller
        -- scores the spans lexically, as without pgcite_python (session 22's review)
        IF live IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    term_w := coalesce(term_w, rag._question_term_weights(p_question, p_ids[1]));
    RETURN (
        -- Neither the chunks' contents nor the sentences' texts: a stored sentence has its content words
        -- (rag.sentence.terms), and quote choice cuts each span's text from its chunk itself. The texts (key quote)
        -- and the overlap (key overlap, a part of score) were written into every sentence's JSON and read by
        -- nothing: without them, and without reading and decompressing the contents, ~0.25 ms less per call at
        -- 1M (issue #10, session 23). Sentences split and embedded now (live) get their content words here, from
        -- the contents rag._sentence_vectors was given.
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'chunk_id', x.chunk_id, 'start', x.start_pos, 'end', x.end_pos, 'sim', round(x.sim::numeric, 6),
            'score', round(((1 - w_ctx) * x.sim + w_ctx * x.ctx + 0.25 * o.overlap)::numeric, 6), 'terms', x.terms
        ) ORDER BY x.chunk_id, x.start_pos), '[]')
        FROM (
            SELECT y.chunk_id, y.start_pos, y.end_pos, 1 - (y.embedding OPERATOR(public.<=>) p_qemb) AS sim,
                CASE WHEN w_ctx > 0 THEN 1 - (public.avg(y.embedding) OVER (PARTITION BY y.chunk_id ORDER BY y.start_pos
                    ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) OPERATOR(public.<=>) p_qemb) ELSE 0 END AS ctx,
                y.terms
            FROM (
                SELECT s.chunk_id, s.start_pos, s.end_pos, s.embedding, s.terms
                FROM rag.sentence AS s
                WHERE s.chunk_id = ANY (p_ids)
                UNION ALL
                SELECT (e ->> 'chunk_id')::bigint, (e ->> 'start')::integer, (e ->> 'end')::integer,
                    (e ->> 'embedding')::public.vector,
                    rag._content_terms(pg_catalog.substr(m.content, (e ->> 'start')::integer + 1,
                        (e ->> 'end')::integer - (e ->> 'start')::integer))
                FROM pg_catalog.jsonb_array_elements(live) AS e
                INNER JOIN (
                    SELECT (c ->> 'chunk_id')::bigint AS chunk_id, c ->> 'content' AS content
                    FROM pg_catalog.jsonb_array_elements(missing) AS c
                    OFFSET 0  -- each content taken out of the JSON once
                ) AS m ON m.chunk_id = (e ->> 'chunk_id')::bigint
            ) AS y
        ) AS x
        CROSS JOIN LATERAL (
            SELECT CASE WHEN pg_catalog.cardinality(q_terms) = 0 THEN 0::float8
                WHEN w_idf = 0 THEN (SELECT count(*) FROM pg_catalog.unnest(x.terms) AS t (term)
                    WHERE t.term = ANY (q_terms))::float8 / pg_catalog.cardinality(q_terms)
                ELSE (SELECT coalesce(sum(coalesce((term_w ->> t.term)::float8, 1)), 0)
                        FROM pg_catalog.unnest(q_terms) AS t (term) WHERE t.term = ANY (x.terms))
                    / (SELECT sum(coalesce((term_w ->> t.term)::float8, 1)) FROM pg_catalog.unnest(q_terms) AS t (term))
                END AS overlap
        ) AS o
    );
END
$fn$;
COMMENT ON FUNCTION rag._sentence_scores(text, public.vector, bigint[], jsonb) IS
'Internal: the sentences of the chunks scored against the question [{chunk_id, start, end, sim, score, terms}] '
'(terms: rag._content_terms of the sentence, stored at ingest), or NULL when some chunk has no '
'stored sentences and pgcite_python is absent or would embed more than 256 of them.';

-- Upper bounds of the span scores rag._sentence_scores gives the stored sentences of the chunks, without the
-- work of scoring them (no chunk text read, no quote cut out, no window of embeddings, no jsonb): per sentence
-- its own similarity and its overlap exactly as there, and the context term at its largest. The context
-- similarity is a cosine, at most 1, so (1 - context) x sim + |context| + 0.25 x overlap >= the score (the
-- overlap from the sentence's stored terms, as there). Only spans of at least 20
-- characters, as the chunks below the passages compete (rag._answer). One row per stored sentence.
CREATE OR REPLACE FUNCTION rag._span_score_bounds(
    p_question text, p_qemb public.vector, p_ids bigint[], p_term_weights jsonb
)
RETURNS TABLE (chunk_id bigint, start_pos integer, end_pos integer, bound float8)
LANGUAGE plpgsql
STABLE
-- generic plans: every statement here takes arrays or JSON (a custom plan estimates = ANY (p_ids) from the
-- array's length and was chosen on every call, 0.05-0.3 ms of planning each); nested calls inherit it
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    q_terms text[] := rag._content_terms(p_question);
    -- rag._quote_weights is defined in 056-quote-forms.sql, after this file: PL/pgSQL resolves it at call time
    w_idf float8 := coalesce((rag._quote_weights() ->> 'idf')::float8, 0);
    w_ctx float8 := coalesce((rag._quote_weights() ->> 'context')::float8, 0);
    term_w jsonb := coalesce(p_term_weights, rag._question_term_weights(p_question, p_ids[1]));
BEGIN
    RETURN QUERY
    SELECT s.chunk_id, s.start_pos, s.end_pos,
        (1 - w_ctx) * (1 - (s.embedding OPERATOR(public.<=>) p_qemb)) + abs(w_ctx) + 0.25 * CASE
            WHEN pg_catalog.cardinality(q_terms) = 0 THEN 0::float8
            WHEN w_idf = 0 THEN (SELECT count(*) FROM pg_catalog.unnest(s.terms) AS t (term)
                WHERE t.term = ANY (q_terms))::float8 / pg_catalog.cardinality(q_terms)
            ELSE (SELECT coalesce(sum(coalesce((term_w ->> t.term)::float8, 1)), 0)
                    FROM pg_catalog.unnest(q_terms) AS t (term) WHERE t.term = ANY (s.terms))
                / (SELECT sum(coalesce((term_w ->> t.term)::float8, 1)) FROM pg_catalog.unnest(q_terms) AS t (term))
            END
    FROM rag.sentence AS s
    WHERE s.chunk_id = ANY (p_ids) AND s.end_pos - s.start_pos >= 20;
END
$fn$;
COMMENT ON FUNCTION rag._span_score_bounds(text, public.vector, bigint[], jsonb) IS
'Internal: per stored sentence of the chunks (spans of 20 characters or more), an upper bound of its '
'rag._sentence_scores score: exact similarity and overlap, the context term at its largest.';

-- The chunks (of p_ids, in their order) whose best span may score p_score or more: those whose upper bound
-- (rag._span_score_bounds) comes within 1e-3 of it (scores are rounded to 6 decimals), and any without stored
-- sentences (no bound: scored as before). rag._answer scores only these of the chunks below the passages.
CREATE OR REPLACE FUNCTION rag._may_score_at_least(
    p_question text, p_qemb public.vector, p_ids bigint[], p_term_weights jsonb, p_score float8
)
RETURNS bigint[]
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN ARRAY(
        SELECT o.id
        FROM pg_catalog.unnest(p_ids) WITH ORDINALITY AS o (id, n)
        LEFT JOIN (
            SELECT b.chunk_id, max(b.bound) AS bound
            FROM rag._span_score_bounds(p_question, p_qemb, p_ids, p_term_weights) AS b
            GROUP BY b.chunk_id
        ) AS b ON b.chunk_id = o.id
        WHERE b.bound IS NULL AND NOT EXISTS (SELECT FROM rag.sentence AS s WHERE s.chunk_id = o.id)
            OR b.bound >= p_score - 1e-3
        ORDER BY o.n
    );
END
$fn$;
COMMENT ON FUNCTION rag._may_score_at_least(text, public.vector, bigint[], jsonb, float8) IS
'Internal: the chunks of p_ids (in order) whose best span of 20 characters or more may score p_score or more '
'(upper bound within 1e-3), for rag._answer''s chunks below the passages.';
