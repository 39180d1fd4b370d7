-- The question before retrieval: what every entry point does first (rag._prepare_question: check k, the question's
-- length and the tenant, correct its spelling, embed it once), the full-text query of a question and the text the
-- title leg compares titles with. The legs that read them are in 040-retrieve.sql.

CREATE OR REPLACE FUNCTION rag._check_question(question text, k integer)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF k IS NULL OR k < 1 OR k > 100 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('k must be between 1 and 100, not %s', coalesce(k::text, 'NULL'));
    END IF;
    IF pg_catalog.length(question) > 4000 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format('question is %s characters, over the limit of 4000',
                pg_catalog.length(question)),
            HINT = 'Ask a shorter question: retrieval works on the gist, not on whole documents.';
    END IF;
    RETURN question IS NOT NULL AND pg_catalog.btrim(question, E' \t\n\r\f\x0B') <> '';
END
$fn$;
COMMENT ON FUNCTION rag._check_question(text, integer) IS
'Internal: 22023 for k outside 1..100, 54000 for a question over 4000 characters; false when it is empty.';

-- The question's embedding: the caller's (checked), or computed once in-database by rag.embed
-- (of the typo-corrected question when a word was corrected: MiniLM cannot read "vacum").
CREATE OR REPLACE FUNCTION rag._query_embedding(question text, corrected text, query_embedding public.vector)
RETURNS public.vector
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v public.vector;
BEGIN
    IF query_embedding IS NOT NULL THEN
        IF public.vector_dims(query_embedding) <> 384 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = pg_catalog.format('query_embedding has %s dimensions, expected 384',
                    public.vector_dims(query_embedding)),
                HINT = 'Embed the question with all-MiniLM-L6-v2 (384 dimensions), or pass NULL.';
        END IF;
        -- pgvector refuses NaN and infinity; an all-zero vector has no direction (its cosine distance is NaN),
        -- nor one whose squares vanish or overflow in single precision (rag._has_direction)
        IF public.vector_norm(query_embedding) = 'Infinity'::float8 OR NOT rag._has_direction(query_embedding) THEN
            RAISE EXCEPTION USING
                ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'query_embedding must be a non-zero vector of finite numbers',
                HINT = 'Embed the question with all-MiniLM-L6-v2 (384 dimensions), or pass NULL to embed it in '
                    || 'the database.';
        END IF;
        RETURN query_embedding;
    END IF;
    IF pg_catalog.to_regprocedure('rag._embed_end(text)') IS NOT NULL THEN
        -- the worker's vector when rag._prepare_question began this text in the background, else embedded now
        EXECUTE 'SELECT rag._embed_end($1)' INTO v USING rag._embedding_text(question, corrected);
        RETURN v;
    END IF;
    IF pg_catalog.to_regprocedure('rag.embed(text)') IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'no query_embedding given and in-database embedding is not installed',
            HINT = 'Pass query_embedding (all-MiniLM-L6-v2, 384 dims) or CREATE EXTENSION pgcite_python.';
    END IF;
    EXECUTE 'SELECT rag.embed($1)' INTO v USING rag._embedding_text(question, corrected);
    RETURN v;
END
$fn$;
COMMENT ON FUNCTION rag._query_embedding(text, text, public.vector) IS
'Internal (pgcite_owner only): checks a supplied query embedding (22023 unless 384 finite dims, not all zero) '
'or embeds the question once (the background job rag._prepare_question began, when there is one).';

-- The text embedded for a question: the corrected question if a word was corrected, else the question.
CREATE OR REPLACE FUNCTION rag._embedding_text(p_question text, p_corrected text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT CASE WHEN p_corrected = x.plain THEN p_question ELSE p_corrected END
        FROM (
            SELECT coalesce(pg_catalog.string_agg(m.a[1], ' ' ORDER BY m.n), '') AS plain
            FROM pg_catalog.regexp_matches(pg_catalog.lower(p_question), '[[:alnum:]_]+', 'g') WITH ORDINALITY
                AS m (a, n)
        ) AS x
    );
