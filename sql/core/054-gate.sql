-- Gate helpers (rag._answer): which of the question's words count as evidence that the passages answer it, and
-- the proper names it spells out. PL/pgSQL, not LANGUAGE sql: with SET search_path a SQL function is never
-- inlined and was parsed and planned again on every ask (and on every call from another function); PL/pgSQL keeps
-- its plans for the session (issue #10, session 10; the same for 039's, 040's, 053's and 055's small helpers).

-- The question's words (lexemes of the corrected question) as evidence, over the top passages p_ids:
--   * generic: in more than 15 % of the tenant's live chunks (p_live of them): such a word says little about what
--     the question asks, so it neither adds to nor takes from the coverage;
--   * found: in a top passage;
--   * bound: found only as the head of a longer term the question does not ask about ("class" where the passages
--     say "operator class"): its most frequent left neighbour in the passages, a content word the question lacks,
--     stands before at least half of its occurrences and at least three of them.
-- coverage = (specific words found and not bound + 0.5) / (specific words + 1): the share of the question's
-- specific words the passages hold, drawn towards 0.5 for short questions (one word found out of one gives 0.75,
-- a question of generic words only 0.5), so coverage alone cannot carry a short or generic question.
CREATE OR REPLACE FUNCTION rag._coverage(
    p_tenant text, p_config regconfig, p_corrected text, p_ids bigint[], p_live bigint
)
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
        WITH q AS (
            SELECT y.lexemes, ARRAY(SELECT pg_catalog.left(l.lexeme, 3) FROM pg_catalog.unnest(y.lexemes) AS l (lexeme))
                AS prefixes
            FROM (
                SELECT pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, coalesce(p_corrected, '')))
                    AS lexemes
            ) AS y
        ),
        tok AS (
            -- each passage's words split once into an array, each with the word before it: the array unnested
            -- beside itself shifted by one (NULL first), so each is read once in order (was a window function over
            -- a sort of every word of the passages, then each word read by subscript, which walks the array from
            -- its start: quadratic in a chunk's words, 86 s of CPU for a stored chunk of 100,000 words; session 22's
            -- review). The shifted array's extra last row has no word.
            SELECT c.chunk_id, u.tok,
                pg_catalog.lower(pg_catalog.regexp_replace(u.tok, '^[^[:alnum:]_]+|[^[:alnum:]_]+$', '', 'g')) AS w,
                u.prev_tok
            FROM rag.chunk AS c
            CROSS JOIN LATERAL pg_catalog.regexp_split_to_array(c.content, '\s+') AS a (toks)
            CROSS JOIN LATERAL ROWS FROM (
                pg_catalog.unnest(a.toks), pg_catalog.unnest(pg_catalog.array_prepend(NULL::text, a.toks))
            ) AS u (tok, prev_tok)
            WHERE c.chunk_id = ANY (p_ids) AND u.tok IS NOT NULL
        ),
        occ AS (
            -- occurrences of the question's words in the passages, with the word before when it is a content word
            -- the question lacks (NULL after punctuation, a stop word or a word of the question)
            SELECT y.lexeme,
                -- (the character tests by right(), left() and translate(), as the regular expressions
                -- '[.,;:!?)\]]$', '^[(\["'']' and '[a-z]' did: fewer distinct patterns per ask, so that the backend's
                -- cache of 32 compiled ones keeps the rest; issue #10, session 15)
                CASE WHEN y.prev_tok IS NULL
                    OR pg_catalog.right(y.prev_tok, 1) IN ('.', ',', ';', ':', '!', '?', ')', ']')
                    OR pg_catalog.left(y.tok, 1) IN ('(', '[', '"', '''')
                    OR y.prev_lexeme IS NULL OR y.prev_lexeme = ANY (q.lexemes)
                    OR pg_catalog.translate(y.pw, 'abcdefghijklmnopqrstuvwxyz', '') = y.pw THEN NULL
                    ELSE y.pw END AS modifier
            FROM (
                SELECT tok.tok, tok.prev_tok, p.pw,
                    (pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, tok.w)))[1] AS lexeme,
                    (pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, p.pw)))[1] AS prev_lexeme
                FROM tok
                CROSS JOIN q
                CROSS JOIN LATERAL (
                    SELECT pg_catalog.lower(pg_catalog.regexp_replace(coalesce(tok.prev_tok, ''),
                        '^[^[:alnum:]_]+|[^[:alnum:]_]+$', '', 'g')) AS pw
                ) AS p
                -- a word whose first three letters are a question word's (the same test as an EXISTS over the
                -- question's words, with their prefixes taken once)
                WHERE pg_catalog.left(tok.w, 3) = ANY (q.prefixes)
            ) AS y, q
        ),
        words AS (
            SELECT l.lexeme,
                EXISTS (
                    SELECT FROM rag.chunk AS c
                    WHERE c.chunk_id = ANY (p_ids) AND c.tsv @@ pg_catalog.quote_literal(l.lexeme)::tsquery
                ) AS found,
                -- in how many live chunks of the tenant the lexeme occurs: one row of rag.tenant_lexeme (was a
                -- count of up to 15 % of the tenant's chunks per word)
                coalesce((
                    SELECT s.live_chunks FROM rag.tenant_lexeme AS s
                    WHERE s.tenant = p_tenant COLLATE "default" AND s.lexeme = l.lexeme COLLATE "default"
                ), 0) > 0.15 * p_live AS generic,
                coalesce((
                    SELECT m.n >= 3 AND m.n >= 0.5 * (SELECT pg_catalog.count(*) FROM occ WHERE occ.lexeme = l.lexeme)
                    FROM (
                        SELECT pg_catalog.count(*) AS n FROM occ
                        WHERE occ.lexeme = l.lexeme AND occ.modifier IS NOT NULL
                        GROUP BY occ.modifier
                        ORDER BY pg_catalog.count(*) DESC
                        LIMIT 1
                    ) AS m
                ), false) AS bound
            FROM q, pg_catalog.unnest(q.lexemes) AS l (lexeme)
        )
        SELECT pg_catalog.jsonb_build_object(
            'coverage', round(((
                (SELECT pg_catalog.count(*) FROM words WHERE NOT words.generic AND words.found AND NOT words.bound) + 0.5)
                / ((SELECT pg_catalog.count(*) FROM words WHERE NOT words.generic) + 1))::numeric, 6),
            'words', coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                'word', words.lexeme, 'found', words.found, 'generic', words.generic, 'bound', words.bound)
                ORDER BY words.lexeme) FROM words), '[]'))
    );
END
$fn$;
COMMENT ON FUNCTION rag._coverage(text, regconfig, text, bigint[], bigint) IS
'Internal: the gate''s coverage of the question''s specific words by the top passages, and each word''s standing '
'(found, generic, bound to a longer term): {coverage, words}.';

-- Proper names the question spells out as asked (before correction lowers it): Capitalized or mixed-case words
-- (Perl, MongoDB, GiST, SQLite) that do not start a sentence, a run of them with any capitals next to them taken
-- as one name ("SQL Server", "Mona Lisa"). Snake_case names come from rag._question_names.
CREATE OR REPLACE FUNCTION rag._proper_names(p_question text)
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        WITH t AS (
            SELECT s.n, s.tok,
                pg_catalog.regexp_replace(s.tok, '^[^[:alnum:]_]+|[^[:alnum:]_]+$', '', 'g') AS word,
                pg_catalog.lag(s.tok) OVER (ORDER BY s.n) AS tok_before
            FROM pg_catalog.regexp_split_to_table(pg_catalog.btrim(coalesce(p_question, '')), '\s+')
                WITH ORDINALITY AS s (tok, n)
        ),
        x AS (
            SELECT t.*,
                t.word ~ '^([A-Z][a-z]+|[A-Z]{2,}[a-z]|[A-Za-z]*[a-z][A-Z])[A-Za-z0-9]*$' AND t.tok_before IS NOT NULL
                    AND t.tok_before !~ '[.!?:]["'')]*$' AS proper,
                -- ~ '^[A-Z][A-Z0-9]+$' by left() and translate() (one regular expression fewer per ask)
                pg_catalog.length(t.word) >= 2
                    AND pg_catalog.translate(pg_catalog.left(t.word, 1), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '') = ''
                    AND pg_catalog.translate(t.word, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', '') = '' AS capitals
            FROM t
        ),
        runs AS (
            -- runs of proper or capital words not broken by punctuation; a run counts when it holds a proper word
            SELECT x.*, pg_catalog.count(*) FILTER (WHERE x.new_run) OVER (ORDER BY x.n) AS grp
            FROM (
                SELECT x0.*, NOT (x0.proper OR x0.capitals)
                    OR NOT coalesce(pg_catalog.lag(x0.proper OR x0.capitals) OVER (ORDER BY x0.n), false)
                    OR x0.tok_before ~ '[^[:alnum:]_]$' AS new_run
                FROM x AS x0
            ) AS x
            WHERE x.proper OR x.capitals
        )
        SELECT coalesce(pg_catalog.array_agg(y.name ORDER BY y.first_n), '{}')
        FROM (
            SELECT z.name, min(z.first_n) AS first_n
            FROM (
                SELECT pg_catalog.string_agg(r.word, ' ' ORDER BY r.n) AS name, min(r.n) AS first_n
                FROM runs AS r
                GROUP BY r.grp
                HAVING pg_catalog.bool_or(r.proper)
            ) AS z
            GROUP BY z.name
        ) AS y
    );
END
$fn$;
COMMENT ON FUNCTION rag._proper_names(text) IS
'Internal: the proper names of a question as asked (Capitalized or mixed-case words not starting a sentence, with '
'adjacent capitals: "SQL Server"), for the gate''s names signal.';

-- Names the question spells out, for the gate: snake_case words such as work_mem or pg_basebackup (of the
-- corrected question, so a misspelt name is already fixed), in order of appearance. A name the question presents as
-- the user's own object ("my big_events", "the created_at column", "table orders_2024") is left out: no
-- corpus can know it.
CREATE OR REPLACE FUNCTION rag._question_names(p_corrected text)
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT coalesce(pg_catalog.array_agg(y.word ORDER BY y.first_n), '{}')
        FROM (
            SELECT x.word, min(x.n) AS first_n
            FROM (
                SELECT s.word, s.n,
                    pg_catalog.lag(s.word) OVER (ORDER BY s.n) AS word_before,
                    pg_catalog.lead(s.word) OVER (ORDER BY s.n) AS word_after
                FROM pg_catalog.regexp_split_to_table(p_corrected, '\s+') WITH ORDINALITY AS s (word, n)
            ) AS x
            -- word characters only, a word character, an underscore and a word character in a row, a letter: one
            -- pattern, as x.word ~ '^[[:alnum:]_]+$' AND x.word ~ '[[:alnum:]]_[[:alnum:]]' AND x.word ~ '[[:alpha:]]'
            -- (the rest of a word of word characters is word characters on either side of that row; a letter is
            -- one of them): two regular expressions fewer per ask, so that the backend's cache of 32 compiled ones
            -- keeps the rest (issue #10, session 17)
            WHERE x.word ~ '^(?=.*[[:alpha:]])[[:alnum:]_]*[[:alnum:]]_[[:alnum:]][[:alnum:]_]*$'
                -- (= ANY of the words the patterns ^(my|our|your|columns?|...)$ matched: two regular expressions
                -- fewer per ask)
                AND NOT coalesce(x.word_before = ANY ('{my,our,your,column,columns,table,tables,field,fields,view,'
                    'views,schema,schemas,database,databases}'::text []), false)
                AND NOT coalesce(x.word_after = ANY ('{column,columns,table,tables,field,fields,view,views,schema,'
                    'schemas,database,databases}'::text []), false)
            GROUP BY x.word
        ) AS y
    );
END
$fn$;
COMMENT ON FUNCTION rag._question_names(text) IS
'Internal: the snake_case names of a corrected question (settings, functions), not the user''s own objects.';

-- The term a short definition question asks about, as a phrase query: "What is a hash map?", "What's a negative
-- index?", "What are multixact IDs used for?" (the term up to a comma or the question mark, a noun phrase of at
-- most four words, after "a", "an" or "the"; of the corrected question, whose "What's" reads "what s"), when it
-- has two lexemes or more in the tenant's configuration; NULL otherwise (a one-word term is left to
-- rag._coverage's generic and bound words). The gate counts it like a name: retrieved chunks that never hold the
-- term's words in that order (each word in any form) do not define it, however often they use each word on its
-- own ("hash" indexes and the visibility "map" do not make a hash map).
CREATE OR REPLACE FUNCTION rag._defined_term(p_config regconfig, p_question text)
RETURNS tsquery
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT CASE WHEN pg_catalog.numnode(x.q) >= 3 THEN x.q END
        FROM (
            SELECT pg_catalog.phraseto_tsquery(p_config, m.a[1]) AS q
            -- only the question up to its first comma or question mark, and only when that is at most 200 characters:
            -- the term ends there, and the lazy match took time quadratic in the text's length (security round 4)
            -- (only a question that begins with what in any case: the pattern matches nothing else, and
            -- regexp_match of NULL is NULL without it; one pattern fewer for the other questions' asks, so that the
            -- backend's cache of 32 compiled ones keeps the rest; issue #10, session 17)
            FROM pg_catalog.regexp_match(CASE WHEN pg_catalog.lower(pg_catalog.left(pg_catalog.btrim(p_question), 4))
                    = 'what' THEN rag._question_head(p_question) END,
                '^what(?:''s|\s+s|\s+is|\s+are)\s+(?:an?\s+|the\s+)?([^,?]+?)(?:\s+used\s+for)?\s*(?:[,?].*)?$', 'i')
                AS m (a)
            WHERE pg_catalog.array_length(pg_catalog.regexp_split_to_array(pg_catalog.btrim(m.a[1]), '\s+'), 1) <= 4
                -- a noun phrase: no article, preposition, pronoun, auxiliary or conjunction ("What is written on a
                -- receipt?" asks for no term)
                AND m.a[1] !~* ('\m(a|an|the|on|in|of|for|to|with|by|from|at|into|about|between|after|before|when|if|'
                    || 'that|which|who|what|how|why|where|do|does|did|is|are|was|were|be|been|can|should|i|we|you|it|'
                    || 'my|your|our|its|this|these|those|and|or|not|no)\M')
        ) AS x
    );
END
$fn$;
COMMENT ON FUNCTION rag._defined_term(regconfig, text) IS
'Internal: the term of a short definition question ("What is a hash map?") as a phrase tsquery when it has two '
'lexemes or more, else NULL; the gate counts it like a name the passages must hold.';

-- Foreign names: question words that name something the tenant's corpus never mentions ("nginx", "awk", "EBS"),
-- for the gate, which counts each like a name the passages lack. A word counts when it is letters only, 3 to 40
-- of them, and
--   * the corpus does not have it (rag.term: no chunk holds it as a word; rag.tenant_lexeme: nor its lexeme, so
--     "indexes" is known from "index"), and it is no stop word (its tsvector is not empty);
--   * spelling correction left it as it is (p_corrected holds it): a typo of a corpus word is corrected, not
--     foreign;
--   * it is no common English word: not a whole word of the model's vocabulary (rag._common_words, which
--     spelling correction uses), nor a form of one: an inflection or derivation of one ("refreshed" from
--     "fresh" after "re", "unreachable", "disconnect"), or two of them joined ("drawbacks": "draw" + "backs",
--     each of at least 3 letters);
--   * the question does not present it as the user's own object (right after my / our / your, or next to table,
--     column, field, view, schema, database), as rag._question_names.
-- Without pgcite_python there is no vocabulary to tell a name from an English word the corpus does not use
-- ("forever", "halfway"): the result is then empty (the signal is off on the core path).
CREATE OR REPLACE FUNCTION rag._foreign_names(p_tenant text, p_config regconfig, p_question text, p_corrected text)
RETURNS text[]
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- the same bound as spelling correction's: at most 16 distinct candidate words per question
    max_words constant integer := 16;
    -- 54000 over 4000 characters, for every caller (rag.ask checks it before); the corrected question is only
    -- looked into for the question's words, so its first 8000 characters suffice (a correction adds at most two
    -- letters to a word of four or more)
    has_question boolean := rag._check_question(p_question, 1);
    fixed text [] := pg_catalog.regexp_split_to_array(pg_catalog.left(coalesce(p_corrected, ''), 8000), '\s+');
    unknown text [];
    forms jsonb;
    common text [];
    out_names text [];
BEGIN
    IF NOT has_question OR pg_catalog.to_regprocedure('rag._common_words(text[])') IS NULL THEN
        RETURN '{}';
    END IF;
    SELECT pg_catalog.array_agg(f.word ORDER BY f.n)
    INTO unknown
    FROM (
        SELECT x.word, min(x.n) AS n
        FROM (
            SELECT m.a[1] AS word, m.n,
                pg_catalog.lag(m.a[1]) OVER (ORDER BY m.n) AS word_before,
                pg_catalog.lead(m.a[1]) OVER (ORDER BY m.n) AS word_after
            FROM pg_catalog.regexp_matches(pg_catalog.lower(coalesce(p_question, '')), '[[:alnum:]_]+', 'g')
                WITH ORDINALITY AS m (a, n)
        ) AS x
        -- 3 to 40 letters a-z, not the user's own object (as rag._question_names): string functions and = ANY, as
        -- the patterns ^[a-z]{3,40}$ and ^(my|our|your|columns?|...)$ did (fewer regular expressions per ask)
        WHERE pg_catalog.length(x.word) BETWEEN 3 AND 40
            AND pg_catalog.translate(x.word, 'abcdefghijklmnopqrstuvwxyz', '') = ''
            AND x.word = ANY (fixed)
            AND NOT coalesce(x.word_before = ANY ('{my,our,your,column,columns,table,tables,field,fields,view,views,'
                'schema,schemas,database,databases}'::text []), false)
            AND NOT coalesce(x.word_after = ANY ('{column,columns,table,tables,field,fields,view,views,schema,'
                'schemas,database,databases}'::text []), false)
            AND pg_catalog.to_tsvector(p_config, x.word) <> ''::tsvector
            -- one probe of term_pkey per word (a scalar subquery; as NOT EXISTS the planner read all of the
            -- tenant's terms once per word, as in rag._correct_question; issue #10, session 15)
            AND (
                SELECT k.term FROM rag.term AS k
                WHERE k.tenant = p_tenant COLLATE "default" AND k.term = x.word COLLATE "default"
            ) IS NULL
            -- and none of its lexemes is the tenant's (a probe of tenant_lexeme_pkey per lexeme, likewise)
            AND NOT EXISTS (
                SELECT FROM pg_catalog.unnest(pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, x.word)))
                    AS l (lx)
                WHERE (
                    SELECT s.lexeme FROM rag.tenant_lexeme AS s
                    WHERE s.tenant = p_tenant COLLATE "default" AND s.lexeme = l.lx COLLATE "default"
                ) IS NOT NULL
            )
        GROUP BY x.word
        ORDER BY min(x.n)
        LIMIT max_words
    ) AS f;
    IF unknown IS NULL THEN
        RETURN '{}';
    END IF;
    -- each word's forms to look up: {word: [[part, ...], ...]}, the word common when all parts of one entry are
    forms := rag._word_forms(unknown);
    EXECUTE 'SELECT rag._common_words($1)' INTO common USING ARRAY(
        SELECT DISTINCT p.part
        FROM pg_catalog.jsonb_each(forms) AS w (word, entries),
            pg_catalog.jsonb_array_elements(w.entries) AS e (entry),
            pg_catalog.jsonb_array_elements_text(e.entry) AS p (part)
    );
    SELECT coalesce(pg_catalog.array_agg(u.word ORDER BY u.n), '{}')
    INTO out_names
    FROM pg_catalog.unnest(unknown) WITH ORDINALITY AS u (word, n)
    WHERE NOT EXISTS (
        SELECT FROM pg_catalog.jsonb_array_elements(forms -> u.word) AS e (entry)
        WHERE NOT EXISTS (
            SELECT FROM pg_catalog.jsonb_array_elements_text(e.entry) AS p (part)
            WHERE NOT p.part = ANY (coalesce(common, '{}'))
        )
    );
    RETURN out_names;
END
$fn$;
COMMENT ON FUNCTION rag._foreign_names(text, regconfig, text, text) IS
'Internal: the question''s words that the tenant''s corpus never uses, that spelling correction left as they are '
'and that are no common English word nor a form of one (rag._common_words; empty without pgcite_python), for the '
'gate''s names signal.';

-- The forms under which a word may be a common English word, for rag._foreign_names: {word: [entry, ...]} of the
-- first 16 words, each entry a list of words that must all be common: the word itself; without an inflection or
-- derivation suffix (-s, -es, -ed, -ing, -ly, -er, -able, -ment, ... leaving at least 3 letters; also with a final
-- "e" restored and a doubled consonant undone: "stopped", "moved"); without a prefix (un-, dis-, re-, non-, ...
-- leaving at least 4 letters; un-, re-, de- also 3: "unzip"), as it is or without a suffix; and split in two words
-- of at least 3 letters each.
CREATE OR REPLACE FUNCTION rag._word_forms(p_words text[])
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        WITH w AS (
            -- at most 16 words (rag._foreign_names' bound), of at most 40 letters
            SELECT DISTINCT u.word FROM pg_catalog.unnest(p_words[1:16]) AS u (word)
            WHERE pg_catalog.length(u.word) BETWEEN 1 AND 40
                AND pg_catalog.translate(u.word, 'abcdefghijklmnopqrstuvwxyz', '') = ''
        ),
        suffixes AS (
            SELECT s.suffix FROM pg_catalog.unnest(ARRAY['s', 'es', 'ed', 'd', 'ing', 'ly', 'er', 'ers', 'est', 'able',
                'ible', 'ment', 'ments', 'ness', 'less', 'ful', 'al', 'ity', 'ation', 'ations', 'ion', 'ions']) AS s (suffix)
        ),
        prefixes AS (
            SELECT p.prefix FROM pg_catalog.unnest(ARRAY['un', 'dis', 're', 'non', 'mis', 'pre', 'in', 'im', 'de', 'over',
                'under', 'out', 'sub', 'co', 'inter', 'multi', 'super', 'anti', 'auto', 'semi']) AS p (prefix)
        ),
        -- a word without one suffix: the stem, the stem with a final "e", the stem with a doubled consonant undone
        stripped (word, base) AS (
            SELECT w.word, w.word FROM w
            UNION
            SELECT w.word, b.base
            FROM w
            INNER JOIN suffixes AS s ON pg_catalog.length(w.word) - pg_catalog.length(s.suffix) >= 3
                AND pg_catalog.right(w.word, pg_catalog.length(s.suffix)) = s.suffix
            CROSS JOIN LATERAL (
                SELECT pg_catalog.left(w.word, -pg_catalog.length(s.suffix)) AS stem
            ) AS t
            CROSS JOIN LATERAL (
                VALUES (t.stem), (t.stem || 'e'),
                    (CASE WHEN t.stem ~ '([b-df-hj-np-tv-z])\1$' THEN pg_catalog.left(t.stem, -1) END)
            ) AS b (base)
            WHERE b.base IS NOT NULL
        ),
        entries (word, entry) AS (
            SELECT s.word, pg_catalog.jsonb_build_array(s.base) FROM stripped AS s
            UNION
            -- without a prefix, then without a suffix
            SELECT w.word, pg_catalog.jsonb_build_array(s2.base)
            FROM w
            INNER JOIN prefixes AS p ON (pg_catalog.length(w.word) - pg_catalog.length(p.prefix) >= 4
                    -- un-, re-, de- also before a word of 3 letters ("unzip", "rerun"), as it is
                    OR p.prefix IN ('un', 're', 'de') AND pg_catalog.length(w.word) = 5)
                AND pg_catalog.left(w.word, pg_catalog.length(p.prefix)) = p.prefix
            CROSS JOIN LATERAL (
                SELECT x.base FROM (SELECT pg_catalog.substr(w.word, pg_catalog.length(p.prefix) + 1) AS rest) AS r
                CROSS JOIN LATERAL (
                    SELECT r.rest AS base
                    UNION
                    SELECT b.base
                    FROM suffixes AS s
                    CROSS JOIN LATERAL (SELECT pg_catalog.left(r.rest, -pg_catalog.length(s.suffix)) AS stem) AS t
                    CROSS JOIN LATERAL (
                        VALUES (t.stem), (t.stem || 'e'),
                            (CASE WHEN t.stem ~ '([b-df-hj-np-tv-z])\1$' THEN pg_catalog.left(t.stem, -1) END)
                    ) AS b (base)
                    WHERE pg_catalog.length(r.rest) - pg_catalog.length(s.suffix) >= 3
                        AND pg_catalog.right(r.rest, pg_catalog.length(s.suffix)) = s.suffix AND b.base IS NOT NULL
                ) AS x
            ) AS s2
            UNION
            -- two words joined
            SELECT w.word, pg_catalog.jsonb_build_array(pg_catalog.left(w.word, i.i), pg_catalog.substr(w.word, i.i + 1))
            FROM w
            CROSS JOIN LATERAL pg_catalog.generate_series(3, pg_catalog.length(w.word) - 3) AS i (i)
        )
        SELECT coalesce(pg_catalog.jsonb_object_agg(g.word, g.entries), '{}')
        FROM (
            SELECT e.word, pg_catalog.jsonb_agg(e.entry ORDER BY e.entry) AS entries FROM entries AS e GROUP BY e.word
        ) AS g
    );
END
$fn$;
COMMENT ON FUNCTION rag._word_forms(text[]) IS
'Internal: the forms under which each word may be a common English word (itself, without an affix, two words '
'joined), as {word: [[part, ...], ...]}, for rag._foreign_names.';
