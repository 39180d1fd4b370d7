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
    -- the bytes of the text, and where each line starts in them: a unit's text is cut out of the bytes (an
    -- offset into bytea costs nothing; substr at a character offset walks the text from its start, and an
    -- array slice copies the array: either made long texts quadratic; security round 5)
    bytes bytea := pg_catalog.convert_to(coalesce(p_content, ''), pg_catalog.getdatabaseencoding());
    line_byte integer [] := '{}';
    bpos integer := 0;
    i integer;
    j integer;
    pos integer := 0;
    kind text;
    fence text;
    para_from integer;
    para_to integer;
    -- units as line ranges (first line, last line, splittable 1/0); each array grows by one element at a time
    -- (PL/pgSQL appends in place; appending an ARRAY[...] copied the whole array)
    uf integer [] := '{}';
    ut integer [] := '{}';
    uk integer [] := '{}';
    u integer;
    u_start integer;
    piece text;
    s integer;
    e integer;
    t text;
    m record;
    off integer;
    pending text;
    ss integer [] := '{}';
    ee integer [] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        line_start := line_start || pos;
        line_byte := line_byte || bpos;
        pos := pos + pg_catalog.length(lines[i]) + 1;
        bpos := bpos + pg_catalog.octet_length(lines[i]) + 1;
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
        IF kind <> 'text' AND para_from IS NOT NULL THEN
            uf := uf || para_from;
            ut := ut || para_to;
            uk := uk || 1;
            para_from := NULL;
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
            uf := uf || i;
            ut := ut || j;
            uk := uk || 0;
            i := j + 1;
        ELSIF kind IN ('table', 'heading') THEN
            IF NOT (kind = 'table' AND lines[i] ~ '^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$') THEN
                uf := uf || i;
                ut := ut || i;
                uk := uk || 0;
            END IF;
            i := i + 1;
        ELSIF kind = 'quote' THEN
            uf := uf || i;
            ut := ut || i;
            uk := uk || 1;
            i := i + 1;
        ELSIF kind = 'list' THEN
            j := i + 1;
            WHILE j <= n AND NOT lines[j] ~ '^[ \t>]*$'
                AND NOT lines[j] ~ '^[ \t]*(```|~~~|\||>|#|([-*+]|[0-9]{1,9}[.)])[ \t]+\S)' LOOP
                j := j + 1;
            END LOOP;
            uf := uf || i;
            ut := ut || (j - 1);
            uk := uk || 1;
            i := j;
        ELSE
            IF para_from IS NULL THEN
                para_from := i;
            END IF;
            para_to := i;
            i := i + 1;
        END IF;
    END LOOP;
    IF para_from IS NOT NULL THEN
        uf := uf || para_from;
        ut := ut || para_to;
        uk := uk || 1;
    END IF;

    FOR u IN 1..coalesce(pg_catalog.array_length(uf, 1), 0) LOOP
        u_start := line_start[uf[u]];
        piece := CASE WHEN uf[u] = ut[u] THEN lines[uf[u]] ELSE pg_catalog.convert_from(pg_catalog.substr(bytes,
            line_byte[uf[u]] + 1, line_byte[ut[u]] + pg_catalog.octet_length(lines[ut[u]]) - line_byte[uf[u]]),
            pg_catalog.getdatabaseencoding()) END;
        s := u_start;
        off := 0;
        pending := '';
        IF uk[u] = 1 THEN
            -- every sentence end of the unit in one pass: the text from the previous end up to and including
            -- the punctuation (a regexp_instr per end rescanned the unit)
            FOR m IN
                SELECT r.r[1] AS t
                FROM pg_catalog.regexp_matches(piece,
                    '(.*?[.!?]+["''\u201d\u2019)\]*_`]*)(?=\s+["''\u201c\u2018(\[`*A-Z0-9])', 'g') AS r (r)
            LOOP
                off := off + pg_catalog.length(m.t);
                pending := pending || m.t;
                e := u_start + off;
                -- a leading list or section number ("2.", "25.1.5.") does not end a sentence
                CONTINUE WHEN pending ~ '^[ \t>*+-]*\(?[0-9]+(\.[0-9]+)*\)?\.?$';
                IF pg_catalog.btrim(pending, E' \t\n\r') <> '' THEN
                    ss := ss || (s + pg_catalog.length(pending) - pg_catalog.length(pg_catalog.ltrim(pending, E' \t\n\r')));
                    ee := ee || (e - pg_catalog.length(pending) + pg_catalog.length(pg_catalog.rtrim(pending, E' \t\n\r')));
                END IF;
                s := e;
                pending := '';
            END LOOP;
        END IF;
        -- the rest of the unit
        t := pending || pg_catalog.substr(piece, off + 1);
        e := s + pg_catalog.length(t);
        IF pg_catalog.btrim(t, E' \t\n\r') <> '' THEN
            ss := ss || (s + pg_catalog.length(t) - pg_catalog.length(pg_catalog.ltrim(t, E' \t\n\r')));
            ee := ee || (e - pg_catalog.length(t) + pg_catalog.length(pg_catalog.rtrim(t, E' \t\n\r')));
        END IF;
    END LOOP;
    RETURN QUERY
    SELECT x.s, x.e
    FROM ROWS FROM (pg_catalog.unnest(ss), pg_catalog.unnest(ee)) AS x (s, e)
    ORDER BY x.s;
END
$fn$;
COMMENT ON FUNCTION rag._text_spans(text) IS
'Internal: sentence spans (0-based offsets, white space trimmed) of a text, split in SQL like sentences.py but '
'without its abbreviation rules; used only when a passage has no stored sentences and pgcite_python is absent.';

-- The text of spans first..last of the arrays of rag._choose_quotes, one chunk's part after the other. PL/pgSQL: its
-- plan is kept for the session (a LANGUAGE sql function with SET search_path was planned again on every call).
CREATE OR REPLACE FUNCTION rag._span_text(
    p_chunk bigint[], p_content text[], p_start integer[], p_end integer[], p_first integer, p_last integer
)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT pg_catalog.string_agg(pg_catalog.substr(p_content[x.f], p_start[x.f] + 1, p_end[x.l] - p_start[x.f]),
            E'\n\n' ORDER BY x.f)
        FROM (
            SELECT min(g.i) AS f, max(g.i) AS l
            FROM pg_catalog.generate_series(p_first, p_last) AS g (i)
            GROUP BY p_chunk[g.i]
        ) AS x
    );
END
$fn$;
COMMENT ON FUNCTION rag._span_text(bigint[], text[], integer[], integer[], integer, integer) IS
'Internal: the text of a run of sentence spans (rag._choose_quotes), one chunk''s part after the other.';
