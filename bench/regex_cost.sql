-- What a regular expression costs to compile, measured as PostgreSQL pays it when the pattern is no longer in
-- the backend's cache of 32 compiled patterns (src/backend/utils/adt/regexp.c, MAX_CACHED_RES): before each
-- timed match, 33 other patterns are matched, which pushes it out. Issue #10, session 14: the two condition
-- patterns of the quote forms (056-quote-forms.sql) with a bounded repetition {1,200} / {0,200}, and the forms
-- that replaced them (an unbounded repetition cut by left() after the match), next to some of the patterns of a
-- rag.ask. Run on any database (nothing is written; the function lives in pg_temp):
--     psql -X -d DB -f bench/regex_cost.sql
CREATE FUNCTION pg_temp.rx_cost(p text, ci boolean) RETURNS float8
LANGUAGE plpgsql AS $fn$
DECLARE
    b boolean;
    t0 timestamptz;
    total float8 := 0;
    s CONSTANT text := 'How do I create a btree operator class for pg_dump --clean when none is given?';
BEGIN
    FOR i IN 1..50 LOOP
        FOR j IN 1..33 LOOP
            b := ('x' || i) ~ ('^a' || j || 'b$');
        END LOOP;
        t0 := clock_timestamp();
        IF ci THEN b := s ~* p; ELSE b := s ~ p; END IF;
        total := total + extract(EPOCH FROM clock_timestamp() - t0);
    END LOOP;
    RETURN round((total / 50 * 1000)::numeric, 3);
END
$fn$;

SELECT v.k AS pattern, pg_temp.rx_cost(v.p, v.ci) AS ms_per_match_after_eviction
FROM (VALUES
    ('question condition, {1,200} (before)', '\m(if|when|whenever|unless|without)\s+(?!(?:should|must|is|are|was|'
        || 'were|do|does|did|can|could|would|will|to)\M)([^,;?]{1,200})', true),
    ('question condition, + (after)', '\m(if|when|whenever|unless|without)\s+(?!(?:should|must|is|are|was|'
        || 'were|do|does|did|can|could|would|will|to)\M)([^,;?]+)', true),
    ('span condition, {0,200} (before)', '^(?:[ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+|[ \t]*\(|[ \t]*>[ \t]*)?'
        || '((?:If|When|Whenever|Unless|Without|Once|In case|Only if|Even if)\M[^,;:.]{0,200})', false),
    ('span condition, * (after)', '^(?:[ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+|[ \t]*\(|[ \t]*>[ \t]*)?'
        || '((?:If|When|Whenever|Unless|Without|Once|In case|Only if|Even if)\M)([^,;:.]*)', false),
    ('definition subject, {1,80}?', '^(?:[ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?(.{1,80}?)\s(?:is|are|means|refers)\M',
        false),
    ('see, {0,80}', '^\(?(See|For [^.]{0,80}\msee)\M', false),
    ('why', '\mwhy\M', true),
    ('words', '[A-Za-z0-9_]+', false)
) AS v (k, p, ci);
