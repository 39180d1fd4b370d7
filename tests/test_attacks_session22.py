"""Review of session 22's change (02f460c): rag._candidates scores the full-text candidates by BM25 in one
GROUP BY over every candidate's terms (idf by the term's place in q_lex, the question's lexemes marked B and
kept by ts_filter '{b}'), instead of one LATERAL aggregate per candidate (lexemes marked A over an all-D
copy). It holds only if no chunk's tsvector has a B (or C) weight.

1. Scores: for questions whose lexemes are in titles and contents (A and D positions of one lexeme),
   repeated words, stop words only, quotes, unicode, a negation, a phrase, a word only another tenant has, and
   a chunk whose positions pass 16383 with over 256 occurrences of a word, the full-text leg's rows and
   fts_score equal a BM25 reference recomputed in Python from the tenant's chunks (those matching the leg's
   query), and the old statement (02f460c^) run over the same candidates; rag.retrieve's fts_score as a
   reader equals the reference.
2. The invariant: chunks stored by a writer through rag.store_document and rag.ingest (titles of every
   kind), and chunks stored under 0.8.0 then updated, hold weights A and D only; no tenant role can write
   rag.chunk or rag.chunk_tsv, and rag.chunk.tsv is generated from an A title and a D content.
3. Determinism: the leg's rows and scores are the same on reruns, on other connections and whatever the
   caller's enable_hashagg, enable_sort, work_mem or plan_cache_mode."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from conftest import CHAPTERS_TENANT, bm25_reference, connect, fails, two_tenant_database, updated_from

SFX = uuid.uuid4().hex[:6]
R = {k: f"s22_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
T = "alpha"
DEPTH = 40
LEG = (
    "SELECT chunk_id, fts_score FROM rag._candidates(%s, %s, %s::vector, %s, rag._params())"
    " WHERE fts_rank IS NOT NULL ORDER BY fts_rank"
)
# the full-text scoring of 02f460c^ (one LATERAL aggregate per candidate), over the chunks matching the leg's
# query; q_lex / q_idf as rag._candidates computes them
OLD = """
WITH p AS (
    SELECT rag._fts_query(t.ts_config, %(q)s) AS q,
        tsvector_to_array(to_tsvector(t.ts_config, %(q)s)) AS lexemes,
        rag._live_chunks(t.tenant) AS n_active
    FROM rag.tenant AS t WHERE t.tenant = %(t)s
), w AS (
    SELECT array_agg(x.lexeme ORDER BY x.lexeme) AS q_lex,
        array_agg(ln(1 + (p.n_active - x.df + 0.5) / (x.df + 0.5)) ORDER BY x.lexeme) AS q_idf
    FROM p, LATERAL (
        SELECT l.lexeme, s.live_chunks::float8 AS df FROM unnest(p.lexemes) AS l (lexeme)
        JOIN rag.tenant_lexeme AS s ON s.tenant = %(t)s AND s.lexeme = l.lexeme AND s.live_chunks > 0
    ) AS x
    GROUP BY p.n_active
)
SELECT m.chunk_id, ct.s, m.doc_key, m.chunk_index
FROM p, w, rag.chunk AS m
CROSS JOIN LATERAL (
    SELECT round(sum(w2.idf * 2.2 * e.tf / (e.tf + 1.2))::numeric, 6)::float8 AS s
    FROM (
        SELECT tv.lexeme, coalesce(array_length(tv.positions, 1), 1)::float8 AS tf
        FROM unnest(ts_filter(setweight(setweight(m.tsv, 'D'), 'A', (SELECT q_lex FROM w)), '{a}')) AS tv
    ) AS e
    JOIN ROWS FROM (unnest((SELECT q_lex FROM w)), unnest((SELECT q_idf FROM w))) AS w2 (lexeme, idf)
        ON w2.lexeme = e.lexeme
) AS ct
WHERE m.tenant = %(t)s AND m.retired_at IS NULL AND m.tsv @@ p.q AND ct.s IS NOT NULL
ORDER BY ct.s DESC, m.doc_key, m.chunk_index, m.chunk_id
LIMIT %(d)s
"""


def _emb(i: int) -> list[float]:
    return [((i * 7 + j) % 11 - 5) / 10 for j in range(384)]


EMB = json.dumps(_emb(3))

LONG = "filler " * 17000 + "walrus penguin " + "zebra " * 300 + "café naïve"
ITEMS = [
    ("Vacuum freeze vacuum", "Vacuum the table to freeze old rows; vacuum again after a freeze. Vacuum."),
    ("Freeze", "Nothing here but the freeze of a walrus."),
    ("Walrus penguin zebra", LONG),
    (
        "O'Reilly's \\backslash\\ naïve café Ünïcödé",
        "The café serves naïve O'Reilly ünïcödé \\back\\ walrus.",
    ),
    ("The and of", "The of and to a an in vacuum."),
    ("", "Untitled chunk about penguin colonies and the walrus freeze."),
    ("Penguin penguin", "penguin " * 40 + "walrus"),
]
QUESTIONS = [
    "vacuum freeze",
    "vacuum vacuum vacuum freeze freeze",
    "walrus penguin zebra filler",
    "O'Reilly's naïve café ünïcödé \\backslash\\",
    "walrus -penguin",
    '"vacuum freeze" walrus',
    '"penguin colonies"',
    "the and of",
    "pelican orange",
    "walrus",
]


E_MD = "# Freeze walrus\n\nThe walrus vacuums. 'Quoted' café.\n\n## Penguin vacuum\n\nPenguin freeze.\n"


def _items(rows, base: int) -> str:
    return json.dumps(
        [{"content": c, "title": t, "embedding": _emb(base + i)} for i, (t, c) in enumerate(rows)]
    )


@pytest.fixture(scope="module")
def sdb(pg):
    # LONG (a chunk whose positions reach 16383) is over the default max_chunk_bytes (16 kB): an admin raises
    # it for this database
    for name in two_tenant_database(pg, f"pgcite_s22_{SFX}", R, {"max_chunk_bytes": "200000"}):
        with connect(pg, name, R["writer"]) as w:
            w.execute("SELECT * FROM rag.store_document('alpha', 'c.md', %s::jsonb)", (_items(ITEMS, 0),))
            w.execute(
                "SELECT * FROM rag.store_document('alpha', 'd.md', %s::jsonb, title => %s)",
                (_items(ITEMS[:3], 10), "Document title vacuum"),
            )
            w.execute(
                "SELECT * FROM rag.ingest('alpha', 'e.md', %s, 'markdown')",
                (E_MD,),
            )
            # a new version retires d.md's first chunks: retired chunks are not scored
            w.execute(
                "SELECT * FROM rag.store_document('alpha', 'd.md', %s::jsonb)", (_items(ITEMS[3:5], 20),)
            )
        yield name


def _reference(c, tenant: str, question: str, depth: int = DEPTH) -> list[tuple[int, float]]:
    """conftest.bm25_reference over the chunks the leg's own query matches (a negation, a phrase)."""
    return bm25_reference(c, tenant, question, depth, leg_query=True)


