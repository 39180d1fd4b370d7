-- The head of a question for the patterns of its form ("What is X?", "What is X, ...?"): the question up to and
-- including its first comma or question mark, trimmed; NULL when that is longer than 200 characters. Those
-- patterns end the term they capture there and match a lazy term before an optional tail, which PostgreSQL's
-- regular expressions match in time quadratic in the text's length (400,000 characters: 175 s), so they run on
-- the head only (security round 4): the capture is the same, and a head of more than 200 characters holds no
-- term of four or five words.
CREATE OR REPLACE FUNCTION rag._question_head(p_question text)
RETURNS text
LANGUAGE sql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT CASE WHEN pg_catalog.length(h.h) <= 200 THEN h.h END
    FROM (SELECT pg_catalog.substring(pg_catalog.btrim(p_question), '^[^,?]*[,?]?') AS h) AS h
$fn$;
COMMENT ON FUNCTION rag._question_head(text) IS
'Internal: a question up to its first comma or question mark (trimmed), or NULL when that is over 200 '
'characters; the text the definition patterns (rag._defined_term, rag._question_features) match.';
