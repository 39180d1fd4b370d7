-- Quote forms: what the question's form asks for and how well a span's form suits it (rag._choose_quotes, in
-- 058-quote-choice.sql, uses them). A candidate's score is the MiniLM similarity of its best sentence plus
-- 0.25 x the share of the question's content words it holds, plus small preferences taken from the question's
-- form: the names it spells out (settings, functions, commands, options), for "how do I" questions the sentences
-- that say what to do, for "why" questions the ones that give a reason, for "what is X" questions the one that
-- defines X. Nothing here needs PL/Python: the core path gets the same quotes from the same spans and scores.
-- The helpers are PL/pgSQL, not LANGUAGE sql: with SET search_path a SQL function is never inlined, and one called
-- from another function (per span, per candidate) was parsed and planned again on every call, ~69 % of quote
-- choice's time; PL/pgSQL keeps its plans for the session (issue #10, session 10).

-- The action of a how-do-I question ("How do I remove ...?", "How can I safely rebuild ...?", "How to copy ...?"):
-- its verb, lower case, and the verb's inflections (remove, removes, removed, removing; copy, copies, copied,
-- copying; drop, drops, dropped, dropping; a few irregular forms), or NULL when the question has no such verb or
-- the verb is generic (do, make, get, use, have, ...: they say nothing about what a span should do).
CREATE OR REPLACE FUNCTION rag._question_action(p_question text)
RETURNS text[]
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT CASE WHEN v.v IS NOT NULL AND v.v <> ALL (ARRAY['do', 'does', 'make', 'get', 'use', 'have', 'be',
            'go', 'take', 'put', 'see', 'know', 'tell', 'let', 'need', 'want', 'try', 'work', 'deal', 'handle', 'find',
            'say', 'come', 'give', 'keep', 'look', 'run'])
            THEN CASE
                WHEN v.v ~ '[^aeiou]y$' THEN ARRAY[v.v, pg_catalog.left(v.v, -1) || 'ies',
                    pg_catalog.left(v.v, -1) || 'ied', v.v || 'ing']
                WHEN v.v ~ 'ee$' THEN ARRAY[v.v, v.v || 's', v.v || 'd', v.v || 'ing']
                WHEN v.v ~ 'e$' THEN ARRAY[v.v, v.v || 's', v.v || 'd', pg_catalog.left(v.v, -1) || 'ing']
                WHEN v.v ~ '(s|sh|ch|x|z)$' THEN ARRAY[v.v, v.v || 'es', v.v || 'ed', v.v || 'ing']
                -- a short verb doubles its last consonant: drop, dropped, dropping
                WHEN v.v ~ '^[^aeiou]*[aeiou][^aeiouwxy]$' THEN ARRAY[v.v, v.v || 's',
                    v.v || pg_catalog.right(v.v, 1) || 'ed', v.v || pg_catalog.right(v.v, 1) || 'ing']
                ELSE ARRAY[v.v, v.v || 's', v.v || 'ed', v.v || 'ing']
            END
            -- irregular past forms
            || CASE v.v WHEN 'rebuild' THEN ARRAY['rebuilt'] WHEN 'build' THEN ARRAY['built']
                WHEN 'write' THEN ARRAY['wrote', 'written'] WHEN 'choose' THEN ARRAY['chose', 'chosen']
                WHEN 'begin' THEN ARRAY['began', 'begun'] WHEN 'send' THEN ARRAY['sent'] WHEN 'lose' THEN ARRAY['lost']
                ELSE '{}'::text [] END
        END
        FROM (
            -- (the pattern only for a head that begins with "how" in any case: it matches nothing else, and
            -- regexp_match of NULL is NULL without the pattern; each question-form pattern used only by the questions
            -- of its form keeps an ask's patterns within the backend's cache of 32 compiled ones; issue #10,
            -- session 17)
            SELECT pg_catalog.lower((pg_catalog.regexp_match(CASE
                WHEN pg_catalog.lower(pg_catalog.left(pg_catalog.btrim(p_question), 3)) = 'how'
                    THEN rag._question_head(p_question) END,
                '^(?:how\s+(?:do|can|should|would|could|must|may)\s+(?:i|we|you|one)|how\s+to)\s+'
                || '(?:(?:safely|quickly|correctly|properly|automatically|manually|efficiently|easily|reliably|completely|'
                || 'temporarily|permanently|best)\s+)?([a-z]{2,})\M', 'i'))[1]) AS v
        ) AS v
    );