def _close(a, b) -> bool:
    return [x for x, _ in a] == [x for x, _ in b] and all(
        abs(s - t) < 2e-6 for (_, s), (_, t) in zip(a, b, strict=True)
    )


def test_the_corpus_has_mixed_weights_long_chunks_and_capped_positions(pg, sdb):
    """The questions below reach what they are meant to: lexemes with A and D positions in one chunk, a
    lexeme at position 16383 (the cap) and one with 255 positions (to_tsvector's cap)."""
    with pg.admin(sdb) as a:
        mixed, capped, many = a.execute(
            "SELECT count(*) FILTER (WHERE u.weights @> '{A}' AND u.weights @> '{D}'),"
            " count(*) FILTER (WHERE 16383 = ANY (u.positions)),"
            " count(*) FILTER (WHERE array_length(u.positions, 1) >= 255)"
            " FROM rag.chunk AS c, unnest(c.tsv) AS u WHERE c.tenant = 'alpha' AND c.retired_at IS NULL"
        ).fetchone()
    assert mixed >= 3 and capped >= 1 and many >= 1


@pytest.mark.parametrize("question", QUESTIONS)
def test_full_text_leg_scores_equal_bm25_and_the_old_statement(pg, sdb, question):
    """rag._candidates' full-text rows and fts_score equal the Python BM25 reference and the scoring statement
    of 02f460c^ over the same candidates, for questions with title and content lexemes, repeats, stop words,
    quotes, unicode, negation, a phrase and another tenant's words; no error."""
    with pg.admin(sdb) as a:
        leg = a.execute(LEG, (T, question, EMB, DEPTH)).fetchall()
        ref = _reference(a, T, question)
        old = [(cid, s) for cid, s, _, _ in a.execute(OLD, {"q": question, "t": T, "d": DEPTH})]
    assert _close(leg, ref), (question, leg, ref)
    assert leg == old, (question, leg, old)
    if question in ("the and of", "pelican orange"):
        assert leg == []
    else:
        assert leg


