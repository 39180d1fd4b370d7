-- rag.correct_question's work, as pgcite_owner: the question's spelling corrected against the tenant's words.
-- Until 0.5.0's security round 3, rag.correct_question ran rag._correct_question as the reader (under rag.term's
-- row level security), so readers held EXECUTE on it and on rag._common_words and could call them directly
-- with a question of any length or an array of any size (docs/security.md "Bounded work"). Now only
-- pgcite_owner runs them, here and inside the other SECURITY DEFINER entry points, every query naming the
-- tenant explicitly; they also read rag.word (every tenant's words, once each), which no tenant role may read.

-- The words of p_words (at most 16, lower case, as rag._correct_question's candidates) that are ordinary English
-- words, not typos, for spelling correction: see rag._correct_question below. Needs pgcite_python's
-- rag._common_words (the vocabulary); run only inside the SECURITY DEFINER entry points (sql/core/090).
CREATE OR REPLACE FUNCTION rag._real_words(p_words text[])
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    forms jsonb;
    common text [];
    out_words text [];
BEGIN
    p_words := p_words[1:16];
    IF p_words IS NULL OR pg_catalog.to_regprocedure('rag._common_words(text[])') IS NULL THEN
        RETURN '{}';
    END IF;
    -- real words: each word's forms (rag._word_forms, as the gate's foreign names), their parts looked up at once
    forms := rag._word_forms(p_words);
    EXECUTE 'SELECT rag._common_words($1)' INTO common USING p_words || ARRAY(
        SELECT DISTINCT p.part
        FROM pg_catalog.jsonb_each(forms) AS w (word, entries),
            pg_catalog.jsonb_array_elements(w.entries) AS e (entry),
            pg_catalog.jsonb_array_elements_text(e.entry) AS p (part)
    );
    common := coalesce(common, '{}');
    SELECT coalesce(pg_catalog.array_agg(u.word), '{}')
    INTO out_words
    FROM pg_catalog.unnest(p_words) AS u (word)
    WHERE u.word = ANY (common) OR EXISTS (
        SELECT FROM pg_catalog.jsonb_array_elements(forms -> u.word) AS e (entry)
        WHERE NOT EXISTS (
            SELECT FROM pg_catalog.jsonb_array_elements_text(e.entry) AS p (part)
            WHERE NOT p.part = ANY (common)
        ) AND CASE pg_catalog.jsonb_array_length(e.entry)
            -- one suffix off (the word starts with the base, its final "e" or doubled consonant aside), a
            -- suffix of 3 letters or more only after a stem of 4 ("analyzer", "pointers", "fixes"; not "col" +
            -- "ation"); or one prefix off (the word ends with the base); not both ("co" + "late" + "ion")
            WHEN 1 THEN CASE
                WHEN pg_catalog.starts_with(u.word, pg_catalog.left(e.entry ->> 0, -1)) THEN (
                    SELECT s.stem >= 4 OR pg_catalog.length(u.word) - s.stem <= 2
                    FROM (
                        SELECT pg_catalog.length(e.entry ->> 0)
                            - CASE WHEN pg_catalog.starts_with(u.word, e.entry ->> 0) THEN 0 ELSE 1 END AS stem
                    ) AS s
                )
                ELSE pg_catalog.right(u.word, pg_catalog.length(e.entry ->> 0)) = e.entry ->> 0
            END
            -- not two words joined: typos split into two words too ("treshold" = "tres" + "hold", "singel" =
            -- "sin" + "gel")
            ELSE false
        END
    );
    RETURN out_words;
END
$fn$;
COMMENT ON FUNCTION rag._real_words(text[]) IS
'Internal: the words that are common English words or forms of one (one suffix or one prefix off; '
'rag._word_forms, rag._common_words), which spelling correction leaves as typed; empty without pgcite_python.';

-- Question words the tenant's corpus does not know are replaced by the closest known word (pg_trgm),
-- so "vacum freeze" searches for "vacuum freeze". Words under 4 letters and numbers are kept as they are.
-- A correction must also be a plausible typo: at most 1 edit for words of up to 5 letters, 2 for longer
-- ones (Levenshtein), so a name the corpus lacks ("work_mem", "postgres_fdw") is never cut down to a
-- known word ("work", "postgres") that would hide it from retrieval and from the gate. With that bound
-- the trigram cut-off only finds candidates (0.3, pg_trgm's own default, lets "indx" reach "index");
-- the fewest edits win, then the higher similarity. With pgcite_python, ordinary English words are never
-- corrected: they are not typos. A word is one when it is a whole word of the model's vocabulary
-- (rag._common_words: "spill", "sentence") or a form of one by rag._word_forms (the gate's foreign names use the
-- same forms), restricted to the forms a typo rarely has: one suffix off ("pointers", "analyzer", "fixes"; a
-- suffix of 3 letters or more only after a stem of at least 4), one prefix off ("rename", "resize", "unzip",
-- "defragment"). Not a prefix and a suffix both off, nor a part of 3 letters, nor two words joined: of 2,000
-- one-edit typos of the manual chapters' words, every form would keep 171 as typed ("singel" as "sin" + "gel",
-- "restor" as "res" + "tor", "colation" as "col" + "ation"), these rules with two words of 4+ letters joined 92
-- (4.6 %; "treshold" as "tres" + "hold"), whole words alone 15 (docs/BENCHMARKS.md, 0.7.0, #11 round 6b).
-- Without pgcite_python there is no vocabulary:
-- every word the corpus lacks stays a candidate.
-- The similar words are found through rag.word's trigram index (every tenant's words, once each) and kept only
-- if the tenant has them (rag.term); it runs as pgcite_owner inside the SECURITY DEFINER functions
-- (rag._retrieve, rag._ask, rag._correct_question_for, ...) that checked the caller.
CREATE OR REPLACE FUNCTION rag._correct_question(p_tenant text, p_question text, p_params jsonb)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- 54000 over 4000 characters before any work (rag.ask checks it too; this is the bound for every caller)
    has_question boolean := rag._check_question(p_question, 1);
    words text [] := ARRAY(
        SELECT m.a[1]
        FROM pg_catalog.regexp_matches(pg_catalog.lower(p_question), '[[:alnum:]_]+', 'g') WITH ORDINALITY AS m (a, n)
        ORDER BY m.n
    );
    min_similarity float8 := (p_params ->> 'typo_similarity')::float8;
    max_unknown constant integer := 16;
    unknown text [];
    real_words text [] := '{}';
    corrected text;
    -- pg_trgm's operator % obeys pg_trgm.similarity_threshold, which any session may SET (1: no word is ever
    -- corrected, and the answer changes): pinned to its default for the query below, then given back
    trgm_threshold text := pg_catalog.current_setting('pg_trgm.similarity_threshold', true);
