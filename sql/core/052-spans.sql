-- Sentence spans computed in SQL, for the core path: rag._lexical_sentences (passages without stored sentences and
-- no pgcite_python) and rag._choose_quotes (the text of a run of spans).

-- Sentence spans of a text in SQL, for passages without stored sentences when pgcite_python is absent: the
-- structural units of python_udfs/pgcite_udfs/sentences.py (fenced code, table rows, headings, list items, quoted
-- lines, paragraphs), paragraphs and items split after ".", "!" or "?" followed by white space and a capital,
-- digit or opening quote/bracket, except after a leading list or section number (no abbreviation rules).
-- 0-based offsets, white space trimmed.
CREATE OR REPLACE FUNCTION rag._text_spans(p_content text)
RETURNS TABLE (start_pos integer, end_pos integer)
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    lines text [] := pg_catalog.string_to_array(coalesce(p_content, ''), E'\n');
    n integer := coalesce(pg_catalog.array_length(lines, 1), 0);
    line_start integer [] := '{}';
    i integer;
    j integer;
    pos integer := 0;
    kind text;
    fence text;
    u_start integer;
    u_end integer;
    para_start integer;
    para_end integer;
    units integer [] := '{}';  -- triples: start, end, splittable (1/0)
    u integer;
    piece text;
    cut integer;
    s integer;
    e integer;
    ss integer [] := '{}';
    ee integer [] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        line_start := line_start || pos;
        pos := pos + pg_catalog.length(lines[i]) + 1;
    END LOOP;
    i := 1;
    WHILE i <= n LOOP
        kind := CASE
            WHEN lines[i] ~ '^[ \t>]*$' THEN 'blank'
            WHEN lines[i] ~ '^[ \t]*(```|~~~)' THEN 'fence'
            WHEN lines[i] ~ '^[ \t]*\|' THEN 'table'
            WHEN lines[i] ~ '^ {0,3}#{1,6}([ \t]|$)' THEN 'heading'
            WHEN lines[i] ~ '^[ \t]*>' THEN 'quote'
            WHEN lines[i] ~ '^[ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+\S' THEN 'list'
            ELSE 'text' END;
        IF kind <> 'text' AND para_start IS NOT NULL THEN
            units := units || ARRAY[para_start, para_end, 1];
            para_start := NULL;
        END IF;
        IF kind = 'blank' THEN
            i := i + 1;
        ELSIF kind = 'fence' THEN
            fence := pg_catalog.substring(pg_catalog.ltrim(lines[i], E' \t'), '^(`{3,}|~{3,})');
            j := i + 1;
            WHILE j <= n AND NOT pg_catalog.btrim(lines[j], E' \t')
                ~ ('^' || pg_catalog.regexp_replace(fence, '(.)', '\\\1', 'g') || '[`~]*$') LOOP
                j := j + 1;
            END LOOP;
            j := least(j, n);
            units := units || ARRAY[line_start[i], line_start[j] + pg_catalog.length(lines[j]), 0];
            i := j + 1;
        ELSIF kind IN ('table', 'heading') THEN
            IF NOT (kind = 'table' AND lines[i] ~ '^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$') THEN
                units := units || ARRAY[line_start[i], line_start[i] + pg_catalog.length(lines[i]), 0];
            END IF;
            i := i + 1;
        ELSIF kind = 'quote' THEN
            units := units || ARRAY[line_start[i], line_start[i] + pg_catalog.length(lines[i]), 1];
            i := i + 1;
        ELSIF kind = 'list' THEN
            u_start := line_start[i];
            u_end := line_start[i] + pg_catalog.length(lines[i]);
            j := i + 1;
            WHILE j <= n AND NOT lines[j] ~ '^[ \t>]*$'
                AND NOT lines[j] ~ '^[ \t]*(```|~~~|\||>|#|([-*+]|[0-9]{1,9}[.)])[ \t]+\S)' LOOP
                u_end := line_start[j] + pg_catalog.length(lines[j]);
                j := j + 1;
            END LOOP;
            units := units || ARRAY[u_start, u_end, 1];
            i := j;
        ELSE
            IF para_start IS NULL THEN
                para_start := line_start[i];
            END IF;
            para_end := line_start[i] + pg_catalog.length(lines[i]);
            i := i + 1;
        END IF;
    END LOOP;
    IF para_start IS NOT NULL THEN
        units := units || ARRAY[para_start, para_end, 1];
    END IF;

    FOR u IN 0..(coalesce(pg_catalog.array_length(units, 1), 0) / 3 - 1) LOOP
        u_start := units[3 * u + 1];
        u_end := units[3 * u + 2];
        s := u_start;
        IF units[3 * u + 3] = 1 THEN
            piece := pg_catalog.substr(p_content, s + 1, u_end - s);
            j := 1;  -- where in piece to look for the next sentence end
            LOOP
                -- the next sentence end: 1-based position in piece just after the punctuation
                cut := pg_catalog.regexp_instr(piece,
                    '[.!?]+["''\u201d\u2019)\]*_`]*(?=\s+["''\u201c\u2018(\[`*A-Z0-9])', j, 1, 1);
                EXIT WHEN cut = 0;
                j := cut;
                -- a leading list or section number ("2.", "25.1.5.") does not end a sentence
                e := u_start + cut - 1;
                CONTINUE WHEN pg_catalog.substr(p_content, s + 1, e - s) ~ '^[ \t>*+-]*\(?[0-9]+(\.[0-9]+)*\)?\.?$';
                ss := ss || s;
                ee := ee || e;
                s := e;
            END LOOP;
        END IF;
        ss := ss || s;
        ee := ee || u_end;
    END LOOP;
    RETURN QUERY
    SELECT x.s + pg_catalog.length(x.t) - pg_catalog.length(pg_catalog.ltrim(x.t, E' \t\n\r')),
        x.e - pg_catalog.length(x.t) + pg_catalog.length(pg_catalog.rtrim(x.t, E' \t\n\r'))
    FROM (
        SELECT a.s, b.e, pg_catalog.substr(p_content, a.s + 1, b.e - a.s) AS t
        FROM pg_catalog.unnest(ss) WITH ORDINALITY AS a (s, o)
        INNER JOIN pg_catalog.unnest(ee) WITH ORDINALITY AS b (e, o) ON b.o = a.o
    ) AS x
    WHERE pg_catalog.btrim(x.t, E' \t\n\r') <> ''
    ORDER BY x.s;
END
$fn$;
COMMENT ON FUNCTION rag._text_spans(text) IS
'Internal: sentence spans (0-based offsets, white space trimmed) of a text, split in SQL like sentences.py but '
'without its abbreviation rules; used only when a passage has no stored sentences and pgcite_python is absent.';

-- The text of spans first..last of the arrays of rag._choose_quotes, one chunk's part after the other.
CREATE OR REPLACE FUNCTION rag._span_text(
    p_chunk bigint[], p_content text[], p_start integer[], p_end integer[], p_first integer, p_last integer
)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT pg_catalog.string_agg(pg_catalog.substr(p_content[x.f], p_start[x.f] + 1, p_end[x.l] - p_start[x.f]), E'\n\n'
        ORDER BY x.f)
    FROM (
        SELECT min(g.i) AS f, max(g.i) AS l
        FROM pg_catalog.generate_series(p_first, p_last) AS g (i)
        GROUP BY p_chunk[g.i]
    ) AS x
$fn$;
COMMENT ON FUNCTION rag._span_text(bigint[], text[], integer[], integer[], integer, integer) IS
'Internal: the text of a run of sentence spans (rag._choose_quotes), one chunk''s part after the other.';