def test_a_readers_retrieve_fts_scores_equal_the_reference(pg, sdb):
    """What a reader sees: every rag.retrieve row's fts_score is the reference BM25 of its chunk (NULL for a
    chunk outside the leg), for the corrected question."""
    checked = 0
    with connect(pg, sdb, R["reader"]) as r, pg.admin(sdb) as a:
        for q in QUESTIONS:
            corrected = a.execute("SELECT rag._correct_question(%s, %s, rag._params())", (T, q)).fetchone()[0]
            ref = dict(_reference(a, T, corrected))
            for cid, fts in r.execute(
                "SELECT chunk_id, fts_score FROM rag.retrieve(%s, %s, 10, %s::vector)", (q, T, EMB)
            ):
                if cid in ref:
                    assert fts is not None and abs(fts - ref[cid]) < 2e-6, (q, cid, fts, ref[cid])
                    checked += 1
                else:
                    assert fts is None, (q, cid, fts)
    assert checked >= 10


def test_no_chunk_tsvector_holds_a_b_or_c_weight(pg, sdb):
    """The change's invariant on what writers stored (store_document with chunk and document titles of every
    kind, ingest): weights A and D only, in rag.chunk and rag.chunk_tsv, which agree."""
    with pg.admin(sdb) as a:
        bad = a.execute(
            "SELECT count(*) FROM rag.chunk AS c, unnest(c.tsv) AS u WHERE u.weights && '{B,C}'::text[]"
        ).fetchone()[0]
        bad_tsv = a.execute(
            "SELECT count(*) FROM rag.chunk_tsv AS c, unnest(c.tsv) AS u WHERE u.weights && '{B,C}'::text[]"
        ).fetchone()[0]
        differ = a.execute(
            "SELECT count(*) FROM rag.chunk AS c FULL JOIN rag.chunk_tsv AS v USING (chunk_id)"
            " WHERE (c.retired_at IS NULL) IS DISTINCT FROM (v.chunk_id IS NOT NULL)"
            " OR (v.chunk_id IS NOT NULL AND v.tsv IS DISTINCT FROM c.tsv)"
        ).fetchone()[0]
        expr = a.execute(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef AS d JOIN pg_attribute AS t"
            " ON t.attrelid = d.adrelid AND t.attnum = d.adnum"
            " WHERE d.adrelid = 'rag.chunk'::regclass AND t.attname = 'tsv' AND t.attgenerated = 's'"
        ).fetchone()[0]
    assert (bad, bad_tsv, differ) == (0, 0, 0)
    assert "'A'" in expr and "'D'" in expr and "'B'" not in expr and "'C'" not in expr, expr


def test_scores_hold_even_if_a_tsvector_had_b_or_c_weights(pg, sdb):
    """Beyond the invariant: with every position of the tenant's narrow rows weighed B, or C, or the
    title's lexemes made B (only a superuser can), the leg's rows and scores are unchanged (a kept lexeme
    outside q_lex has no idf: NULL, which sum skips; C is not kept)."""
    with pg.admin(sdb) as a:
        want = {q: a.execute(LEG, (T, q, EMB, DEPTH)).fetchall() for q in QUESTIONS}
        for change in (
            "setweight(tsv, 'B')",
            "setweight(tsv, 'C')",
            "setweight(tsv, 'B', ARRAY(SELECT u.lexeme FROM unnest(tsv) AS u WHERE 'A' = ANY (u.weights)))",
        ):
            with a.transaction(force_rollback=True):
                a.execute(f"UPDATE rag.chunk_tsv SET tsv = {change} WHERE tenant = %s", (T,))
                for q in QUESTIONS:
                    assert a.execute(LEG, (T, q, EMB, DEPTH)).fetchall() == want[q], (change, q)


