# ruff: noqa: E501 - the SQL keeps the replaced patterns verbatim, as the SQL files wrote them
"""The patterns issue #10 (session 17) stopped running for every ask, evaluated as they were, next to what replaced
them: each query returns the inputs whose old and new results differ (none, if the replacement is exact). Used by
tests/test_quotes.py on edge cases, and on every question, sentence and chunk of a database by hand:

    .venv/bin/python tests/regex_originals.py 'host=... dbname=pgcite_quotes user=postgres'

Each comparison runs under the collation of an ask (the question's text is "C" there: rag._ask takes the caller's
name, whose collation wins over the default) and under the database's default collation.
"""

from __future__ import annotations

import sys

import psycopg

# rag._question_features' keys whose pattern now runs only for questions holding its words, and
# rag._question_action's and rag._defined_term's patterns, as they ran before
FEATURES = r"""
SELECT q, coll FROM (
    SELECT u.q, c.coll,
        CASE c.coll WHEN 'C' THEN rag._question_features(u.q COLLATE "C") ELSE rag._question_features(u.q) END AS f,
        CASE c.coll WHEN 'C' THEN rag._defined_term('english', u.q COLLATE "C")
            ELSE rag._defined_term('english', u.q) END AS dt,
        CASE c.coll WHEN 'C' THEN (u.q COLLATE "C") ELSE u.q END AS x
    FROM unnest(%s::text[]) AS u (q), (VALUES ('C'), ('default')) AS c (coll)
) AS y
WHERE (y.f ->> 'howto')::boolean IS DISTINCT FROM (y.x ~* ('\m(how (do|can|should|would|could|must|may) (i|we|you|one)|how to'
        || '|(do|should|must|can|would) (i|we) (need|have) to|what (should|must|do|can) (i|we) (do|use|set|run)'
        || '|(which|what) (\w+ )?(command|setting|parameter|option|function|tool|program|utility|configuration)s?'
        || '|is there a way|(which|what) ways? (do|can|should|could|may) (i|we|you|one)'
        || '|what (am|are) (i|we) (supposed|expected|meant) to do)\M'))
    OR (y.f ->> 'why')::boolean IS DISTINCT FROM (y.x ~* '\mwhy\M')
    OR (y.f ->> 'quantity')::boolean IS DISTINCT FROM (y.x ~* ('\mhow (many|much|long|often|large|big|old|far|frequently|soon|fast)\M'
        || '|\m(maximum|minimum|limit|limits|at most|at least|largest|smallest|highest|lowest|longest|'
        || 'shortest)\M'))
    -- (a key the object holds as JSON null: SQL NULL here)
    OR nullif(y.f -> 'condition', 'null') IS DISTINCT FROM (
        SELECT CASE WHEN pg_catalog.cardinality(rag._content_terms(m.a[2])) > 0
            THEN pg_catalog.jsonb_build_object('terms', pg_catalog.to_jsonb(rag._content_terms(m.a[2])),
                'absent', pg_catalog.lower(m.a[1]) IN ('without', 'unless')
                    OR m.a[2] ~* ('\m(no|not|none|nothing|never|empty|missing|omit|omits|omitted|off|'
                        || 'zero)\M|n''t\M'))
            END
        FROM (SELECT ARRAY[r.a[1], pg_catalog.left(r.a[2], 200)] AS a
            FROM pg_catalog.regexp_match(y.x, '\m(if|when|whenever|unless|without)\s+(?!(?:should|must|is|are|was|'
                || 'were|do|does|did|can|could|would|will|to)\M)([^,;?]+)', 'i') AS r (a)) AS m)
    OR nullif(y.f -> 'asks_for', 'null') IS DISTINCT FROM (
        SELECT CASE WHEN pg_catalog.cardinality(rag._content_terms(m.a[1])) BETWEEN 1 AND 3
            THEN pg_catalog.to_jsonb(rag._content_terms(m.a[1])) END
        FROM pg_catalog.regexp_match(rag._question_head(y.x),
            '^(?:which|what)\s+(?!(?:does|do|did|is|are|was|were|can|could|should|would|will|must|has|have|'
            || 'had|if|of|about|happens|kind|kinds|type|types|sort)\M)((?:[A-Za-z_][A-Za-z0-9_-]*\s+){0,2}?'
            || '[A-Za-z_][A-Za-z0-9_-]*)\s+(?:does|do|did|is|are|was|were|can|could|should|would|will|must|has|'
            || 'have|had)\M', 'i') AS m (a))
    OR nullif(y.f -> 'defines', 'null') IS DISTINCT FROM (
        SELECT CASE WHEN pg_catalog.cardinality(rag._content_terms(m.a[1])) BETWEEN 1 AND 5
            AND pg_catalog.array_length(pg_catalog.regexp_split_to_array(pg_catalog.btrim(m.a[1]), '\s+'), 1) <= 5
            THEN pg_catalog.to_jsonb(rag._content_terms(m.a[1])) END
        FROM pg_catalog.regexp_match(rag._question_head(y.x),
            '^what(?:''s|\s+is|\s+are)\s+(?:an?\s+|the\s+)?([^,?]+?)(?:\s+used\s+for)?\s*(?:[,?].*)?$', 'i') AS m (a))
    -- the action's verb: the first element, as the old pattern captured it (lower case; NULL when none or generic)
    OR (y.f -> 'action' ->> 0) IS DISTINCT FROM (
        SELECT CASE WHEN v.v <> ALL (ARRAY['do', 'does', 'make', 'get', 'use', 'have', 'be', 'go', 'take', 'put',
            'see', 'know', 'tell', 'let', 'need', 'want', 'try', 'work', 'deal', 'handle', 'find', 'say', 'come',
            'give', 'keep', 'look', 'run']) THEN v.v END
        FROM (SELECT pg_catalog.lower((pg_catalog.regexp_match(rag._question_head(y.x),
            '^(?:how\s+(?:do|can|should|would|could|must|may)\s+(?:i|we|you|one)|how\s+to)\s+'
            || '(?:(?:safely|quickly|correctly|properly|automatically|manually|efficiently|easily|reliably|completely|'
            || 'temporarily|permanently|best)\s+)?([a-z]{2,})\M', 'i'))[1]) AS v) AS v)
    OR y.dt IS DISTINCT FROM (
        SELECT CASE WHEN pg_catalog.numnode(x.q) >= 3 THEN x.q END
        FROM (
            SELECT pg_catalog.phraseto_tsquery('english', m.a[1]) AS q
            FROM pg_catalog.regexp_match(rag._question_head(y.x),
                '^what(?:''s|\s+s|\s+is|\s+are)\s+(?:an?\s+|the\s+)?([^,?]+?)(?:\s+used\s+for)?\s*(?:[,?].*)?$', 'i')
                AS m (a)
            WHERE pg_catalog.array_length(pg_catalog.regexp_split_to_array(pg_catalog.btrim(m.a[1]), '\s+'), 1) <= 4
                AND m.a[1] !~* ('\m(a|an|the|on|in|of|for|to|with|by|from|at|into|about|between|after|before|when|if|'
                    || 'that|which|who|what|how|why|where|do|does|did|is|are|was|were|be|been|can|should|i|we|you|it|'
                    || 'my|your|our|its|this|these|those|and|or|not|no)\M')
        ) AS x)
"""