END
$fn$;
COMMENT ON FUNCTION rag._embedding_text(text, text) IS
'Internal: the question as it is embedded (typo-corrected when a word was unknown to the tenant''s corpus).';

-- websearch syntax, but terms are OR-ed (a natural question rarely has every word in one chunk);
-- a query with a negation keeps its AND semantics.
-- A question's full-text query has at most 256 search terms (security round 11): ts_rank_cd's cost grows faster
-- than its terms (500 of a tenant's frequent words ranked over 400 chunks 2 s, 520 of them 9-17 s; a
-- 4,000-character question can hold 2,000), so a query of more than 256 is first reduced to its distinct items
-- (an OR of one item twice ranks and matches as the item once; within an item, so does an AND of one term twice)
-- and refused with 54000 if it still has more. A query of up to 256 terms is the one it always was.
CREATE OR REPLACE FUNCTION rag._fts_query(p_config regconfig, p_text text)
RETURNS tsquery
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    q tsquery := pg_catalog.websearch_to_tsquery(p_config, p_text);
    qt text;
    reduced text;
    n_terms bigint;
BEGIN
    IF q IS NULL THEN
        RETURN NULL;
    END IF;
    qt := CASE WHEN q::text LIKE '%!%' THEN q::text ELSE pg_catalog.replace(q::text, ' & ', ' | ') END;
    IF pg_catalog.numnode(q) <= 511 THEN
        RETURN qt::tsquery;
    END IF;
    -- the query's text as tokens (quoted lexemes with their weights and negation, and operators); the reduction
    -- applies only when they are the whole text (no parentheses: a dictionary that gives several lexemes for
    -- one word); an item is what lies between two top-level |, a conjunct what lies between two & in it
    WITH tok AS (
        SELECT m.t[1] AS t, m.o
        FROM pg_catalog.regexp_matches(qt, '(!?''(?:[^'']|'''')*''(?::[A-D*]+)?|\||&|<->|<[0-9]+>)', 'g')
            WITH ORDINALITY AS m (t, o)
    ),
    placed AS (
        SELECT tok.t, tok.o,
            pg_catalog.count(*) FILTER (WHERE tok.t = '|') OVER (ORDER BY tok.o) AS item,
            pg_catalog.count(*) FILTER (WHERE tok.t IN ('|', '&')) OVER (ORDER BY tok.o) AS conj
        FROM tok
    ),
    conjuncts AS (
        SELECT p.item, p.conj, pg_catalog.string_agg(p.t, ' ' ORDER BY p.o) AS txt, min(p.o) AS o,
            pg_catalog.count(*) FILTER (WHERE p.t LIKE '%''%') AS terms
        FROM placed AS p WHERE p.t NOT IN ('|', '&') GROUP BY p.item, p.conj
    ),
    items AS (
        SELECT d.item, pg_catalog.string_agg(d.txt, ' & ' ORDER BY d.o) AS txt, min(d.o) AS o, sum(d.terms) AS terms
        FROM (SELECT DISTINCT ON (c.item, c.txt) c.* FROM conjuncts AS c ORDER BY c.item, c.txt, c.o) AS d
        GROUP BY d.item
    )
    SELECT pg_catalog.string_agg(u.txt, ' | ' ORDER BY u.o), sum(u.terms)
    INTO reduced, n_terms
    FROM (SELECT DISTINCT ON (i.txt) i.* FROM items AS i ORDER BY i.txt, i.o) AS u
    WHERE (SELECT pg_catalog.string_agg(tok.t, ' ' ORDER BY tok.o) FROM tok) = qt;
    IF reduced IS NULL THEN
        n_terms := (pg_catalog.numnode(q) + 1) / 2;
    END IF;
    IF n_terms > 256 THEN
        RAISE EXCEPTION USING
            ERRCODE = 'program_limit_exceeded',
            MESSAGE = pg_catalog.format(
                'question has %s search terms (a repeated one counted once), over the limit of 256', n_terms),
            HINT = 'Ask a shorter question: retrieval works on the gist, not on whole documents.';
    END IF;
    RETURN reduced::tsquery;
END
$fn$;
COMMENT ON FUNCTION rag._fts_query(regconfig, text) IS
'Internal: websearch_to_tsquery with its AND turned into OR, unless the query negates a term; a query of more '
'than 256 terms is reduced to its distinct items, and 54000 if that still has more than 256.';

-- What every entry point does first: check k and the question's length, check the tenant (42704/42501),
-- correct the question's spelling and embed it once. has_question is false for an empty question.
-- With pgcite_python (ONNX model) the question is embedded in the background: its embedding begins on the
-- backend's worker thread before the spelling correction (again after it, in the rare case a word was
-- corrected) and qemb is NULL: the first statement that reads the vector (rag._candidates' vector leg, after
-- the full-text and title legs) ends it through rag._query_embedding (docs/BENCHMARKS.md, session 18).
CREATE OR REPLACE FUNCTION rag._prepare_question(
    question text, tenant text, k integer, query_embedding public.vector, params jsonb,
    OUT has_question boolean, OUT corrected text, OUT qemb public.vector
)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    begun boolean := false;
    embedded text;
BEGIN
    has_question := rag._check_question(question, k);
    PERFORM rag._require_tenant(tenant);
    IF has_question THEN
        IF query_embedding IS NULL AND pg_catalog.to_regprocedure('rag._embed_begin(text)') IS NOT NULL THEN
            EXECUTE 'SELECT rag._embed_begin($1)' INTO begun USING question;
        END IF;
        corrected := rag._correct_question(tenant, question, params);
        IF begun THEN
            embedded := rag._embedding_text(question, corrected);
            IF embedded IS DISTINCT FROM question THEN
                EXECUTE 'SELECT rag._embed_begin($1)' INTO begun USING embedded;
            END IF;
        END IF;
        IF NOT coalesce(begun, false) THEN
            qemb := rag._query_embedding(question, corrected, query_embedding);
        END IF;
    END IF;
END
$fn$;
COMMENT ON FUNCTION rag._prepare_question(text, text, integer, public.vector, jsonb) IS
'Internal: validates k, question and tenant, then corrects and embeds the question once (qemb NULL: its '
'embedding was begun in the background, rag._query_embedding ends it).';

-- The question as the title leg reads it: its first 500 characters, cut before the word the 500th falls in (the
-- question as rag._correct_question returns it: words joined by single spaces). word_similarity's cost grows
-- with the question's length for each title it scores: at 1M chunks a 3,990-character question cost the title
-- leg 1.0-1.1 s of the 350,000-chunk tenant's 2,426 titles (every one shared a lexeme with it), against 2-9 ms
-- for questions of up to 250 characters; at 500 characters at most about an eighth of that. No question of the
-- dev set or the benchmark (at most 250 characters) is cut (issue #10, session 16). PL/pgSQL: as LANGUAGE sql with
-- SET search_path it was planned again on every call (issue #10, session 20).
CREATE OR REPLACE FUNCTION rag._title_question(p_corrected text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN CASE
        WHEN pg_catalog.length(p_corrected) <= 500 THEN p_corrected
        -- the last space of the first 501 characters ends the last whole word; none: the first 500
        WHEN pg_catalog.strpos(pg_catalog.left(p_corrected, 501), ' ') = 0 THEN pg_catalog.left(p_corrected, 500)
        ELSE pg_catalog.rtrim(pg_catalog.left(p_corrected,
            501 - pg_catalog.strpos(pg_catalog.reverse(pg_catalog.left(p_corrected, 501)), ' ')))
    END;
END
$fn$;
COMMENT ON FUNCTION rag._title_question(text) IS
'Internal: what the title leg compares titles with: the corrected question, cut to its whole words within the '
'first 500 characters.';