BEGIN
    PERFORM pg_catalog.set_config('pg_trgm.similarity_threshold', '0.3', true);
    -- each unknown word is a trigram search (15-29 ms at 1M chunks): only the first max_unknown distinct ones
    -- that could be corrected (4 to 40 letters, not a number), in question order; the others stay as written
    SELECT pg_catalog.array_agg(f.word ORDER BY f.n)
    INTO unknown
    FROM (
        SELECT u.word, min(u.n) AS n
        FROM pg_catalog.unnest(words) WITH ORDINALITY AS u (word, n)
        -- the tenant's term looked up per word (a scalar subquery, one probe of term_pkey each): as NOT EXISTS
        -- the planner, without statistics on rag.term's columns (010-security.sql), read all of the tenant's
        -- terms once per word (1.4 ms per ask for 3,300 terms, more for a larger tenant; issue #10, session 15)
        -- not only digits and underscores: translate(), as ~ '^[0-9_]+$' did (words are never empty), one regular
        -- expression fewer per ask (the backend caches 32 compiled ones; issue #10, session 15)
        WHERE pg_catalog.length(u.word) BETWEEN 4 AND 40 AND pg_catalog.translate(u.word, '0123456789_', '') <> ''
            AND (
            SELECT k.term FROM rag.term AS k
            WHERE k.tenant = p_tenant COLLATE "default" AND k.term = u.word COLLATE "default"
        ) IS NULL
        GROUP BY u.word
        ORDER BY min(u.n)
        LIMIT max_unknown
    ) AS f;
    IF unknown IS NOT NULL THEN
        real_words := rag._real_words(unknown);
    END IF;

    SELECT coalesce(pg_catalog.string_agg(coalesce(fix.term, w.word), ' ' ORDER BY w.n), '')
    INTO corrected
    FROM pg_catalog.unnest(words) WITH ORDINALITY AS w (word, n)
    LEFT JOIN LATERAL (
        -- the similar words of every tenant's vocabulary (rag.word's own trigram index), kept only if the
        -- tenant has them (term_pkey): only similar words are read, and every suggestion is the tenant's
        SELECT v.word AS term
        FROM rag.word AS v
        WHERE
            w.word = ANY (unknown)  -- the words that could be corrected (4 to 40 letters, not numbers)
            AND NOT (w.word = ANY (real_words))
            AND v.word OPERATOR(public.%) (w.word COLLATE "default")
            AND public.similarity(v.word, w.word) >= min_similarity
            AND public.levenshtein_less_equal(v.word, w.word, 2)
                <= CASE WHEN pg_catalog.length(w.word) <= 5 THEN 1 ELSE 2 END
            -- the tenant's term looked up per similar word (a scalar subquery, one probe of term_pkey each): as
            -- EXISTS the planner, without statistics on rag.term's columns, could join from the tenant's terms
            -- instead and search the trigram index once per term and unknown word (a two-document tenant in a
            -- new database: 16 words x 1,074 terms, 14 s for one question; session 22's review)
            AND (
                SELECT t.term FROM rag.term AS t WHERE t.tenant = p_tenant COLLATE "default" AND t.term = v.word
            ) IS NOT NULL
        ORDER BY public.levenshtein_less_equal(v.word, w.word, 2), public.similarity(v.word, w.word) DESC, v.word
        LIMIT 1
    ) AS fix ON true;
    IF trgm_threshold IS NOT NULL THEN
        PERFORM pg_catalog.set_config('pg_trgm.similarity_threshold', trgm_threshold, true);
    END IF;
    RETURN corrected;
END
$fn$;
COMMENT ON FUNCTION rag._correct_question(text, text, jsonb) IS
'Internal: the question in lower case with unknown words replaced by the nearest word of the tenant''s corpus.';

CREATE OR REPLACE FUNCTION rag._correct_question_for(p_caller name, p_question text, p_tenant text)
RETURNS text
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM rag._authorize(p_caller, p_tenant, 'read');
    -- rag._correct_question checks the question's length itself (54000), for every caller
    RETURN rag._correct_question(p_tenant, p_question, rag._params());
END
$fn$;
COMMENT ON FUNCTION rag._correct_question_for(name, text, text) IS
'Internal (SECURITY DEFINER: runs spelling correction, which tenant roles may not run themselves): '
'rag.correct_question for the checked caller.';

CREATE OR REPLACE FUNCTION rag.correct_question(question text, tenant text)
RETURNS text
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT rag._correct_question_for(current_user, correct_question.question COLLATE "default", correct_question.tenant)
$fn$;
COMMENT ON FUNCTION rag.correct_question(text, text) IS
'The question as retrieval reads it: lower case, with words the tenant''s corpus does not know replaced by the '
'nearest known word. A client that embeds questions itself embeds this text when it differs from the question''s '
'words (rag.ask does the same).';
GRANT EXECUTE ON FUNCTION rag.correct_question(text, text) TO pgcite_reader;