# rag._question_names' word test: one pattern for the three it replaced
NAME_WORDS = r"""
SELECT w, coll FROM (
    SELECT u.w, 'C' AS coll, (u.w COLLATE "C") ~ '^(?=.*[[:alpha:]])[[:alnum:]_]*[[:alnum:]]_[[:alnum:]][[:alnum:]_]*$' AS new,
        (u.w COLLATE "C") ~ '^[[:alnum:]_]+$' AND (u.w COLLATE "C") ~ '[[:alnum:]]_[[:alnum:]]'
            AND (u.w COLLATE "C") ~ '[[:alpha:]]' AS old
    FROM unnest(%s::text[]) AS u (w)
    UNION ALL
    SELECT u.w, 'default', u.w ~ '^(?=.*[[:alpha:]])[[:alnum:]_]*[[:alnum:]]_[[:alnum:]][[:alnum:]_]*$',
        u.w ~ '^[[:alnum:]_]+$' AND u.w ~ '[[:alnum:]]_[[:alnum:]]' AND u.w ~ '[[:alpha:]]'
    FROM unnest(%s::text[]) AS u (w)
) AS y
WHERE y.new IS DISTINCT FROM y.old
"""

# rag._choose_quotes' paragraph start (a line opening a block), on the 8 characters where a span starts
PARA_START = r"""
SELECT t FROM (
    SELECT u.t,
        pg_catalog.left(pg_catalog.ltrim(u.t, E' \t'), 3) IN ('```', '~~~')
            OR pg_catalog.left(pg_catalog.ltrim(u.t, E' \t'), 1) IN ('|', '>', '#')
            OR u.t ~ '^[ \t]*([-*+]|[0-9]{1,9}[.)])[ \t]+\S' AS new,
        u.t ~ '^[ \t]*(```|~~~|\||>|#|([-*+]|[0-9]{1,9}[.)])[ \t]+\S)' AS old
    FROM unnest(%s::text[]) AS u (t)
) AS y
WHERE y.new IS DISTINCT FROM y.old
"""

