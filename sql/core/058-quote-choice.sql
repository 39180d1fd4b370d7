-- Quote choice: which spans of the top passages rag._answer quotes (the forms and preferences are in
-- 056-quote-forms.sql; the spans come from rag.sentence, or from 052-spans.sql on the lexical path).

-- The quotes for an answer, best first: [{chunk_id, start, end, quote, score}] (0-based offsets into the chunk's
-- content; quote = its substring), for the question as asked and as corrected. p_scored holds every sentence
-- span of the passages with its score ({chunk_id, start, end, score[, terms]}; rag._sentence_scores or the lexical
-- fallback; an optional rank: the rank its chunk counts as, for the section chunks of rag._answer's section
-- reach), p_ids the passages in rank order (then those section chunks).
--   * A span that mostly repeats the question (three or more content words, three quarters of them the
--     question's: a quoted error message, the question's own example) is lowered by weights.echo.
--   * For a "how do I" question a span that says what to do, for a "why" question one that gives a reason, counts
--     as relevant as the best span of its paragraph less weights.inherit (the advice or the reason next to the
--     best description of the problem).
--   * Units: a sentence that introduces a list, code, a table or a note (it ends with ":", or has no closing
--     punctuation and a block follows) goes with the whole block: items, code, rows, quoted lines, the sentences
--     continuing them, a sentence carrying on in lower case or with "This ..." after code; at most 700 characters
--     unless the first block alone is longer, never over 1200. A unit continues into the next chunk of the
--     document when that chunk is a passage too (it is then quoted as two quotes, one per chunk). Code and tables
--     are quoted only with their introduction when they have one; a unit scores as its best member.
--   * A candidate's score adds rag._quote_bonus of its text and loses rank_penalty per rank of its (first) chunk
--     below the first; the items of a list carried on from the document's previous chunk (a better-ranked
--     passage) count as ranked nearer that chunk (weights.list_rank). The best candidate is quoted, then the
--     next ones within quote_margin of it (max_quotes in all, none overlapping another); a sentence within two
--     of chosen prose in the same paragraph joins it as one contiguous span. An introduction whose block is not
--     in the passages, and the lower-case rest of a sentence begun in another chunk, are not candidates.
--   * The answer is then completed by one more candidate within weights.complete of the best (max_quotes
--     permitting): for a "how do I" or "why" question whose quotes neither say what to do nor give a reason, the
--     best candidate that does (rag._has_asked_form); otherwise the best candidate of a passage not quoted yet.
--   * Chosen prose then grows, within its paragraph and up to three sentences, by the sentence before when it
--     leans on it ("This", "It", "However", ...), by the sentence after when that one qualifies it ("However",
--     "But", "(Therefore, ...)", ...; with weights.skip_see also across a cross-reference between them, "For
--     ..., see ...") or speaks of it ("It ...", "This ...", "These ...": a statement that names the subject carried
--     on by the one that says what the question asks; while the prose is at most weights.forward characters), and
--     by a neighbour whose span score is within weights.neighbour of its own; a unit ending in prose may take two
--     more sentences of that paragraph the same way. With weights.section_last, a section chunk completes the
--     answer only when no passage can.
CREATE OR REPLACE FUNCTION rag._choose_quotes(
    p_question text, p_corrected text, p_ids bigint[], p_scored jsonb, p_max_quotes integer, p_margin float8,
    p_rank_penalty float8, p_features jsonb DEFAULT NULL
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
    -- what it reads from the question alone (rag._quote_features), unless the caller has it
    features jsonb := coalesce(p_features, rag._quote_features(p_question, p_corrected));
    w jsonb := rag._quote_weights();
    q_terms text [] := rag._content_terms(p_corrected);
    soft_limit CONSTANT integer := 700;
    -- a sentence that qualifies the one before it (widening takes it), also in parentheses ("(Therefore, ...)")
    qualifier CONSTANT text := '^\(?(However|But|Unless|Except|Otherwise|Instead|Therefore|Thus|Hence|This means|'
        || 'That is|Even so|Nevertheless|Still)\M';
    hard_limit CONSTANT integer := 1200;
    n integer;
    -- spans in document order (document, chunk, offset)
    c_id bigint [];
    c_doc text [];
    c_idx integer [];
    c_rank integer [];
    c_content text [];
    s_start integer [];
    s_end integer [];
    s_text text [];
    s_kind text [];
    s_base float8 [];  -- relevance: the given score, echo and form inheritance applied
    s_bonus float8 [];  -- rag._quote_bonus of the text of each sentence that stands on its own (in single's order)
    single integer [] := '{}';  -- the sentences that stand on their own as candidates
    single_at integer [] := '{}';  -- and their positions among the candidates
    s_todo boolean [];  -- rag._says_what_to_do of each span, for a "how do I" question only (else NULL)
    s_para_start boolean [];  -- first span of its chunk, after a blank line, or starting a block or list item
    s_reach boolean [];  -- the span is of a section chunk (rag._answer's section reach), not of a passage
    s_bound boolean [];  -- code, table or a continuation quoted only with its introduction
    u_last integer [];  -- last span of the unit an introducing span heads (NULL: not an introducer)
    u_first integer [];  -- the introducing spans, in order
    u_bonus float8 [];  -- rag._quote_bonus of each unit's text, in the order of u_first
    -- the rank a span counts as for the rank penalty: its chunk's, or for the items of a list carried on from the
    -- document's previous chunk (a better-ranked passage), moved towards that chunk's rank by weights.list_rank
    s_rank float8 [];
    l_rank integer [];  -- the best rank of the chunks a list item's list runs through up to it (NULL: not in a list)
    w_list float8 := coalesce((rag._quote_weights() ->> 'list_rank')::float8, 0);
    cand_first integer [] := '{}';
    cand_last integer [] := '{}';
    cand_score float8 [] := '{}';
    pick_first integer [] := '{}';
    pick_last integer [] := '{}';
    pick_score float8 [] := '{}';
    i integer;
    j integer;
    k integer;
    m integer;
    len integer;
    item_kind text;  -- kind of the block item the unit has reached
    best float8;
    merged boolean;
    want_form boolean;
    blocked boolean;
    a integer;
    b integer;
BEGIN
    -- the spans sorted once, by the subquery the aggregates read in its order (a subquery with ORDER BY is not
    -- flattened, and a plain aggregate takes its rows as they come); was 12 aggregates each sorting them again with
    -- ORDER BY x.doc, x.idx, x.s. The key is unique (p_ids are distinct chunks, a chunk's spans start at distinct
    -- offsets), so every array is the same (issue #10, session 16).
    -- The passages' contents are read once each, decompressed (ch): a chunk's row is over the TOAST threshold,
    -- so its content is stored compressed, and every substr of the column decompressed it again (five per span:
    -- a fifth of this statement). A span's first 8 characters come from its text when it has as many (the same
    -- characters, without walking the content from its start again) (issue #10, session 20).
    WITH ch AS MATERIALIZED (
        SELECT o.id, o.r, k.content || '' AS content, k.doc_key || '/' || k.doc_version AS doc, k.chunk_index AS idx
        FROM pg_catalog.unnest(p_ids) WITH ORDINALITY AS o (id, r)
        INNER JOIN rag.chunk AS k ON k.chunk_id = o.id
    )
    SELECT pg_catalog.count(*)::integer, pg_catalog.array_agg(x.chunk_id), pg_catalog.array_agg(x.doc),
        pg_catalog.array_agg(x.idx), pg_catalog.array_agg(x.r), pg_catalog.array_agg(x.content),
        pg_catalog.array_agg(x.s), pg_catalog.array_agg(x.e), pg_catalog.array_agg(x.t),
        pg_catalog.array_agg(rag._span_kind(x.t)),
        pg_catalog.array_agg(x.score - CASE WHEN x.echo THEN (w ->> 'echo')::float8 ELSE 0 END),
        pg_catalog.array_agg(x.para_start), pg_catalog.array_agg(x.reach)
    INTO n, c_id, c_doc, c_idx, c_rank, c_content, s_start, s_end, s_text, s_kind, s_base, s_para_start, s_reach
    FROM (
        SELECT y.*,
            y.prev_end IS NULL
            -- a blank line in the gap before it: two newlines with only blanks, tabs and > between them (translate
            -- and strpos, as ~ E'\n[ \t>]*\n' found them: one regular expression fewer per ask; #10, session 15)
            OR pg_catalog.strpos(pg_catalog.translate(pg_catalog.substr(y.content, y.prev_end + 1, y.s - y.prev_end),
                E' \t>', ''), E'\n\n') > 0
            -- a line opening a block: a fence, a table row, a quoted line, a heading mark or a list item after blanks
            -- and tabs (none of those begins with a blank or a tab, so the blanks and tabs are all of them: ltrim;
            -- the list item by rag._span_kind's pattern, the same text, so one compiled pattern: was
            -- ~ '^[ \t]*(```|~~~|\||>|#|([-*+]|[0-9]{1,9}[.)])[ \t]+\S)', one regular expression more per ask;
            -- issue #10, session 17)
            OR pg_catalog.left(pg_catalog.ltrim(y.head, E' \t'), 3) IN ('```', '~~~')
            OR pg_catalog.left(pg_catalog.ltrim(y.head, E' \t'), 1) IN ('|', '>', '#')
            OR y.head ~ '^[ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+\S'
                AS para_start,
            -- an echo of the question: three or more content words, three quarters of them the question's, counted
            -- in one pass over the words (they were read into an array, then counted in it and measured twice:
            -- ~15 % of this statement; issue #10, session 16)
            (SELECT pg_catalog.count(*) >= 3 AND pg_catalog.count(*) FILTER (WHERE u.term = ANY (q_terms))
                    >= 0.75 * pg_catalog.count(*)
             -- the span's content words: rag._sentence_scores passes the stored ones (0.1-0.4 ms a span to redo)
             FROM (
                 SELECT t.term FROM pg_catalog.jsonb_array_elements_text(y.terms) AS t (term)
                 UNION ALL
                 SELECT t.term
                 FROM pg_catalog.unnest(rag._content_terms(y.t)) AS t (term)
                 WHERE y.terms IS NULL
             ) AS u) AS echo
        FROM (
            -- the span's text, and its first 8 characters (head)
            SELECT z.*, CASE WHEN z.e - z.s >= 8 THEN pg_catalog.left(z.t, 8)
                ELSE pg_catalog.substr(z.content, z.s + 1, 8) END AS head
            FROM (
                SELECT (e.value ->> 'chunk_id')::bigint AS chunk_id,
                    coalesce((e.value ->> 'rank')::integer, c.r::integer) AS r, e.value ? 'rank' AS reach, c.content,
                    c.doc, c.idx,
                    (e.value ->> 'start')::integer AS s, (e.value ->> 'end')::integer AS e,
                    pg_catalog.substr(c.content, (e.value ->> 'start')::integer + 1,
                        (e.value ->> 'end')::integer - (e.value ->> 'start')::integer) AS t,
                    coalesce((e.value ->> 'score')::float8, 0) AS score, e.value -> 'terms' AS terms,
                    pg_catalog.lag((e.value ->> 'end')::integer) OVER (
                        PARTITION BY e.value ->> 'chunk_id' ORDER BY (e.value ->> 'start')::integer) AS prev_end
                FROM pg_catalog.jsonb_array_elements(p_scored) AS e
                INNER JOIN ch AS c ON c.id = (e.value ->> 'chunk_id')::bigint
                WHERE (e.value ->> 'end')::integer > (e.value ->> 'start')::integer
            ) AS z
        ) AS y
        ORDER BY y.doc, y.idx, y.s
    ) AS x;
    IF coalesce(n, 0) = 0 THEN
        RETURN '[]';
    END IF;

    -- The form the question asks for ("how do I": what to do; "why": a reason) counts as relevant as the best
    -- span of its paragraph less weights.inherit.
    -- Whether each span says what to do, once: read by the form inheritance and by rag._quote_bonus (it was
    -- evaluated twice per span).
    IF (features ->> 'howto')::boolean THEN
        SELECT pg_catalog.array_agg(rag._says_what_to_do(s_text[g.i]) ORDER BY g.i)
        INTO s_todo
        FROM pg_catalog.generate_series(1, n) AS g (i);
    END IF;
    IF (features ->> 'howto')::boolean OR (features ->> 'why')::boolean THEN
        SELECT pg_catalog.array_agg(CASE
                WHEN (features ->> 'howto')::boolean AND s_todo[x.i]
                    OR (features ->> 'why')::boolean AND rag._gives_reason(s_text[x.i])
                THEN greatest(s_base[x.i], x.para_best - (w ->> 'inherit')::float8)
                ELSE s_base[x.i] END ORDER BY x.i)
        INTO s_base
        FROM (
            SELECT y.i, max(s_base[y.i]) OVER (PARTITION BY y.para) AS para_best
            FROM (
                SELECT g.i, pg_catalog.count(*) FILTER (WHERE s_para_start[g.i]) OVER (ORDER BY g.i) AS para
                FROM pg_catalog.generate_series(1, n) AS g (i)
            ) AS y
        ) AS x;
    END IF;
    s_bound := pg_catalog.array_fill(false, ARRAY[n]);
    u_last := pg_catalog.array_fill(NULL::integer, ARRAY[n]);

    -- A list carried on into the document's next chunk: its items there count (with weights.list_rank) as ranked
    -- nearer the chunk the list began in (a procedure whose later steps fell into a lower passage).
    l_rank := pg_catalog.array_fill(NULL::integer, ARRAY[n]);
    s_rank := pg_catalog.array_fill(NULL::float8, ARRAY[n]);
    FOR i IN 1..n LOOP
        IF s_kind[i] = 'list' OR (NOT s_para_start[i] AND s_kind[i] = 'text' AND i > 1 AND l_rank[i - 1] IS NOT NULL
            AND c_id[i] = c_id[i - 1]) THEN
            l_rank[i] := c_rank[i];
            IF i > 1 AND l_rank[i - 1] IS NOT NULL AND (c_id[i] = c_id[i - 1]
                OR c_doc[i] = c_doc[i - 1] AND c_idx[i] = c_idx[i - 1] + 1 AND s_start[i] = (
                    SELECT min(s_start[g.x]) FROM pg_catalog.generate_series(1, n) AS g (x) WHERE c_id[g.x] = c_id[i]))
            THEN
                l_rank[i] := least(c_rank[i], l_rank[i - 1]);
            END IF;
        END IF;
        s_rank[i] := c_rank[i] - w_list * (c_rank[i] - coalesce(l_rank[i], c_rank[i]));
    END LOOP;

    -- Units: an introducing sentence and what it introduces.
    FOR i IN 1..n - 1 LOOP
        CONTINUE WHEN s_kind[i] IN ('code', 'table', 'heading');
        CONTINUE WHEN NOT (s_text[i] ~ ':\s*$'
            -- not ending a sentence: no . ! ? before its closing quotes, brackets and emphasis (rtrim and right, as
            -- !~ '[.!?]["''\u201d\u2019)\]*_`]*$': one regular expression fewer per ask; issue #10, session 15)
            OR (pg_catalog.right(pg_catalog.rtrim(s_text[i], E'"''\u201d\u2019)]*_`'), 1) NOT IN ('.', '!', '?')
                AND s_kind[i + 1] IN ('code', 'table', 'list', 'note')));
        -- the next span: in the same chunk, or the first of the next chunk when the introduction ends its chunk
        CONTINUE WHEN c_id[i + 1] <> c_id[i] AND NOT (c_doc[i + 1] = c_doc[i] AND c_idx[i + 1] = c_idx[i] + 1);
        CONTINUE WHEN s_kind[i + 1] = 'heading';
        len := s_end[i] - s_start[i] + s_end[i + 1] - s_start[i + 1];
        CONTINUE WHEN len > hard_limit;
        j := i + 1;
        item_kind := s_kind[i + 1];
        IF s_kind[i + 1] <> 'text' THEN
            LOOP
                k := j + 1;
                -- within the chunk, or on into the next chunk of the document when that one is a passage too
                EXIT WHEN k > n OR c_id[k] <> c_id[j] AND NOT (c_doc[k] = c_doc[j] AND c_idx[k] = c_idx[j] + 1);
                EXIT WHEN len + s_end[k] - s_end[j] > soft_limit;
                EXIT WHEN NOT (s_kind[k] IN ('code', 'table', 'list', 'note')
                    -- the further sentences of a list item or a quoted line
                    OR (NOT s_para_start[k] AND s_kind[k] = 'text' AND item_kind IN ('list', 'note'))
                    OR (s_kind[k - 1] IN ('code', 'table') AND s_text[k] ~ ('^([a-z]|(This|These|That|Those|'
                        || 'Such|Here|The above|In (this|that|the above) example)\M)')));
                len := len + s_end[k] - s_end[j];
                j := k;
                IF s_para_start[k] OR s_kind[k] <> 'text' THEN
                    item_kind := s_kind[k];
                END IF;
            END LOOP;
        END IF;
        u_last[i] := j;
        FOR k IN i + 1..j LOOP
            IF s_kind[k] IN ('code', 'table') OR (s_kind[k - 1] IN ('code', 'table') AND s_kind[k] = 'text') THEN
                s_bound[k] := true;
            END IF;
        END LOOP;
    END LOOP;

    -- Candidates: units (scored as their best member) and the sentences that stand on their own; an introduction
    -- whose block is out of reach (in a chunk that is not a passage) is not one.
    -- The bonus of every unit's text in one rag._quote_bonuses call: the expression rag._quote_bonus evaluates, which
    -- was called once per unit (~4 calls per ask; issue #10, session 16).
    u_first := ARRAY(SELECT g.i FROM pg_catalog.generate_series(1, n) AS g (i) WHERE u_last[g.i] IS NOT NULL
        ORDER BY g.i);
    IF pg_catalog.cardinality(u_first) > 0 THEN
        u_bonus := rag._quote_bonuses(ARRAY(
            SELECT rag._span_text(c_id, c_content, s_start, s_end, u.i, u_last[u.i])
            FROM pg_catalog.unnest(u_first) WITH ORDINALITY AS u (i, o) ORDER BY u.o), features, NULL);
    END IF;
    FOR i IN 1..n LOOP
        IF u_last[i] IS NOT NULL THEN
            cand_first := cand_first || i;
            cand_last := cand_last || u_last[i];
            cand_score := cand_score || (
                (SELECT max(s_base[g.x]) FROM pg_catalog.generate_series(i, u_last[i]) AS g (x))
                + u_bonus[pg_catalog.array_position(u_first, i)]
                - p_rank_penalty * (s_rank[i] - 1));
        ELSIF NOT s_bound[i] AND s_kind[i] <> 'heading' AND s_end[i] - s_start[i] >= 20
            AND NOT (s_text[i] ~ ':\s*$' AND (i = n OR c_id[i + 1] <> c_id[i]))
            -- nor is the lower-case rest of a sentence begun before (in a chunk that is not a passage)
            AND s_text[i] !~ ('^(which|where|and|or|but|so|since|because|then|that|while|as|although|though|'
                || 'whereas|unless|if|with|without|for|to|in|on|at|by|of|is|are|was|were|can|could|will|would|'
                || 'should)\M') THEN
            cand_first := cand_first || i;
            cand_last := cand_last || i;
            cand_score := cand_score || NULL::float8;  -- with its bonus, below
            single := single || i;
            single_at := single_at || pg_catalog.cardinality(cand_first);
        END IF;
    END LOOP;
    -- A sentence that stands on its own scores its relevance plus rag._quote_bonus of its own text: the bonuses of
    -- those sentences only, in one rag._quote_bonuses call (every span's was computed, and a span in a unit, code,
    -- a heading or a short line is never scored by its own; issue #10, session 20).
    IF pg_catalog.cardinality(single) > 0 THEN
        s_bonus := rag._quote_bonuses(
            ARRAY(SELECT s_text[u.i] FROM pg_catalog.unnest(single) WITH ORDINALITY AS u (i, o) ORDER BY u.o),
            features,
            ARRAY(SELECT s_todo[u.i] FROM pg_catalog.unnest(single) WITH ORDINALITY AS u (i, o) ORDER BY u.o));
        FOR k IN 1..pg_catalog.cardinality(single) LOOP
            i := single[k];
            cand_score[single_at[k]] := s_base[i] + s_bonus[k] - p_rank_penalty * (s_rank[i] - 1);
        END LOOP;
    END IF;
    IF pg_catalog.cardinality(cand_first) = 0 THEN
        RETURN '[]';
    END IF;

    -- Choose: best first (ties: the better-ranked chunk, then document order), then those within the margin.
    FOR m IN
        SELECT x.o
        FROM ROWS FROM (pg_catalog.unnest(cand_first), pg_catalog.unnest(cand_last), pg_catalog.unnest(cand_score))
            WITH ORDINALITY AS x (f, l, sc, o)
        ORDER BY round(x.sc::numeric, 6) DESC, c_rank[x.f], x.f, x.l DESC
    LOOP
        IF best IS NULL THEN
            best := cand_score[m];
        END IF;
        EXIT WHEN cand_score[m] < best - p_margin;
        -- overlapping a chosen span: skip; within two sentences of chosen prose in the same paragraph: join it
        blocked := false;
        merged := false;
        FOR k IN 1..coalesce(pg_catalog.cardinality(pick_first), 0) LOOP
            IF cand_first[m] <= pick_last[k] AND cand_last[m] >= pick_first[k] THEN
                blocked := true;
            ELSIF cand_first[m] = cand_last[m] AND u_last[pick_first[k]] IS NULL
                AND c_id[cand_first[m]] = c_id[pick_first[k]] AND c_id[pick_first[k]] = c_id[pick_last[k]] THEN
                a := least(cand_first[m], pick_first[k]);
                b := greatest(cand_last[m], pick_last[k]);
                IF b - a <= 2 AND NOT EXISTS (
                    SELECT FROM pg_catalog.generate_series(a + 1, b) AS g (x) WHERE s_para_start[g.x]
                ) AND NOT EXISTS (
                    SELECT FROM pg_catalog.generate_series(a, b) AS g (x)
                    WHERE s_kind[g.x] IN ('code', 'table') OR u_last[g.x] IS NOT NULL
                ) THEN
                    pick_first[k] := a;
                    pick_last[k] := b;
                    merged := true;
                END IF;
            END IF;
            EXIT WHEN blocked OR merged;
        END LOOP;
        CONTINUE WHEN blocked OR merged;
        EXIT WHEN pg_catalog.cardinality(pick_first) >= p_max_quotes;
        pick_first := pick_first || cand_first[m];
        pick_last := pick_last || cand_last[m];
        pick_score := pick_score || cand_score[m];
    END LOOP;

    -- Complete the answer with one more quote within weights.complete of the best: for a "how do I" or "why"
    -- question whose quotes neither say what to do nor give a reason, the best candidate that does; otherwise the
    -- best candidate of a passage not quoted yet (the question matched by one passage, answered by the next).
    IF pg_catalog.cardinality(pick_first) < p_max_quotes THEN
        want_form := ((features ->> 'howto')::boolean OR (features ->> 'why')::boolean) AND NOT EXISTS (
            SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(pick_first)) AS g (x)
            WHERE rag._has_asked_form(rag._span_text(c_id, c_content, s_start, s_end, pick_first[g.x],
                pick_last[g.x]), features));
        FOR m IN
            SELECT x.o
            FROM ROWS FROM (pg_catalog.unnest(cand_first), pg_catalog.unnest(cand_last),
                pg_catalog.unnest(cand_score)) WITH ORDINALITY AS x (f, l, sc, o)
            WHERE x.sc >= best - (w ->> 'complete')::float8
            -- with weights.section_last, a section chunk completes the answer only when no passage can
            ORDER BY s_reach[x.f] AND coalesce((w ->> 'section_last')::float8, 0) > 0,
                round(x.sc::numeric, 6) DESC, c_rank[x.f], x.f, x.l DESC
        LOOP
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(pick_first)) AS g (x)
                WHERE cand_first[m] <= pick_last[g.x] AND cand_last[m] >= pick_first[g.x]
                    OR NOT want_form AND c_id[cand_first[m]] IN (c_id[pick_first[g.x]], c_id[pick_last[g.x]]));
            CONTINUE WHEN want_form AND NOT rag._has_asked_form(
                rag._span_text(c_id, c_content, s_start, s_end, cand_first[m], cand_last[m]), features);
            pick_first := pick_first || cand_first[m];
            pick_last := pick_last || cand_last[m];
            pick_score := pick_score || cand_score[m];
            EXIT;
        END LOOP;
    END IF;

    -- Widen chosen prose to a contiguous span of up to three sentences of its paragraph; a unit that ends in prose
    -- (a sentence carrying on after its code) may take up to two more sentences of that paragraph.
    FOR k IN 1..pg_catalog.cardinality(pick_first) LOOP
        CONTINUE WHEN s_kind[pick_first[k]] IN ('code', 'table', 'heading')
            OR u_last[pick_first[k]] IS NOT NULL AND s_kind[pick_last[k]] <> 'text';
        m := pick_last[k];  -- the last sentence chosen before widening
        LOOP
            EXIT WHEN CASE WHEN u_last[pick_first[k]] IS NULL THEN pick_last[k] - pick_first[k] >= 2
                ELSE pick_last[k] - m >= 2 END;
            a := pick_first[k];
            b := pick_last[k];
            i := a - 1;  -- the sentence before, if in the same paragraph, not an introduction, not chosen elsewhere
            IF u_last[a] IS NOT NULL OR s_para_start[a] OR i < 1 OR s_kind[i] IN ('code', 'table', 'heading')
                OR u_last[i] IS NOT NULL
                OR EXISTS (SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(pick_first)) AS g (x)
                    WHERE g.x <> k AND i BETWEEN pick_first[g.x] AND pick_last[g.x]) THEN
                i := NULL;
            END IF;
            j := b + 1;  -- the sentence after, likewise
            IF j > n OR c_id[j] <> c_id[b] OR s_para_start[j] OR s_kind[j] IN ('code', 'table', 'heading')
                OR u_last[j] IS NOT NULL
                OR EXISTS (SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(pick_first)) AS g (x)
                    WHERE g.x <> k AND j BETWEEN pick_first[g.x] AND pick_last[g.x]) THEN
                j := NULL;
            END IF;
            IF i IS NOT NULL AND s_text[a] ~ ('^([ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+|[ \t]*>[ \t]*|\()?(This|These|That|'
                || 'Those|Such|It|Its|They|Their|Them|Therefore|Thus|Hence|So|However|But|Also|Otherwise|Instead|'
                || 'Then|Here|There|The (latter|former))\M') THEN
                pick_first[k] := i;
            ELSIF j IS NOT NULL AND s_text[j] ~ qualifier THEN
                pick_last[k] := j;
            -- the same across a cross-reference ("For conflicting lock modes, see Table 13.2. However, ..."):
            -- a pointer to another section says nothing itself, the qualification after it does (weights.skip_see)
            ELSIF j IS NOT NULL AND coalesce((w ->> 'skip_see')::float8, 0) > 0
                AND b + 2 - (CASE WHEN u_last[a] IS NULL THEN a ELSE m END) <= 2
                AND s_text[j] ~ '^\(?(See|For [^.]{0,80}\msee)\M' AND s_end[j] - s_start[j] <= 120
                AND j + 1 <= n AND c_id[j + 1] = c_id[b] AND NOT s_para_start[j + 1] AND s_kind[j + 1] = 'text'
                AND u_last[j + 1] IS NULL AND s_text[j + 1] ~ qualifier
                AND NOT EXISTS (SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(pick_first)) AS g (x)
                    WHERE g.x <> k AND j + 1 BETWEEN pick_first[g.x] AND pick_last[g.x]) THEN
                pick_last[k] := j + 1;
            -- a short statement carried on by the next sentence, which speaks of it ("It contains ...", "This
            -- command collects ..."): the statement names the subject, the next one says what the question asks
            ELSIF j IS NOT NULL AND s_end[b] - s_start[a] <= coalesce((w ->> 'forward')::float8, 0)
                AND s_text[j] ~ '^\(?(It|Its|This|These|They|Their|Such|Each|Both)\M' THEN
                pick_last[k] := j;
            ELSIF i IS NOT NULL AND s_base[i] >= s_base[a] - (w ->> 'neighbour')::float8
                AND (j IS NULL OR s_base[i] >= s_base[j]) THEN
                pick_first[k] := i;
            ELSIF j IS NOT NULL AND s_base[j] >= s_base[b] - (w ->> 'neighbour')::float8 THEN
                pick_last[k] := j;
            ELSE
                EXIT;
            END IF;
        END LOOP;
    END LOOP;

    -- One quote per chunk a chosen span covers (a unit continuing into the next chunk makes two).
    RETURN (
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
            'chunk_id', z.chunk_id, 'start', z.qs, 'end', z.qe,
            'quote', pg_catalog.substr(c_content[z.first_i], z.qs + 1, z.qe - z.qs),
            'score', round(z.sc::numeric, 6)) ORDER BY z.o, z.first_i), '[]')
        FROM (
            SELECT x.o, x.sc, c_id[g.i] AS chunk_id, min(g.i) AS first_i, min(s_start[g.i]) AS qs,
                max(s_end[g.i]) AS qe
            FROM ROWS FROM (pg_catalog.unnest(pick_first), pg_catalog.unnest(pick_last), pg_catalog.unnest(pick_score))
                WITH ORDINALITY AS x (f, l, sc, o)
            CROSS JOIN LATERAL pg_catalog.generate_series(x.f, x.l) AS g (i)
            GROUP BY x.o, x.sc, c_id[g.i]
        ) AS z
    );
END
$fn$;
COMMENT ON FUNCTION rag._choose_quotes(text, text, bigint[], jsonb, integer, float8, float8, jsonb) IS
'Internal: the verbatim spans to quote, best first [{chunk_id, start, end, quote, score}], from the scored '
'sentence spans of the passages: units of an introduction and its block, contiguous spans of up to three '
'sentences, preferences from the question''s form (p_features: rag._quote_features of the question, NULL to '
'compute it here).';
