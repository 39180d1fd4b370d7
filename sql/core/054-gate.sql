-- Gate helpers (rag._answer): which of the question's words count as evidence that the passages answer it, and
-- the proper names it spells out.

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
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    WITH q AS (
        SELECT pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, coalesce(p_corrected, ''))) AS lexemes
    ),
    tok AS (
        SELECT c.chunk_id, x.n, x.tok,
            pg_catalog.lower(pg_catalog.regexp_replace(x.tok, '^[^[:alnum:]_]+|[^[:alnum:]_]+$', '', 'g')) AS w,
            pg_catalog.lag(x.tok) OVER (PARTITION BY c.chunk_id ORDER BY x.n) AS prev_tok
        FROM rag.chunk AS c,
            pg_catalog.regexp_split_to_table(c.content, '\s+') WITH ORDINALITY AS x (tok, n)
        WHERE c.chunk_id = ANY (p_ids)
    ),
    occ AS (
        -- occurrences of the question's words in the passages, with the word before when it is a content word
        -- the question lacks (NULL after punctuation, a stop word or a word of the question)
        SELECT y.lexeme,
            CASE WHEN y.prev_tok IS NULL OR y.prev_tok ~ '[.,;:!?)\]]$' OR y.tok ~ '^[(\["'']'
                OR y.prev_lexeme IS NULL OR y.prev_lexeme = ANY (q.lexemes) OR y.pw !~ '[a-z]' THEN NULL
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
            WHERE EXISTS (SELECT FROM pg_catalog.unnest(q.lexemes) AS l (lexeme)
                WHERE pg_catalog.left(tok.w, 3) = pg_catalog.left(l.lexeme, 3))
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
$fn$;
COMMENT ON FUNCTION rag._coverage(text, regconfig, text, bigint[], bigint) IS
'Internal: the gate''s coverage of the question''s specific words by the top passages, and each word''s standing '
'(found, generic, bound to a longer term): {coverage, words}.';

-- Proper names the question spells out as asked (before correction lowers it): Capitalized or mixed-case words
-- (Perl, MongoDB, GiST, SQLite) that do not start a sentence, a run of them with any capitals next to them taken
-- as one name ("SQL Server", "Mona Lisa"). Snake_case names come from rag._question_names.
CREATE OR REPLACE FUNCTION rag._proper_names(p_question text)
RETURNS text[]
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
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
            t.word ~ '^[A-Z][A-Z0-9]+$' AS capitals
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
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(pg_catalog.array_agg(y.word ORDER BY y.first_n), '{}')
    FROM (
        SELECT x.word, min(x.n) AS first_n
        FROM (
            SELECT s.word, s.n,
                pg_catalog.lag(s.word) OVER (ORDER BY s.n) AS word_before,
                pg_catalog.lead(s.word) OVER (ORDER BY s.n) AS word_after
            FROM pg_catalog.regexp_split_to_table(p_corrected, '\s+') WITH ORDINALITY AS s (word, n)
        ) AS x
        WHERE x.word ~ '^[[:alnum:]_]+$' AND x.word ~ '[[:alnum:]]_[[:alnum:]]' AND x.word ~ '[[:alpha:]]'
            AND NOT coalesce(x.word_before ~ '^(my|our|your|columns?|tables?|fields?|views?|schemas?|databases?)$', false)
            AND NOT coalesce(x.word_after ~ '^(columns?|tables?|fields?|views?|schemas?|databases?)$', false)
        GROUP BY x.word
    ) AS y
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
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN pg_catalog.numnode(x.q) >= 3 THEN x.q END
    FROM (
        SELECT pg_catalog.phraseto_tsquery(p_config, m.a[1]) AS q
        -- only the question up to its first comma or question mark, and only when that is at most 200 characters:
        -- the term ends there, and the lazy match took time quadratic in the text's length (security round 4)
        FROM pg_catalog.regexp_match(rag._question_head(p_question),
            '^what(?:''s|\s+s|\s+is|\s+are)\s+(?:an?\s+|the\s+)?([^,?]+?)(?:\s+used\s+for)?\s*(?:[,?].*)?$', 'i')
            AS m (a)
        WHERE pg_catalog.array_length(pg_catalog.regexp_split_to_array(pg_catalog.btrim(m.a[1]), '\s+'), 1) <= 4
            -- a noun phrase: no article, preposition, pronoun, auxiliary or conjunction ("What is written on a
            -- receipt?" asks for no term)
            AND m.a[1] !~* ('\m(a|an|the|on|in|of|for|to|with|by|from|at|into|about|between|after|before|when|if|'
                || 'that|which|who|what|how|why|where|do|does|did|is|are|was|were|be|been|can|should|i|we|you|it|'
                || 'my|your|our|its|this|these|those|and|or|not|no)\M')
    ) AS x
$fn$;
COMMENT ON FUNCTION rag._defined_term(regconfig, text) IS
'Internal: the term of a short definition question ("What is a hash map?") as a phrase tsquery when it has two '
'lexemes or more, else NULL; the gate counts it like a name the passages must hold.';
