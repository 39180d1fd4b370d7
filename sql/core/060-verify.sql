-- Verify: every answer, whatever produced it, is checked before it is returned.
-- Each [n] must name a citation of a chunk retrieved in this call, each quote must occur in its chunk
-- (whitespace-normalised), and offsets are reported so substr(content, quote_start + 1,
-- quote_end - quote_start) = quote. Unknown or unverifiable citations are removed; nothing left -> abstain.

-- Regular expression matching a quote in its chunk with any run of white space standing for any other.
CREATE OR REPLACE FUNCTION rag._quote_pattern(quote text)
RETURNS text
LANGUAGE sql
IMMUTABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
    -- E'\x0B' is vertical tab (E'\v' is the letter v in PostgreSQL: it cut a quote's leading or trailing v);
    -- one expression, so that the planner inlines it
    SELECT CASE WHEN pg_catalog.length(pg_catalog.btrim(quote, E' \t\n\r\f\x0B')) <= 4000 THEN
        pg_catalog.regexp_replace(pg_catalog.regexp_replace(pg_catalog.btrim(quote, E' \t\n\r\f\x0B'),
            '([.^$*+?()\[\]{}|\\-])', '\\\1', 'g'), '\s+', '\\s+', 'g') END
$fn$;
COMMENT ON FUNCTION rag._quote_pattern(text) IS
'Internal: a regular expression that finds a quote in a text whatever its white space; NULL for a quote over '
'4000 characters (its expression could exceed the regular expression engine''s size: 2201B), which must occur '
'as written.';

-- Where a quote occurs in its chunk whatever its white space: the 1-based start and the position after its end of
-- the first match of rag._quote_pattern(quote) in content ((0, 0): none; a quote over 4000 characters after
-- trimming: none, as there). Found without that expression: both texts with each run of white space (\s, the
-- expression's own class) made one space, the quote looked up in the content by strpos, and the match's ends mapped
-- back through the lengths of the content's runs of white space. The same match: the quote's trimmed ends are not white
-- (or, for white space the trim does not take, the run's whole extent counts, as \s+ takes it). The expression's
-- cost grew with the chunk's length times the pattern's (a 4,000-character quote against a chunk of 200,000 "x "
-- took 5.7 s; session 22's review); this is linear in both (session 23: 0.38 ms p50 for chunks of the 1M benchmark
-- and 2.6 ms for 16 kB of "x ", against 1.28 and 23 ms when the ends were counted by regexp_instr).
CREATE OR REPLACE FUNCTION rag._quote_span(content text, quote text, OUT s integer, OUT e integer)
LANGUAGE plpgsql
IMMUTABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    q text := pg_catalog.btrim(quote, E' \t\n\r\f\x0B');
    qn text;
    pieces text [];  -- the content between its runs of white space that are not one space
    cn text;
    p integer;  -- where the quote starts in cn
    pe integer;  -- its last character in cn
    k integer;  -- non-white characters of the content before the match
    k2 integer;  -- non-white characters of the content up to the match's end
    runs text [];  -- the content's runs of white space, in order
    off integer;
BEGIN
    s := 0;
    e := 0;
    IF q = '' OR pg_catalog.length(q) > 4000 THEN
        RETURN;
    END IF;
    -- Both texts with each run of white space (\s) made one space, as regexp_replace(x, '\s+', ' ', 'g') makes
    -- it, matching only the runs that are not one space already (two characters or more, or one other than a
    -- space): prose has few of them (paragraph breaks), where '\s+' matched every gap between two words.
    qn := pg_catalog.regexp_replace(q, '\s{2,}|(?! )\s', ' ', 'g');
    pieces := pg_catalog.regexp_split_to_array(content, '\s{2,}|(?! )\s');
    cn := pg_catalog.array_to_string(pieces, ' ');
    p := pg_catalog.strpos(cn, qn);
    IF p = 0 THEN
        RETURN;
    END IF;
    pe := p + pg_catalog.length(qn) - 1;
    IF pg_catalog.cardinality(pieces) = 1 THEN
        -- no run was shortened: cn is the content
        s := p;
        e := pe + 1;
        RETURN;
    END IF;
    -- Each space of cn stands for one run of white space of the content, in order. Before the match the content
    -- holds its k non-white characters and its first p - 1 - k runs, so the match starts at k + (their length)
    -- + 1, whether the quote begins with a non-white character (the (k + 1)th) or with white space (the run after
    -- the kth); it ends after k2 non-white characters and the pe - k2 runs up to its last character in cn. The
    -- runs in one pass: the content split by its non-white runs (an empty first element when it begins with a
    -- non-white character; an empty last one when it ends with one). Was regexp_instr(content, '\S', 1, N) for
    -- each end, which finds every non-white character of the content (session 23's review).
    k := pg_catalog.length(pg_catalog.replace(pg_catalog.left(cn, p - 1), ' ', ''));
    k2 := k + pg_catalog.length(pg_catalog.replace(qn, ' ', ''));
    runs := pg_catalog.regexp_split_to_array(content, '\S+');
    off := CASE WHEN pg_catalog.left(cn, 1) = ' ' THEN 0 ELSE 1 END;
    s := k + pg_catalog.length(pg_catalog.array_to_string(runs[1:p - 1 - k + off], '')) + 1;
    e := k2 + pg_catalog.length(pg_catalog.array_to_string(runs[1:pe - k2 + off], '')) + 1;
END
$fn$;
COMMENT ON FUNCTION rag._quote_span(text, text) IS
'Internal: (start, end) of the first occurrence of a quote in a text whatever its white space, as '
'regexp_instr with rag._quote_pattern finds it, in time about linear in the text; (0, 0) for none.';

CREATE OR REPLACE FUNCTION rag.verify(answer_text text, cited jsonb, retrieved bigint[])
RETURNS TABLE (answer text, citations jsonb, status text, reason text)
LANGUAGE plpgsql
STABLE
-- generic plans: its statements read JSON and a few chunks by primary key; a custom plan was chosen on every call
-- (0.3-1.3 ms of planning at 100k chunks)
SET plan_cache_mode = force_generic_plan
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    checked jsonb;
    marks jsonb;
    kept jsonb;
    removed bigint;
    out_answer text := verify.answer_text;
BEGIN
    IF verify.cited IS NOT NULL AND pg_catalog.jsonb_typeof(verify.cited) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'cited must be a JSON array of citations',
            HINT = 'Each element: {"n": 1, "chunk_id": 123, "quote": "..."}.';
    END IF;

    -- The numbers of the answer's markers [n] as the keys of a JSON object (each lookup a binary search, whatever
    -- the plan; n as the citations write it, no leading zero), and those of the verified citations likewise.
    -- One pattern for the markers here and below, (\s*)\[([0-9]{1,6})\], the digits its second group: the same
    -- markers in the same order as \[([0-9]{1,6})\] and (\s*\[[0-9]{1,6}\]) found them (white space is no part of a
    -- marker, so the white space before one never takes a match from another), one regular expression fewer per
    -- ask, so that the backend's cache of 32 compiled ones keeps the rest (issue #10, session 17)
    SELECT coalesce(pg_catalog.jsonb_object_agg(m.a[2], true), '{}')
    INTO marks
    FROM pg_catalog.regexp_matches(coalesce(out_answer, ''), '(\s*)\[([0-9]{1,6})\]', 'g') AS m (a)
    WHERE m.a[2] = m.a[2]::integer::text;

    WITH given AS (
        SELECT e.o, e.c,
            -- 1 to 6 (18) digits: length() and translate(), as ~ '^[0-9]{1,6}$' (and {1,18}) did (two regular
            -- expressions fewer per ask, so that the backend's cache of 32 compiled ones keeps the rest; #10)
            CASE WHEN pg_catalog.length(e.c ->> 'n') BETWEEN 1 AND 6
                AND pg_catalog.translate(e.c ->> 'n', '0123456789', '') = '' THEN (e.c ->> 'n')::integer END AS n,
            CASE WHEN pg_catalog.length(e.c ->> 'chunk_id') BETWEEN 1 AND 18
                AND pg_catalog.translate(e.c ->> 'chunk_id', '0123456789', '') = ''
                THEN (e.c ->> 'chunk_id')::bigint END AS chunk_id,
            e.c ->> 'quote' AS quote
        FROM pg_catalog.jsonb_array_elements(coalesce(verify.cited, '[]')) WITH ORDINALITY AS e (c, o)
    ),
    -- MATERIALIZED: each quote is looked up once (inlined, strpos and the regular expressions ran again for
    -- every reference to s and e: up to five times per quote)
    located AS MATERIALIZED (
        SELECT g.o, g.n, g.chunk_id, ch.content, ch.doc_key, ch.doc_version, ch.chunk_index, ch.anchor,
            ch.title, d.source_url,
            -- a quote that occurs exactly (every extractive quote) is found by strpos; only one whose white
            -- space differs from the chunk's is looked up with its white space made one space on both sides, and
            -- only up to 4000 characters (rag._quote_span: none beyond, so the quote is dropped like any that does
            -- not occur)
            CASE WHEN x.exact > 0 THEN x.exact ELSE f.s END AS s,
            CASE WHEN x.exact > 0 THEN x.exact + pg_catalog.length(x.q) ELSE f.e END AS e
        FROM given AS g
        LEFT JOIN rag.chunk AS ch ON ch.chunk_id = g.chunk_id AND g.chunk_id = ANY (verify.retrieved)
        LEFT JOIN rag.document AS d ON d.document_id = ch.document_id
        CROSS JOIN LATERAL (
            SELECT t.q, CASE WHEN ch.chunk_id IS NOT NULL THEN pg_catalog.strpos(ch.content, t.q) END AS exact
            FROM (SELECT nullif(pg_catalog.btrim(g.quote, E' \t\n\r\f\x0B'), '') AS q) AS t
        ) AS x
        -- computed only for a quote not found as written (a one-time filter on x.exact)
        LEFT JOIN LATERAL (
            SELECT y.s, y.e FROM rag._quote_span(ch.content, g.quote) AS y WHERE x.exact = 0
            -- OFFSET 0: not pulled up into the join, so that x.exact = 0 stays a one-time filter above the call
            -- (pulled up, it was the join's filter, tested after the call: every quote went through
            -- rag._quote_span, ~0.7 ms per ask; issue #10, session 23)
            OFFSET 0
        ) AS f ON true
        WHERE g.n IS NOT NULL AND coalesce(pg_catalog.btrim(g.quote), '') <> '' AND ch.chunk_id IS NOT NULL
    )
    SELECT
        coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'n', l.n, 'chunk_id', l.chunk_id, 'doc_key', l.doc_key, 'doc_version', l.doc_version,
            'chunk_index', l.chunk_index, 'anchor', l.anchor, 'title', l.title, 'source_url', l.source_url,
            'quote', pg_catalog.substr(l.content, l.s, l.e - l.s), 'quote_start', l.s - 1, 'quote_end', l.e - 1,
            'verified', true
        ) ORDER BY l.n, l.o), '[]'),
        pg_catalog.jsonb_object_agg(l.n::text, true)
    INTO checked, kept
    FROM located AS l
    WHERE l.s > 0 AND l.e > l.s AND marks ? l.n::text;

    -- Markers of unknown or unverified sources are removed from the text, with the white space before them, in
    -- one pass over the text: its pieces between markers (regexp_split_to_array) and its markers (regexp_matches:
    -- the same matches in the same order) zipped by ROWS FROM, each marker kept or dropped. A marker written with a
    -- leading zero ([01]) is left as it is (as before 0.8.0). Before 0.8.0 each distinct number was removed by
    -- its own regexp_replace over the whole text: quadratic in the markers (16,000 took 13 s).
    kept := coalesce(kept, '{}');
    IF out_answer IS NOT NULL THEN
        SELECT pg_catalog.string_agg(z.piece || CASE WHEN z.dropped THEN '' ELSE coalesce(z.marker, '') END, ''
            ORDER BY z.o),
            pg_catalog.count(*) FILTER (WHERE z.dropped)
        INTO out_answer, removed
        FROM (
            SELECT y.o, y.piece, y.marker,
                y.digits = y.digits::integer::text AND NOT kept ? y.digits AS dropped
            FROM (
                -- the marker's digits, between its [ and its ] (substr and strpos, as substring(marker,
                -- '([0-9]+)\]$') gave them: one regular expression fewer per ask; issue #10, session 15)
                SELECT u.o, u.piece, u.marker, pg_catalog.substr(u.marker, pg_catalog.strpos(u.marker, '[') + 1,
                    pg_catalog.length(u.marker) - pg_catalog.strpos(u.marker, '[') - 1) AS digits
                FROM ROWS FROM (
                    pg_catalog.unnest(pg_catalog.regexp_split_to_array(out_answer, '\s*\[[0-9]{1,6}\]')),
                    pg_catalog.unnest(ARRAY(
                        -- (the whole match: its white space, then the marker)
                        SELECT x.a[1] || '[' || x.a[2] || ']'
                        FROM pg_catalog.regexp_matches(out_answer, '(\s*)\[([0-9]{1,6})\]', 'g')
                            WITH ORDINALITY AS x (a, o)
                        ORDER BY x.o
                    ))
                ) WITH ORDINALITY AS u (piece, marker, o)
            ) AS y
        ) AS z;
        -- Removing one can form another: removing [2] from [5[2]] leaves [5], removed too. Before, another pass
        -- of the statement above per level of nesting: [1[1[1 ... ]]] 4,000 deep took 1.8 s, quadratic in the
        -- depth. Instead, when the pass removed something, one scan of the text's tokens ([, ], digits, white
        -- space, anything else) with a stack: a ] on top of [ and 1 to 6 digits that name a dropped marker pops
        -- them and the white space before; what stays on the stack is the text. Only when a marker to drop is
        -- left (most answers have none after the pass).
        IF removed > 0 AND EXISTS (
            SELECT FROM pg_catalog.regexp_matches(out_answer, '(\s*)\[([0-9]{1,6})\]', 'g') AS m (a)
            WHERE m.a[2] = m.a[2]::integer::text AND NOT kept ? m.a[2]
        ) THEN
            DECLARE
                stack text [] := '{}';
                top integer := 0;
                tok text;
            BEGIN
                FOR tok IN
                    SELECT x.a[1]
                    FROM pg_catalog.regexp_matches(out_answer, '(\[|\]|[0-9]+|\s+|[^][0-9[:space:]]+)', 'g')
                        WITH ORDINALITY AS x (a, o)
                    ORDER BY x.o
                LOOP
                    IF tok = ']' AND top >= 2 AND stack[top - 1] = '[' AND stack[top] ~ '^[0-9]{1,6}$'
                        AND stack[top] = stack[top]::integer::text AND NOT kept ? stack[top] THEN
                        top := top - 2;
                        WHILE top > 0 AND stack[top] ~ '^\s+$' LOOP
                            top := top - 1;
                        END LOOP;
                    -- digits next to digits (left so by a removal: [1[2]3] is [13]) are one run, up to 7
                    ELSIF tok ~ '^[0-9]' AND top > 0 AND stack[top] ~ '^[0-9]{1,6}$' THEN
                        stack[top] := stack[top] || tok;
                    ELSE
                        top := top + 1;
                        stack[top] := tok;
                    END IF;
                END LOOP;
                out_answer := pg_catalog.array_to_string(stack[1:top], '');
            END;
        END IF;
    END IF;

    IF pg_catalog.jsonb_array_length(checked) = 0 THEN
        RETURN QUERY SELECT NULL::text, '[]'::jsonb, 'abstained'::text, 'no_verifiable_quote'::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT pg_catalog.btrim(out_answer), checked, 'answered'::text, NULL::text;
END
$fn$;
COMMENT ON FUNCTION rag.verify(text, jsonb, bigint[]) IS
'Checks an answer against the chunks retrieved for it: keeps cited entries {n, chunk_id, quote} whose chunk is in '
'retrieved and whose quote occurs in it (white space normalised), with exact offsets; drops the rest and their '
'[n] markers. No verified citation left: status abstained, reason no_verifiable_quote.';

GRANT EXECUTE ON FUNCTION rag.verify(text, jsonb, bigint[]) TO pgcite_reader;