END
$fn$;
COMMENT ON FUNCTION rag._question_action(text) IS
'Internal: the verb of a how-do-I question ("How do I remove ...?") and its inflections (remove, removes, '
'removed, removing), or NULL when there is none or it is generic (do, make, get, use, have, ...).';

-- What the question's form asks for: the names it spells out, whether it asks how to do something, why, or what
-- something is (the content words of that something).
CREATE OR REPLACE FUNCTION rag._question_features(p_question text)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- The question in lower case and its first four letters, for the tests that run a question-form pattern only
    -- when the question holds the words that pattern spells out (its case-insensitive letters are ASCII, which
    -- lower() maps as ~* matches them): the pattern could match nothing else, so each result is the same, and a
    -- question uses only the patterns of its form. An ask used more distinct patterns than the backend keeps
    -- compiled (32, least recently used out), and these, used once per ask, were compiled again on most asks
    -- (0.04-0.14 ms each; issue #10, session 17).
    lq text := pg_catalog.lower(p_question);
    first4 text := pg_catalog.lower(pg_catalog.left(pg_catalog.btrim(p_question), 4));
BEGIN
    RETURN (
        pg_catalog.jsonb_build_object(
            -- names: snake_case words, dotted file names, psql meta-commands (\dF), command-line options (-X,
            -- --single-transaction), function calls (lower(...)), SQL words and acronyms in capitals (VACUUM, GIN),
            -- mixed-case product words (GiST); in order of appearance, once each
            'names', coalesce((
                SELECT pg_catalog.to_jsonb(pg_catalog.array_agg(y.name ORDER BY y.first_n))
                FROM (
                    SELECT x.name, min(x.n) AS first_n
                    FROM (
                        SELECT CASE WHEN m.a[2] IS NOT NULL THEN m.a[2] || '(' ELSE m.a[1] END AS name, m.n
                        FROM pg_catalog.regexp_matches(p_question,
                            '(?:^|[\s(''"])(\\[A-Za-z+]+|--?[A-Za-z][A-Za-z0-9-]*|[A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]'
                            || '|[A-Za-z][A-Za-z0-9_]*\.[a-z]{2,5}|([A-Za-z][A-Za-z0-9_]*)\(|[A-Z][A-Z0-9]{2,}'
                            || '|[A-Z]?[a-z]+[A-Z][A-Za-z]*)(?=$|[\s,.;:?!)''"(]|(?<=\())', 'g')
                            WITH ORDINALITY AS m (a, n)
                    ) AS x
                    -- a letter (translate(), as ~ '[A-Za-z]': one regular expression fewer per ask)
                    WHERE pg_catalog.translate(x.name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', '')
                        <> x.name
                    GROUP BY x.name
                ) AS y
            ), '[]'),
            -- (each alternative holds how, need, have, what, which or "is there a way")
            'howto', CASE WHEN pg_catalog.strpos(lq, 'how') = 0 AND pg_catalog.strpos(lq, 'need') = 0
                AND pg_catalog.strpos(lq, 'have') = 0 AND pg_catalog.strpos(lq, 'what') = 0
                AND pg_catalog.strpos(lq, 'which') = 0 AND pg_catalog.strpos(lq, 'is there a way') = 0 THEN false
                ELSE p_question ~* ('\m(how (do|can|should|would|could|must|may) (i|we|you|one)|how to'
                || '|(do|should|must|can|would) (i|we) (need|have) to|what (should|must|do|can) (i|we) (do|use|set|run)'
                || '|(which|what) (\w+ )?(command|setting|parameter|option|function|tool|program|utility|configuration)s?'
                || '|is there a way|(which|what) ways? (do|can|should|could|may) (i|we|you|one)'
                || '|what (am|are) (i|we) (supposed|expected|meant) to do)\M') END,
            'why', CASE WHEN pg_catalog.strpos(lq, 'why') = 0 THEN false ELSE p_question ~* '\mwhy\M' END,
            -- a how-do-I question's verb and its inflections (rag._question_action); NULL otherwise
            'action', pg_catalog.to_jsonb(rag._question_action(p_question)),
            -- asks for a number: how many / how much / how long / how often, a maximum, a minimum, a limit
            -- (each alternative holds one of these words)
            'quantity', CASE WHEN p_question IS NOT NULL AND NOT EXISTS (
                    SELECT FROM pg_catalog.unnest('{how many,how much,how long,how often,how large,how big,how old,'
                        'how far,how frequently,how soon,how fast,maximum,minimum,limit,at most,at least,largest,'
                        'smallest,highest,lowest,longest,shortest}'::text []) AS w (w)
                    WHERE pg_catalog.strpos(lq, w.w) > 0) THEN false
                ELSE p_question ~* ('\mhow (many|much|long|often|large|big|old|far|frequently|soon|fast)\M'
                || '|\m(maximum|minimum|limit|limits|at most|at least|largest|smallest|highest|lowest|longest|'
                || 'shortest)\M') END,
            -- the condition the question sets ("... when one of the columns is NULL?", "if I strip ...", "Without
            -- WAL archiving, ..."): its content words, and whether it is an absence (no, none, not, without, off,
            -- empty, ...); NULL when the question sets none (a question word "When should I ...?" is not one)
            'condition', (
                SELECT CASE WHEN pg_catalog.cardinality(rag._content_terms(m.a[2])) > 0
                    THEN pg_catalog.jsonb_build_object('terms', pg_catalog.to_jsonb(rag._content_terms(m.a[2])),
                        'absent', pg_catalog.lower(m.a[1]) IN ('without', 'unless')
                            OR m.a[2] ~* ('\m(no|not|none|nothing|never|empty|missing|omit|omits|omitted|off|'
                                || 'zero)\M|n''t\M'))
                    END
                -- the condition's words up to 200 characters: [^,;?]+ cut by left() matches as [^,;?]{1,200} did
                -- (nothing follows it in the pattern), and a bounded repetition of 200 made this pattern cost
                -- ~1.6 ms to compile, again on every ask once other patterns pushed it out of the backend's cache
                -- of 32 compiled regular expressions (issue #10, session 14)
                FROM (
                    SELECT ARRAY[r.a[1], pg_catalog.left(r.a[2], 200)] AS a
                    -- (only a question holding if, when, unless or without; regexp_match of NULL is NULL, as for
                    -- a question that sets no condition)
                    FROM pg_catalog.regexp_match(CASE WHEN pg_catalog.strpos(lq, 'if') > 0
                            OR pg_catalog.strpos(lq, 'when') > 0 OR pg_catalog.strpos(lq, 'unless') > 0
                            OR pg_catalog.strpos(lq, 'without') > 0 THEN p_question END,
                        '\m(if|when|whenever|unless|without)\s+(?!(?:should|must|is|are|was|were|do|does|did|can|'
                        || 'could|would|will|to)\M)([^,;?]+)', 'i') AS r (a)
                ) AS m
            ),
            -- "Which archive format does ...?", "What weights do ...?": the kind of thing asked for (one to three
            -- words between which/what and an auxiliary verb), its content words; NULL otherwise
            'asks_for', (
                SELECT CASE WHEN pg_catalog.cardinality(rag._content_terms(m.a[1])) BETWEEN 1 AND 3
                    THEN pg_catalog.to_jsonb(rag._content_terms(m.a[1])) END
                -- (only a question that begins with which or what)
                FROM pg_catalog.regexp_match(CASE WHEN first4 IN ('whic', 'what') THEN rag._question_head(p_question) END,
                    '^(?:which|what)\s+(?!(?:does|do|did|is|are|was|were|can|could|should|would|will|must|has|have|'
                    || 'had|if|of|about|happens|kind|kinds|type|types|sort)\M)((?:[A-Za-z_][A-Za-z0-9_-]*\s+){0,2}?'
                    || '[A-Za-z_][A-Za-z0-9_-]*)\s+(?:does|do|did|is|are|was|were|can|could|should|would|will|must|has|'
                    || 'have|had)\M', 'i') AS m (a)
            ),
            -- "What is X?", "What are X?", "What is X used for?" (X up to a comma or the question mark): X's content
            -- words, when X is short (at most five words); NULL otherwise
            'defines', (
                SELECT CASE WHEN pg_catalog.cardinality(rag._content_terms(m.a[1])) BETWEEN 1 AND 5
                    AND pg_catalog.array_length(pg_catalog.regexp_split_to_array(pg_catalog.btrim(m.a[1]), '\s+'), 1)
                        <= 5
                    THEN pg_catalog.to_jsonb(rag._content_terms(m.a[1])) END
                -- the question up to its first comma or question mark, at most 200 characters (rag._question_head)
                -- (only a question that begins with what)
                FROM pg_catalog.regexp_match(CASE WHEN first4 = 'what' THEN rag._question_head(p_question) END,
                    '^what(?:''s|\s+is|\s+are)\s+(?:an?\s+|the\s+)?([^,?]+?)(?:\s+used\s+for)?\s*(?:[,?].*)?$', 'i')
                    AS m (a)
            )
        )
    );
END
$fn$;
COMMENT ON FUNCTION rag._question_features(text) IS
'Internal: what a question''s form asks for, for choosing quotes: {names, howto, why, action, quantity, '
'condition, asks_for, defines}.';

-- What quote choice reads from the question alone (rag._choose_quotes' p_features): its form as asked (capitals,
-- punctuation; rag._question_features), the quote weights, and the names of the question as asked and as
-- corrected (a misspelt setting name corrected). About 0.4 ms of regular expressions: rag._answer computes it
-- before retrieval when the question's embedding runs in the background, where it costs no time (the vector leg
-- waits for the embedding anyway; issue #10, session 20).
CREATE OR REPLACE FUNCTION rag._quote_features(p_question text, p_corrected text)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    asked jsonb := rag._question_features(p_question);
BEGIN
    RETURN asked || pg_catalog.jsonb_build_object(
        'weights', rag._quote_weights(),
        'names', coalesce((SELECT pg_catalog.to_jsonb(pg_catalog.array_agg(x.name ORDER BY x.o)) FROM (
            SELECT DISTINCT ON (y.name) y.name, y.o FROM (
                SELECT e.name, e.o FROM pg_catalog.jsonb_array_elements_text(
                    asked -> 'names') WITH ORDINALITY AS e (name, o)
                UNION ALL
                SELECT c.name, 1000 + c.o FROM pg_catalog.unnest(rag._question_names(p_corrected))
                    WITH ORDINALITY AS c (name, o)
            ) AS y ORDER BY y.name, y.o
        ) AS x), '[]'));
END
$fn$;
COMMENT ON FUNCTION rag._quote_features(text, text) IS
'Internal: what quote choice reads from the question alone (rag._question_features of the question as asked, '
'the quote weights, the names of the question as asked and as corrected), for rag._choose_quotes.';

-- The structural kind of a span from its first characters: code (a fence), table (a row), note (a quoted line),
-- heading, list (an item's first sentence), or text.
CREATE OR REPLACE FUNCTION rag._span_kind(p_span text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- the span after its leading blanks and tabs, and after its leading blanks: the first four tests by string
    -- functions, as the patterns ^[ \t]*(```|~~~), ^[ \t]*\|, ^[ \t]*> and ^ {0,3}#{1,6}([ \t]|$) did (a heading:
    -- at most 3 blanks, then a run of 1 to 6 '#' followed by a blank, a tab or the end): four regular expressions
    -- fewer per ask, so that the backend's cache of 32 compiled ones keeps the rest (issue #10, session 15)
    t text := pg_catalog.ltrim(p_span, E' \t');
    h text := pg_catalog.ltrim(p_span, ' ');
    hashes integer := pg_catalog.length(h) - pg_catalog.length(pg_catalog.ltrim(h, '#'));
BEGIN
    RETURN (
        CASE
            WHEN pg_catalog.left(t, 3) IN ('```', '~~~') THEN 'code'
            WHEN pg_catalog.left(t, 1) = '|' THEN 'table'
            WHEN pg_catalog.left(t, 1) = '>' THEN 'note'
            WHEN pg_catalog.length(p_span) - pg_catalog.length(h) <= 3 AND hashes BETWEEN 1 AND 6
                AND pg_catalog.substr(h, hashes + 1, 1) IN (' ', E'\t', '') THEN 'heading'
            WHEN p_span ~ '^[ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+\S' THEN 'list'
            ELSE 'text'
        END
    );
END
$fn$;
COMMENT ON FUNCTION rag._span_kind(text) IS
'Internal: code, table, note, heading, list or text, from the first characters of a sentence span.';

-- Whether a span says what to do: code (not a query shown with its output), an imperative ("Use ...", "Set ...",
-- also as a list item or note), a purpose clause followed by what to do ("To remove an index, use ..."), advice
-- ("you can/should/need to", "administrators might wish to", "it is recommended to", "the easiest way", a method
-- "by increasing ..."), or an SQL command.
CREATE OR REPLACE FUNCTION rag._says_what_to_do(p_span text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    verbs CONSTANT text := 'Use|Set|Run|Create|Add|Execute|Specify|Call|Issue|Pass|Make|Put|Configure|Enable|'
        || 'Disable|Consider|Avoid|Try|Write|Drop|Remove|Ensure|Choose|Start|Stop|Install|Edit|Change|Include|Exclude|Omit|'
        || 'Copy|Restore|Resolve|End|Connect|Perform|Follow|Keep|Check|Increase|Decrease|Lower|Raise|'
        || 'Schedule|Rebuild|Define|Map|Mark|Send|Pipe|Reload|Restart|Rotate|Store|Test|Monitor|Place|Give|'
        || 'Take|Do|Never|Always|Be sure|Make sure|Instead|Alternatively|Simply|Just';
BEGIN
    RETURN
        -- code that is not a demonstration (a query shown with its output)
        -- (a line opening a fence: its lines by string_to_array, as ~ '(^|\n)[ \t]*(```|~~~)' found it, one
        -- regular expression fewer per ask; issue #10, session 15)
        (CASE WHEN p_span IS NOT NULL THEN EXISTS (
                SELECT FROM pg_catalog.unnest(pg_catalog.string_to_array(p_span, E'\n')) AS l (line)
                WHERE pg_catalog.left(pg_catalog.ltrim(l.line, E' \t'), 3) IN ('```', '~~~')
            ) END AND p_span !~ '\n[ \t]*(-{3,}[-+]*|\(\d+ rows?\)|\?column\?)[ \t]*(\n|$)')
        -- an imperative, also as a list item or a note; not a verb that begins a noun phrase, the subject of the
        -- sentence ("Stop words are ...", "Check constraints can ...")
        OR p_span ~ ('^([ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+|[ \t]*>[ \t]*(\*\*[A-Za-z]+:\*\*[ \t]*)?)?('
            || verbs || ')\M') AND p_span !~ ('^([ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+|[ \t]*>[ \t]*(\*\*[A-Za-z]+:\*\*'
            || '[ \t]*)?)?[A-Z][a-z]+ [a-z]+s (is|are|was|were|can|cannot|may|might|will|must|should|do|does|'
            || 'have|has)\M')
        -- a purpose clause and then what to do: "To remove an index, use ..."
        OR p_span ~* ('^([ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+)?(to|in order to) [^.,]+, (you |it is |(' || verbs
            || ')\M)')
        -- advice
        OR p_span ~* ('\m(you (can|could|should|must|need to|will need to|have to)|(might|may) (want|wish) to'
            || '|it is (best|recommended|necessary|advisable|wise|important|preferable|usually '
            || 'best) to|(is|are) (recommended|preferable|preferred|advisable)|use the \w+ '
            || '(command|function|option|parameter|program|utility|tool)|by (setting|running|using|adding|'
            || 'creating|specifying|passing|increasing|decreasing|reducing|lowering|raising|turning|changing|'
            || 'enabling|disabling|removing|dropping|adjusting|calling|issuing|executing|writing|copying)'
            || '|the (easiest|best|simplest|preferred|recommended|usual) '
            || '(way|method|approach))\M')
        -- an SQL command
        OR p_span ~ '(^|\s)(CREATE|ALTER|DROP|SET|VACUUM|ANALYZE|REINDEX|CLUSTER|TRUNCATE|GRANT) [A-Z]+';
END
$fn$;
COMMENT ON FUNCTION rag._says_what_to_do(text) IS
'Internal: whether a span says what to do (code, an imperative, a purpose clause, advice, an SQL command).';

-- Whether a span gives a reason ("because", "since", "due to", "so that", "therefore", "the reason", ...).
CREATE OR REPLACE FUNCTION rag._gives_reason(p_span text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        p_span ~* ('\m(because|since|due to|so that|therefore|thus|hence|the reason|this is why|in order to|'
            || 'otherwise|which means|this means|which causes|caused by)\M')
    );
END
$fn$;
COMMENT ON FUNCTION rag._gives_reason(text) IS
'Internal: whether a span gives a reason (because, since, due to, ...).';

-- Whether a span has the form the question asks for: says what to do for a "how do I" question, gives a reason
-- for a "why" question (false for other questions).
CREATE OR REPLACE FUNCTION rag._has_asked_form(p_span text, p_features jsonb)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        coalesce((p_features ->> 'howto')::boolean, false) AND rag._says_what_to_do(p_span)
            OR coalesce((p_features ->> 'why')::boolean, false) AND rag._gives_reason(p_span)
    );
END
$fn$;
COMMENT ON FUNCTION rag._has_asked_form(text, jsonb) IS
'Internal: whether a span has the form the question asks for (what to do for "how do I", a reason for "why").';

-- The weights of the preferences of rag._quote_bonus and of rag._choose_quotes, in one place.
CREATE OR REPLACE FUNCTION rag._quote_weights()
RETURNS jsonb
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT '{"names": 0.1, "howto": 0.2, "why": 0.05, "defines": 0.1, "neighbour": 0.15, "inherit": 0.05,
        "echo": 0.2, "complete": 0.35, "section": 0.05, "reach": 8,
        "lexical_share": 0.5, "section_last": 0, "forward": 300, "quantity": 0.2, "idf": 0.75,
        "skip_see": 1, "context": 0.3, "lower": 10, "lower_margin": 0.065, "lower_rank": 2,
        "asks_for": 0.1, "action": 0.2, "condition": 0.1, "list_rank": 0.5, "sibling": 0.1}'::jsonb
$fn$;
COMMENT ON FUNCTION rag._quote_weights() IS
'Internal: weights of the quote preferences (names, howto, why, defines), the neighbour margin of widening, '
'how far below its paragraph''s best a sentence of the asked form stands, the demotion of an echo of the '
'question, how far below the best the quote that completes an answer may stand (rag._choose_quotes), and '
'section reach (rag._answer): how much lower the spans of a passage''s other section chunks score and how many '
'of them (nearest first) are read; on the lexical path, the weight of the share of the question''s lexemes in a '
'span''s score (rag._lexical_sentences); section_last (1: a section chunk completes an answer only when no '
'passage can; 0, the default: the best candidate completes it); forward: the longest chosen prose (characters) '
'that takes the next sentence when that one speaks of it (It, This, These, ...); quantity: the preference for a '
'span with a number when the question asks how many, how much, how long, a maximum or a limit; idf: how much the '
'question''s words are weighted by how specific they are in the tenant in span scores (rag._term_weights); '
'skip_see (1: on): widening takes a qualifying sentence ("However, ...") across a cross-reference before it '
'("For ..., see ..."); context: the share of a span''s similarity taken from the mean embedding of it and its '
'neighbours in the chunk (rag._sentence_scores: sentence embeddings, the PL/Python path only); lower: the lowest '
'fused rank (below k too) of the chunks under the passages that compete for quotes when their best span beats '
'every passage''s best by lower_margin, counted as rank lower_rank (rag._answer; 0: off; the PL/Python path only); '
'asks_for: the preference for a span naming the kind of thing a which/what question asks for '
'("Which archive format does ...": archive, format); action: the preference for a span holding the verb of a '
'how-do-I question in any of its inflections (rag._question_action); condition: the preference for a span '
'opening with a condition that shares a word with the question''s (or states an absence, for one); list_rank: '
'how far the items of a list carried on into the document''s next chunk move towards the rank of the chunk the '
'list began in (0: not at all, 1: that rank; rag._choose_quotes); sibling: how much lower a passage''s spans '
'score when they compete as the section chunk of a better-ranked passage of their section (rag._answer; '
'negative: off).';

-- rag._quote_bonus of every span of p_spans at once, in their order (p_says_what_to_do: rag._says_what_to_do of
-- each span when the caller has it, NULL for none): rag._choose_quotes scores all its spans with one call instead of
-- one PL/pgSQL call per span (about 34 per ask on the dev set; issue #10, session 14). The expression is the one
-- rag._quote_bonus evaluates, which calls this with one span.
CREATE OR REPLACE FUNCTION rag._quote_bonuses(p_spans text[], p_features jsonb, p_says_what_to_do boolean[])
RETURNS float8[]
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT pg_catalog.array_agg((
            (p_features -> 'weights' ->> 'names')::float8 * coalesce((
                SELECT avg((CASE
                    -- (left(), translate() and strpos(), as ~ '^[A-Z0-9\\-]', ~ '[A-Z]' and !~ '_': fewer
                    -- regular expressions per ask, so that the backend's cache of 32 compiled ones keeps the rest)
                    WHEN x.name <> '' AND pg_catalog.translate(pg_catalog.left(x.name, 1),
                            'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\-', '') = ''
                        OR pg_catalog.translate(x.name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '') <> x.name
                            AND pg_catalog.strpos(x.name, '_') = 0
                        THEN pg_catalog.strpos(s.span, x.name) > 0
                    ELSE pg_catalog.strpos(pg_catalog.lower(s.span), pg_catalog.lower(x.name)) > 0
                END)::integer)
                FROM pg_catalog.jsonb_array_elements_text(p_features -> 'names') AS x (name)
            ), 0)
            + CASE WHEN (p_features ->> 'howto')::boolean AND coalesce(s.todo, rag._says_what_to_do(s.span))
                THEN (p_features -> 'weights' ->> 'howto')::float8 ELSE 0 END
            + CASE WHEN (p_features ->> 'why')::boolean AND rag._gives_reason(s.span)
                THEN (p_features -> 'weights' ->> 'why')::float8 ELSE 0 END
            -- a number for a question asking how many / how much / how long (digits, number words, units)
            -- (not the enumerator of a list item)
            + CASE WHEN coalesce((p_features ->> 'quantity')::boolean, false) AND pg_catalog.regexp_replace(s.span,
                    '^[ \t]*[0-9]{1,9}[.)][ \t]+',
                    ' ', 'g') ~* ('[0-9]|\m(once|twice|'
                || 'two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|thousand|million|billion|half|'
                || 'double|bytes|kilobytes?|megabytes?|gigabytes?|seconds?|minutes?|hours?|days?|percent)\M')
                THEN coalesce((p_features -> 'weights' ->> 'quantity')::float8, 0) ELSE 0 END
            -- a span that states what happens under the question's condition: it opens with a condition ("If ...",
            -- "When ...", "Unless ...") sharing a content word with the question's, or stating an absence when the
            -- question's is one ("... when I pass none?": "If no weights are provided, ...")
            + CASE WHEN pg_catalog.jsonb_typeof(p_features -> 'condition') = 'object' AND (
                    SELECT rag._content_terms(m.t) && ARRAY(
                            SELECT pg_catalog.jsonb_array_elements_text(p_features -> 'condition' -> 'terms'))
                        OR (p_features -> 'condition' ->> 'absent')::boolean
                            AND m.t ~* '\m(no|not|none|nothing|never|empty|missing|omitted|off|zero|without)\M|n''t\M'
                    -- the opening word and up to 200 characters after it: [^,;:.]* cut by left() matches as
                    -- [^,;:.]{0,200} did, whose bounded repetition cost ~4.4 ms to compile (again per ask once
                    -- evicted from the backend's cache of 32 compiled patterns; issue #10, session 14)
                    FROM pg_catalog.regexp_match(s.span, '^(?:[ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+|[ \t]*\(|[ \t]*>[ \t]*)?'
                        || '((?:If|When|Whenever|Unless|Without|Once|In case|Only if|Even if)\M)([^,;:.]*)') AS r (a)
                    CROSS JOIN LATERAL (SELECT r.a[1] || pg_catalog.left(r.a[2], 200) AS t) AS m
                    -- only a span that opens with a condition (regexp_match gives one NULL row for the others, whose
                    -- test was false or NULL: rag._content_terms(NULL) is '{}'; it was called for every span of a
                    -- question with a condition; issue #10, session 16)
                    WHERE m.t IS NOT NULL)
                THEN coalesce((p_features -> 'weights' ->> 'condition')::float8, 0) ELSE 0 END
            -- the verb of a how-do-I question, in any inflection ("How do I remove ...": "... is removed by ...")
            + CASE WHEN pg_catalog.jsonb_typeof(p_features -> 'action') = 'array' AND s.span ~* ('\m(' || (
                    SELECT pg_catalog.string_agg(x.f, '|') FROM pg_catalog.jsonb_array_elements_text(
                        p_features -> 'action') AS x (f)
                        WHERE x.f <> '' AND pg_catalog.translate(x.f, 'abcdefghijklmnopqrstuvwxyz', '') = '') || ')\M')
                THEN coalesce((p_features -> 'weights' ->> 'action')::float8, 0) ELSE 0 END
            -- the kind of thing a which/what question asks for, named by the span ("... the directory archive format")
            + CASE WHEN pg_catalog.jsonb_typeof(p_features -> 'asks_for') = 'array' AND ARRAY(
                    SELECT pg_catalog.jsonb_array_elements_text(p_features -> 'asks_for')) <@ rag._content_terms(s.span)
                THEN coalesce((p_features -> 'weights' ->> 'asks_for')::float8, 0) ELSE 0 END
            + CASE WHEN pg_catalog.jsonb_typeof(p_features -> 'defines') = 'array' AND (
                SELECT pg_catalog.array_agg(x.t) <@ rag._content_terms(m.a[1])
                    AND pg_catalog.array_length(pg_catalog.regexp_split_to_array(pg_catalog.btrim(m.a[1]), '\s+'), 1)
                        <= 8
                FROM pg_catalog.jsonb_array_elements_text(p_features -> 'defines') AS x (t),
                    pg_catalog.regexp_match(s.span,
                        '^(?:[ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?(.{1,80}?)\s(?:is|are|means|refers)\M') AS m (a)
                GROUP BY m.a[1]
            ) THEN (p_features -> 'weights' ->> 'defines')::float8 ELSE 0 END
        ) ORDER BY s.i)
        FROM ROWS FROM (pg_catalog.unnest(p_spans), pg_catalog.unnest(p_says_what_to_do)) WITH ORDINALITY AS s (span, todo, i)
        WHERE s.i <= pg_catalog.cardinality(p_spans)
    );
END
$fn$;
COMMENT ON FUNCTION rag._quote_bonuses(text[], jsonb, boolean[]) IS
'Internal: rag._quote_bonus of each span of an array, in order (one call for all the spans of rag._choose_quotes).';

-- How much a span's form suits the question (added to its score), with the weights of p_features.weights
-- (rag._quote_weights): names x the share of the question's names it contains (capitals, options and
-- meta-commands as written, other names in any case); for "how do I" questions howto when it says what to do
-- (rag._says_what_to_do); for "why" questions why when it gives a reason; for "what is X" questions defines when
-- its subject (the words before its first is/are/means/refers) holds X's content words; for a question asking how
-- many / how much / how long, a maximum or a limit, quantity when it gives a number (digits, number words, units).
-- p_says_what_to_do: rag._says_what_to_do(p_span) when the caller has it already (rag._choose_quotes computes it
-- once per span), NULL to compute it here.
CREATE OR REPLACE FUNCTION rag._quote_bonus(p_span text, p_features jsonb, p_says_what_to_do boolean)
RETURNS float8
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (rag._quote_bonuses(ARRAY[p_span], p_features, ARRAY[p_says_what_to_do]))[1];
END
$fn$;
COMMENT ON FUNCTION rag._quote_bonus(text, jsonb, boolean) IS
'Internal: how much a span''s form suits the question (names, what to do, reasons, numbers, definitions), added to its '
'score when choosing quotes.';
