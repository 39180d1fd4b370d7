-- The head of a question for the patterns of its form ("What is X?", "What is X, ...?"): the question up to and
-- including its first comma or question mark, trimmed; NULL when that is longer than 200 characters. Those
-- patterns end the term they capture there and match a lazy term before an optional tail, which PostgreSQL's
-- regular expressions match in time quadratic in the text's length (400,000 characters: 175 s), so they run on
-- the head only (security round 4): the capture is the same, and a head of more than 200 characters holds no
-- term of four or five words. PL/pgSQL, as the other small helpers called per question, span or sentence
-- (056-quote-forms.sql): a LANGUAGE sql function with SET search_path is never inlined, and its body was parsed
-- and planned again on every call from another function (issue #10, session 10).
CREATE OR REPLACE FUNCTION rag._question_head(p_question text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    b text := pg_catalog.btrim(p_question);
    -- the first comma or question mark (strpos, as substring(b, '^[^,?]*[,?]?') cut it: one regular expression
    -- fewer per ask, so that the backend's cache of 32 compiled ones keeps the rest; issue #10, session 15)
    cut integer := least(nullif(pg_catalog.strpos(b, ','), 0), nullif(pg_catalog.strpos(b, '?'), 0));
    h text := CASE WHEN cut IS NULL THEN b ELSE pg_catalog.left(b, cut) END;
BEGIN
    RETURN CASE WHEN pg_catalog.length(h) <= 200 THEN h END;
END
$fn$;
COMMENT ON FUNCTION rag._question_head(text) IS
'Internal: a question up to its first comma or question mark (trimmed), or NULL when that is over 200 '
'characters; the text the definition patterns (rag._defined_term, rag._question_features) match.';