# rag.verify's markers: one pattern for \[([0-9]{1,6})\] (their digits) and (\s*\[[0-9]{1,6}\]) (with the white
# space before them): the same markers in the same order
MARKERS = r"""
SELECT a FROM (
    SELECT u.a,
        ARRAY(SELECT m.a[2] FROM pg_catalog.regexp_matches(u.a, '(\s*)\[([0-9]{1,6})\]', 'g') WITH ORDINALITY AS m (a, o)
            ORDER BY m.o) AS new_digits,
        ARRAY(SELECT m.a[1] FROM pg_catalog.regexp_matches(u.a, '\[([0-9]{1,6})\]', 'g') WITH ORDINALITY AS m (a, o)
            ORDER BY m.o) AS old_digits,
        ARRAY(SELECT m.a[1] || '[' || m.a[2] || ']'
            FROM pg_catalog.regexp_matches(u.a, '(\s*)\[([0-9]{1,6})\]', 'g') WITH ORDINALITY AS m (a, o)
            ORDER BY m.o) AS new_marks,
        ARRAY(SELECT m.a[1] FROM pg_catalog.regexp_matches(u.a, '(\s*\[[0-9]{1,6}\])', 'g') WITH ORDINALITY AS m (a, o)
            ORDER BY m.o) AS old_marks
    FROM unnest(%s::text[]) AS u (a)
) AS y
WHERE y.new_digits IS DISTINCT FROM y.old_digits OR y.new_marks IS DISTINCT FROM y.old_marks
"""


def differ(conn: psycopg.Connection, questions: list, words: list, windows: list, answers: list) -> dict:
    """Per comparison, the inputs whose old and new results differ."""
    return {
        "features": conn.execute(FEATURES, (questions,)).fetchall(),
        "name_words": conn.execute(NAME_WORDS, (words, words)).fetchall(),
        "para_start": conn.execute(PARA_START, (windows,)).fetchall(),
        "markers": conn.execute(MARKERS, (answers,)).fetchall(),
    }


def corpus_strings(conn: psycopg.Connection) -> tuple[list, list, list, list]:
    """Every chunk, sentence, word and logged question of a database: as questions (the sentences and questions),
    words (split on white space, as rag._question_names splits), the 8 characters at every offset of every chunk
    (the paragraph-start test), and as answers (chunks and logged answers)."""
    q = """SELECT DISTINCT x FROM (SELECT question FROM rag.ask_log UNION ALL
               SELECT substr(c.content, s.start_pos + 1, s.end_pos - s.start_pos) FROM rag.sentence AS s
               JOIN rag.chunk AS c USING (chunk_id) UNION ALL SELECT c.content FROM rag.chunk AS c) AS y (x)"""
    questions = [r[0] for r in conn.execute(q)]
    words = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT w FROM (" + q + ") AS z, regexp_split_to_table(z.x, '\\s+') AS w WHERE w <> ''"
        )
    ]
    windows = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT substr(c.content, g.i, 8) FROM rag.chunk AS c, generate_series(1, length(c.content)) AS g (i)"
        )
    ]
    answers = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT x FROM (SELECT answer FROM rag.ask_log WHERE answer IS NOT NULL UNION ALL "
            "SELECT content FROM rag.chunk) AS y (x)"
        )
    ]
    return questions, words, windows, answers


if __name__ == "__main__":
    with psycopg.connect(sys.argv[1]) as c:
        qs, ws, wins, ans = corpus_strings(c)
        d = differ(c, qs, ws, wins, ans)
        print(
            f"questions {len(qs)} (x2 collations), words {len(ws)} (x2), windows {len(wins)}, answers {len(ans)}"
        )
        print({k: len(v) for k, v in d.items()})
        for k, v in d.items():
            for row in v[:5]:
                print(k, repr(row)[:200])