@pytest.mark.parametrize("role", ["reader", "writer", "admin", "nobody"])
def test_no_tenant_role_writes_a_tsvector(pg, sdb, role):
    """No role of pgcite can write rag.chunk's or rag.chunk_tsv's rows (so no B or C weight from a tenant)."""
    with pg.admin(sdb) as a:
        for table in ("rag.chunk", "rag.chunk_tsv"):
            for priv in ("INSERT", "UPDATE", "DELETE", "TRUNCATE"):
                assert not a.execute(
                    "SELECT has_table_privilege(%s, %s, %s)", (R[role], table, priv)
                ).fetchone()[0]
    with connect(pg, sdb, R[role]) as c:
        assert fails(c, "UPDATE rag.chunk_tsv SET tsv = setweight(tsv, 'B')") == "42501"
        assert (
            fails(c, "INSERT INTO rag.chunk_tsv (chunk_id, tsv, tenant) VALUES (1, 'a:1B', 'alpha')")
            == "42501"
        )


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"enable_hashagg": "off"},
        {"enable_sort": "off"},
        {"enable_hashagg": "off", "work_mem": "64kB"},
        {"work_mem": "64kB"},
        {"plan_cache_mode": "force_custom_plan", "enable_hashagg": "off"},
        {"enable_nestloop": "off", "enable_hashjoin": "off"},
    ],
    ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default",
)
def test_fts_scores_are_the_same_whatever_the_callers_plan_settings(pg, db, chapters, settings):
    """The chapters' tenant (up to 400 candidates): the leg's rows and exact fts_score values on a new
    connection with the caller's planner settings, called 8 times (past PL/pgSQL's generic plan), equal those
    of a default connection, and the reference's."""
    questions = [
        "how does autovacuum decide when to vacuum a table",
        "transaction id wraparound freeze vacuum",
        "index scan bitmap heap btree vacuum table",
    ]
    with psycopg.connect(pg.dsn(db), autocommit=True) as base:
        want = {q: base.execute(LEG, (CHAPTERS_TENANT, q, EMB, DEPTH)).fetchall() for q in questions}
        for q in questions[:1]:
            assert _close(want[q], _reference(base, CHAPTERS_TENANT, q)), q
    assert all(len(v) == DEPTH for v in want.values())
    with psycopg.connect(pg.dsn(db), autocommit=True) as c:
        for k, v in settings.items():
            c.execute("SELECT set_config(%s, %s, false)", (k, v))
        for _ in range(8):
            for q in questions:
                assert c.execute(LEG, (CHAPTERS_TENANT, q, EMB, DEPTH)).fetchall() == want[q], (settings, q)


def _store_old(c) -> None:
    """Under 0.8.0: tenant alpha's chunks with titles and contents sharing words."""
    c.execute("SELECT rag.create_tenant('alpha')")
    c.execute("SELECT * FROM rag.store_document('alpha', 'c.md', %s::jsonb)", (_items(ITEMS, 0),))
    c.execute("SELECT * FROM rag.store_document('alpha', 'c.md', %s::jsonb)", (_items(ITEMS[:5], 30),))


def test_chunks_stored_under_0_8_0_score_as_the_reference_after_the_update(pg):
    """Chunks stored by 0.8.0, then ALTER EXTENSION pgcite UPDATE: weights A and D only, and the leg's scores
    equal the reference's and the old statement's."""
    with updated_from(pg, f"pgcite_s22upd_{SFX}", before_update=_store_old) as c:
        assert (
            c.execute(
                "SELECT count(*) FROM rag.chunk_tsv AS v, unnest(v.tsv) AS u"
                " WHERE u.weights && '{B,C}'::text[]"
            ).fetchone()[0]
            == 0
        )
        for q in QUESTIONS:
            leg = c.execute(LEG, (T, q, EMB, DEPTH)).fetchall()
            assert _close(leg, _reference(c, T, q)), q
            assert leg == [(cid, s) for cid, s, _, _ in c.execute(OLD, {"q": q, "t": T, "d": DEPTH})], q
