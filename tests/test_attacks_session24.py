"""Session 24 review (4ac03ee..568aac5), as hostile tenant roles (a reader and a writer of tenant alpha and
of the fuzz tenants f1, f2, f4, a writer of tenant bravo and of f3, an admin, a role without grants):

1. rag._candidates' full-text leg reads the tenant's newest live chunks (rag.chunk_tsv through
   chunk_tsv_tenant_newest_idx) when even the rarest lexeme is dense, falling back to GIN when they do not
   hold the budget's matches; the title leg reads each best title's first p_depth chunks through
   chunk_title_order_idx. Held: rag._candidates returns exactly the rows (every leg's ranks and scores, the
   fused ranking) of rag._candidates as it was at 4ac03ee, for ~1,200 pairs of calls on one connection (past
   PL/pgSQL's five-call plan caching, tenants interleaved): three tenants written in interleaved order by two
   writers, documents replaced and deleted (retired chunks newest in a tenant), tied titles differing only in
   case, trailing space or Unicode normalisation, doc_keys that sort differently in the database's collation
   than bytewise, depths 1 to 40, lexemes dense everywhere, only in the oldest chunks (the scan fails and GIN
   finds them), pairs anti-correlated (the independence estimate is wrong both ways); and in a database whose
   collation is ICU's en-US. The deterministic tenant f4 takes all four newest paths (one lexeme or two,
   found or fallen back); its full-text rows equal an independent reference (BM25 over the newest `budget`
   live matches); a reader's rag.retrieve there equals the old function's top k; another tenant's newer
   chunks and ingests change neither f4's rows nor its path. rag._candidates stays pgcite_owner's (42501 for
   every tenant role).
2. What a writer can make a reader pay (measured outside this file, see the report): the newest scan reads at
   most ceil(2 * budget * n / est) rows, each a detoast of the row's tsvector; a writer whose newest chunks
   carry ~14-27 kB tsvectors (max_chunk_bytes of long words) and whose dense lexeme sits only in older chunks
   makes each row cost ~9 us instead of the ~0.55 us the bound assumes: 20,000 chunks, "legacy" in the oldest
   4,000: rag._candidates 55-61 ms against 28-29 ms at 4ac03ee (the scan alone 38 ms). At most
   sqrt(2 * budget * n) rows; not a test here (loading it takes a minute).
3. The doc_key limit: 2,048 bytes stored (one-, two-, three- and four-byte characters, incompressible, with
   a 63-character tenant and a 2,400-byte title), 2,049 refused with 54000 naming the limit and not the key on
   every path (rag.ingest, rag.store_document, rag.store_parsed, rag.document_unchanged, rag.delete_document,
   rag._store_version and rag._lock_document called directly, the Python client), nothing stored; other
   roles get 42501 whatever the key; NULL and empty keys as before.
   Found and fixed: the update from 0.8.0 (a) failed outright when a live chunk's doc_key was within ~20
   bytes of 0.8.0's own limit (2,666-2,680 random bytes under tenant "old": migration 020's CREATE INDEX
   exceeded the B-tree's 2,704 bytes; now such chunks are in a second partial index), and (b) left every
   document stored then under a key over 2,048 bytes impossible to delete or replace (now only a new key over
   2,048 bytes is refused).
4. The update from 0.8.0 and a fresh install have the same indexes (held).
"""

from __future__ import annotations

import json
import math
import random
import uuid

import psycopg
import pytest
from conftest import (
    bm25_reference,
    connect,
    create_icu_database,
    drop_database,
    fails,
    git_show,
    sqlstate_of,
    store_items,
    two_tenant_database,
    updated_from,
)

SFX = uuid.uuid4().hex[:6]
R = {k: f"s24_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
BEFORE = "4ac03ee"  # the parent of 568aac5

VOCAB = ["vacuum", "table", "index", "bloat", "freeze", "wraparound", "autovacuum", "heap", "page", "tuple"]
FREQ = [0.97, 0.9, 0.75, 0.6, 0.45, 0.3, 0.15, 0.08, 0.03, 0.01]
# tied titles, and titles differing only in case, trailing space, NFC/NFD
TITLES = [
    "Parameters",
    "parameters",
    "Parameters ",
    "PARAMETERS",
    "Paramètres",
    "Parame\u0300tres",
    "Examples",
    "Examples and parameters",
    "Vacuum parameters",
    "",
    "Notes",
]
# keys whose order differs between bytes, C.UTF-8 and ICU (case, accents NFC/NFD, punctuation, non-Latin)
KEYS = [
    "a.md",
    "B.md",
    "b.md",
    "é.md",
    "e\u0301.md",
    "_x",
    "-y",
    "Z",
    "a b",
    "a-b",
    "a_b",
    "ä",
    "z",
    "Ω",
    "0",
]
TITLE_QS = ["parameters", "Parameters examples", "paramètres", "vacuum parameters", "examples", "notes"]


def _vec(rnd: random.Random) -> list[float]:
    return [round(rnd.gauss(0, 1), 3) for _ in range(384)]


def _old_candidates(db_conn, schema: str = "s24old") -> bool:
    """rag._candidates as it was at 4ac03ee, created as <schema>._candidates (superuser only); False without
    git history."""
    src = git_show(BEFORE, "sql/core/040-retrieve.sql")
    if src is None:
        return False
    start = src.index("CREATE OR REPLACE FUNCTION rag._candidates(")
    body = src[start : src.index("$fn$;", start) + len("$fn$;")]
    db_conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    db_conn.execute(body.replace("FUNCTION rag._candidates(", f"FUNCTION {schema}._candidates(", 1))
    return True


def _chunk_text(rnd: random.Random, i: int) -> str:
    words = [w for w, f in zip(VOCAB, FREQ, strict=True) if rnd.random() < f]
    frac = i / 1500.0
    if rnd.random() < max(0.0, 1 - 2 * frac):
        words.append("legacy")
    if rnd.random() < frac:
        words.append("modern")
    words.append("left" if rnd.random() < 0.5 else "right")
    filler = " ".join(rnd.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(3))
    return f"Chunk {i} {filler} " + " ".join(words * rnd.choice([1, 1, 2])) + "."


def _fill_random(writers: dict, rnd: random.Random, steps: int) -> None:
    """Random documents of the tenants in `writers` (tenant -> the writer's connection), interleaved,
    some replaced and deleted."""
    n = 0
    tenants = sorted(writers)
    for _ in range(steps):
        t = rnd.choice(tenants)
        key = rnd.choice(KEYS)
        if rnd.random() < 0.15:
            writers[t].execute("SELECT rag.delete_document(%s, %s)", (t, key))
            continue
        items = []
        for _ in range(rnd.randint(1, 25)):
            n += 1
            items.append(
                {"title": rnd.choice(TITLES), "content": _chunk_text(rnd, n), "embedding": _vec(rnd)}
            )
        store_items(writers[t], t, key, items)


F4_N = 3200


def _f4_text(i: int) -> str:
    """Tenant f4's chunk i of 3,200 (oldest first): "common" everywhere, "legacy" in the oldest half only,
    "left" in the oldest 2,263 and "right" in the newest 2,263 (so that, with the independence estimate, the
    pair looks dense while the newest chunks hold none of it)."""
    words = ["common"]
    if i < 1600:
        words.append("legacy")
    if i < 2263:
        words.append("left")
    if i >= F4_N - 2263:
        words.append("right")
    return f"Record {i} " + " ".join(words) + "."


def _fill_f4(w, b, rnd: random.Random) -> None:
    for d in range(8):
        items = [
            {"title": "Record", "content": _f4_text(i), "embedding": _vec(rnd)}
            for i in range(d * 400, (d + 1) * 400)
        ]
        w.execute("SELECT * FROM rag.store_document('f4', %s, %s::jsonb)", (f"r{d}.md", json.dumps(items)))
    # the tenant's newest chunk ids retired (every word in them), and another tenant's newer chunks
    items = [
        {"title": "Record", "content": "Record new common legacy left right.", "embedding": _vec(rnd)}
        for _ in range(60)
    ]
    w.execute("SELECT * FROM rag.store_document('f4', 'zz-retired.md', %s::jsonb)", (json.dumps(items),))
    w.execute("SELECT rag.delete_document('f4', 'zz-retired.md')")
    b.execute("SELECT * FROM rag.store_document('f3', 'newer.md', %s::jsonb)", (json.dumps(items),))


@pytest.fixture(scope="module")
def adb(pg):
    gen = two_tenant_database(pg, f"pgcite_s24_{SFX}", R)
    name = next(gen)
    with pg.admin(name) as a:
        for t, role in (("f1", "writer"), ("f2", "writer"), ("f4", "writer"), ("f3", "bravo")):
            a.execute("SELECT rag.create_tenant(%s)", (t,))
            a.execute("SELECT rag.grant_tenant(%s, %s)", (t, R[role]))
        a.execute("SELECT rag.grant_tenant('f4', %s)", (R["reader"],))
        has_old = _old_candidates(a)
    rnd = random.Random(24)
    with connect(pg, name, R["writer"]) as w, connect(pg, name, R["bravo"]) as b:
        _fill_random({"f1": w, "f2": w, "f3": b}, rnd, 90)
        _fill_f4(w, b, rnd)
    name_has_old = (name, has_old)
    yield name_has_old
    try:
        next(gen)
    except StopIteration:
        pass


def _path(c, tenant: str, question: str, depth: int) -> str:
    """Which way rag._candidates' full-text leg goes, recomputed from the tenant's statistics and rows."""
    b = depth * 10
    lex = c.execute(
        "SELECT tsvector_to_array(to_tsvector(t.ts_config, %s)) FROM rag.tenant AS t WHERE t.tenant = %s",
        (question, tenant),
    ).fetchone()[0]
    dfs = sorted(
        (d, lexeme)
        for lexeme, d in c.execute(
            "SELECT lexeme, live_chunks FROM rag.tenant_lexeme WHERE tenant = %s AND lexeme = ANY(%s)"
            " AND live_chunks > 0",
            (tenant, lex),
        ).fetchall()
    )
    n = c.execute("SELECT rag._live_chunks(%s)", (tenant,)).fetchone()[0]
    if not dfs or dfs[0][0] <= b:
        return "kept"
    est = dfs[0][0] if len(dfs) == 1 else dfs[0][0] * dfs[1][0] / max(n, 1)
    if 2.0 * b * n > est * est:
        return "gin"
    rows = math.ceil(2.0 * b * n / est)
    match = f"'{dfs[0][1]}'" + ("" if len(dfs) == 1 else f" & '{dfs[1][1]}'")
    found = c.execute(
        "SELECT count(*) FROM (SELECT tsv FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL"
        " ORDER BY chunk_id DESC LIMIT %s) AS x WHERE tsv @@ %s::tsquery",
        (tenant, rows, match),
    ).fetchone()[0]
    return ("newest-found" if found >= b else "newest-fallback") + ("-1" if len(dfs) == 1 else "-2")


CAND = "SELECT * FROM {}._candidates(%s, %s, %s::vector, %s, rag._params())"


def test_candidates_equal_the_previous_function_on_every_path(pg, adb):
    """rag._candidates (new) and the same function at 4ac03ee (old) give identical rows, every leg and the
    fused order, on one connection, tenants interleaved, depths 1-40; every newest path is exercised."""
    name, has_old = adb
    if not has_old:
        pytest.skip("no git history of this checkout")
    rnd = random.Random(2424)
    qs = [" ".join(rnd.sample(VOCAB, rnd.randint(1, 3))) for _ in range(16)]
    qs += [
        "legacy",
        "modern",
        "left right",
        "legacy vacuum",
        "legacy modern",
        "left legacy",
        "modern right table",
    ]
    qs += ["common", "common right", "right left", "legacy common", *TITLE_QS]
    paths: dict[str, int] = {}
    diffs = []
    title_rows = 0
    with psycopg.connect(pg.dsn(name)) as c:  # a superuser (rag._candidates is pgcite_owner's)
        qemb = json.dumps(_vec(rnd))
        for q in qs:
            for depth in (1, 2, 3, 5, 8, 40):
                for t in ("f1", "f4", "f2", "alpha", "f3", "bravo"):
                    new = c.execute(CAND.format("rag"), (t, q, qemb, depth)).fetchall()
                    old = c.execute(CAND.format("s24old"), (t, q, qemb, depth)).fetchall()
                    p = _path(c, t, q, depth)
                    paths[p] = paths.get(p, 0) + 1
                    title_rows += sum(1 for r in new if r[8] is not None)
                    if new != old:
                        diffs.append((t, q, depth, p, new[:5], old[:5]))
        c.rollback()
    assert not diffs, diffs[:3]
    for p in ("newest-found-1", "newest-found-2", "newest-fallback-1", "newest-fallback-2", "gin", "kept"):
        assert paths.get(p, 0) > 0, paths
    assert title_rows > 500


def test_candidates_equal_the_previous_function_under_an_icu_collation(pg):
    """The same comparison in a database whose collation (ICU en-US) orders doc_keys unlike their bytes: the
    title index's order is the ORDER BY's."""
    name = f"pgcite_s24icu_{SFX}"
    create_icu_database(pg, name, "en-US")
    try:
        with pg.admin(name) as a:
            a.execute("CREATE EXTENSION pgcite CASCADE")
            if not _old_candidates(a):
                pytest.skip("no git history of this checkout")
            for t in ("i1", "i2"):
                a.execute("SELECT rag.create_tenant(%s)", (t,))
            in_db = a.execute("SELECT array_agg(k ORDER BY k) FROM unnest(%s::text[]) AS k", (KEYS,))
            assert in_db.fetchone()[0] != sorted(KEYS, key=lambda k: k.encode())
            rnd = random.Random(77)
            _fill_random({"i1": a, "i2": a}, rnd, 50)
            qemb = json.dumps(_vec(rnd))
            diffs = []
            for q in ["vacuum", "vacuum table", "legacy", "left right", *TITLE_QS]:
                for depth in (1, 3, 8):
                    for t in ("i1", "i2"):
                        new = a.execute(CAND.format("rag"), (t, q, qemb, depth)).fetchall()
                        old = a.execute(CAND.format("s24old"), (t, q, qemb, depth)).fetchall()
                        if new != old:
                            diffs.append((t, q, depth))
            assert not diffs, diffs
    finally:
        drop_database(pg, name)


def test_f4_full_text_rows_equal_an_independent_reference_and_paths_are_its_own(pg, adb):
    """f4's full-text rows (depth 1 and 2) equal BM25 over the newest `budget` live matches of the leg's
    match query, computed here from rag.chunk; the plans show the newest scan then (fallen back) a GIN path;
    bravo's later ingest of f3 chunks holding every f4 word changes neither f4's rows nor its path."""
    name, _ = adb
    leg = (
        "SELECT x.chunk_id, x.fts_score FROM rag._candidates('f4', %s, %s::vector, %s, rag._params()) AS x"
        " WHERE x.fts_rank IS NOT NULL ORDER BY x.fts_rank"
    )
    from test_retrieval_index import plans

    rnd = random.Random(5)
    qemb = json.dumps(_vec(rnd))

    def expected(c, q: str, match: str, depth: int) -> list:
        newest = {
            r[0]
            for r in c.execute(
                "SELECT chunk_id FROM rag.chunk WHERE tenant = 'f4' AND retired_at IS NULL"
                " AND tsv @@ %s::tsquery ORDER BY chunk_id DESC LIMIT %s",
                (match, depth * 10),
            )
        }
        ranked = [(cid, s) for cid, s in bm25_reference(c, "f4", q, 10**6) if cid in newest]
        return ranked[:depth]

    cases = (
        ("legacy", "legaci", "newest-fallback-1"),
        ("left right", "left & right", "newest-fallback-2"),
        ("common", "common", "newest-found-1"),
        ("common right", "right & common", "newest-found-2"),
    )
    with psycopg.connect(pg.dsn(name)) as c:
        before = {}
        for q, match, path in cases:
            for depth in (1, 2):
                assert _path(c, "f4", q, depth) == path, (q, depth)
                want = expected(c, q, match, depth)
                rows, seen = plans(c, leg, (q, qemb, depth))
                assert rows == want and len(rows) == depth, (q, depth, rows, want)
                scan = [p for p in seen if "Index Scan Backward using chunk_tsv_tenant_newest_idx" in p]
                gin = [
                    p
                    for p in seen
                    if "WITH m AS MATERIALIZED" in p or "t.tsv OPERATOR(pg_catalog.@@) $1" in p
                ]
                assert scan, (q, depth)
                assert bool(gin) == ("fallback" in path), (q, depth, path)
                before[(q, depth)] = rows
        c.rollback()
    # bravo's newer chunks with all of f4's words (and more of the table: n_table grows)
    with connect(pg, name, R["bravo"]) as b:
        items = [
            {"title": "Record", "content": f"Bravo {i} common legacy left right.", "embedding": _vec(rnd)}
            for i in range(800)
        ]
        b.execute("SELECT * FROM rag.store_document('f3', 'more.md', %s::jsonb)", (json.dumps(items),))
    with psycopg.connect(pg.dsn(name)) as c:
        for q, _, path in cases:
            for depth in (1, 2):
                assert _path(c, "f4", q, depth) == path
                assert c.execute(leg, (q, qemb, depth)).fetchall() == before[(q, depth)]
        c.rollback()


def test_a_readers_retrieve_equals_the_previous_function_past_plan_caching(pg, adb):
    """A reader's rag.retrieve on f4 (k 1-12: depth 40-48, the newest path for "legacy" falls back, for
    "common" finds) gives the old function's top k, eight times each on one connection."""
    name, has_old = adb
    if not has_old:
        pytest.skip("no git history of this checkout")
    rnd = random.Random(9)
    qemb = json.dumps(_vec(rnd))
    with psycopg.connect(pg.dsn(name)) as a:
        want = {}
        for q in ("legacy", "common", "left right", "record legacy"):
            corrected = a.execute("SELECT rag._correct_question('f4', %s, rag._params())", (q,)).fetchone()[0]
            for k in (1, 10, 12):
                want[(q, k)] = a.execute(
                    "SELECT chunk_id FROM s24old._candidates('f4', %s, %s::vector, greatest(%s * 4, 40),"
                    " rag._params(), %s) WHERE fused_rank <= %s ORDER BY fused_rank",
                    (corrected, qemb, k, q, k),
                ).fetchall()
        assert _path(a, "f4", "legacy", 40) == "newest-fallback-1"
        assert _path(a, "f4", "common", 40) == "newest-found-1"
        a.rollback()
    with connect(pg, name, R["reader"]) as r:
        for _ in range(8):
            for (q, k), rows in want.items():
                got = r.execute("SELECT chunk_id FROM rag.retrieve(%s, 'f4', %s, %s::vector)", (q, k, qemb))
                assert got.fetchall() == rows, (q, k)


def test_candidates_stay_the_owners(pg, adb):
    name, _ = adb
    for role in ("reader", "writer", "admin", "bravo", "nobody"):
        with connect(pg, name, R[role]) as c:
            assert (
                fails(c, "SELECT * FROM rag._candidates('f4', 'legacy', NULL, 1, rag._params(), 'legacy')")
                == "42501"
            ), role


# ---------------------------------------------------------------- 3. the doc_key limit
def _items(title: str = "Vacuum schedule", content: str = "Vacuum runs at night.") -> str:
    return json.dumps([{"title": title, "content": content, "embedding": [0.05] * 384}])


DOC = "# Vacuum schedule\n\nThe alpha team vacuums its tables every night at two o'clock.\n"


def _parsed(c) -> str:
    return json.dumps(
        {
            "model": c.execute("SELECT rag.model_name()").fetchone()[0],
            "format": "markdown",
            "chunker_version": c.execute("SELECT rag._chunker_version()").fetchone()[0],
            "title": None,
            "empty_sections": 0,
            "chunks": json.loads(_items()),
        }
    )


def _writes(c, key: str) -> list[tuple[str, tuple]]:
    parsed = _parsed(c)
    return [
        ("SELECT status FROM rag.store_document('alpha', %s, %s::jsonb)", (key, _items())),
        ("SELECT status FROM rag.ingest('alpha', %s, %s)", (key, DOC)),
        ("SELECT status FROM rag.store_parsed('alpha', %s, %s, 'markdown', %s::jsonb)", (key, DOC, parsed)),
    ]


def test_doc_keys_at_the_limit_in_every_encoding_are_stored_one_byte_more_refused(pg, adb):
    """2,048 bytes of one-, two-, three- and four-byte characters are stored by each write path, found by
    rag.document_unchanged and deleted; one byte more is 54000 naming the limit, never the key, on every path
    that writes or deletes (the internal functions called directly and the Python client included), and
    nothing is stored; rag.document_unchanged (a read) finds no such document."""
    from pgcite import Client
    from pgcite.errors import LimitExceeded

    name, _ = adb
    rnd = random.Random(48)
    astral = "".join(chr(rnd.randrange(0x1F300, 0x1F5FF)) for _ in range(512))
    at_limit = ["k" * 2048, "é" * 1024, "あ" * 682 + "ab", astral, "é" * 1000 + "あ" * 16]
    over = ["k" * 2049, "é" * 1024 + "x", "あ" * 683, astral + "x", "\U0001f600" * 513]
    for k in at_limit:
        assert len(k.encode()) == 2048
    for k in over:
        assert len(k.encode()) > 2048
    keys = "SELECT count(*), sum(octet_length(doc_key)) FROM rag.document_key"
    with pg.admin(name) as a:
        before = a.execute(keys).fetchone()
    with connect(pg, name, R["writer"]) as w:
        for key in over:
            # a read: such a key cannot be stored, so never unchanged
            assert (
                w.execute(
                    "SELECT * FROM rag.document_unchanged('alpha', %s, %s, 'auto', 1)", (key, DOC)
                ).fetchall()
                == []
            )
            # deleting it: no such document (never stored), false
            assert w.execute("SELECT rag.delete_document('alpha', %s)", (key,)).fetchone()[0] is False
            calls = _writes(w, key) + [
                ("SELECT rag._lock_document(current_user, 'alpha', %s, sha256('x'))", (key,)),
                (
                    "SELECT * FROM rag._store_version(current_user, 'alpha', %s, sha256('x'), 'chunks', NULL,"
                    " NULL, '{}', 0, rag.model_name(), ARRAY[ROW(NULL, '', 'T', 'Vacuum runs.', 3,"
                    " array_fill(0.05, ARRAY[384])::vector)::rag.chunk_input], NULL::rag.sentence_input[])",
                    (key,),
                ),
            ]
            for sql, params in calls:
                with pytest.raises(psycopg.Error) as e:
                    w.execute(sql, params)
                msg = str(e.value) + str(e.value.diag.message_hint or "")
                assert sqlstate_of(e) == "54000" and "over 2048" in msg, (sql, msg[:300])
                assert key[:40] not in msg and key[-40:] not in msg
        client = Client(psycopg.conninfo.make_conninfo(pg.dsn(name), user=R["writer"]))
        try:
            for call in (
                lambda: client.ingest("alpha", over[1], DOC),
                lambda: client.ingest("alpha", over[2], DOC, format="markdown"),
            ):
                with pytest.raises(LimitExceeded) as e:
                    call()
                assert "over 2048" in str(e.value) and over[1][:40] not in str(e.value)
        finally:
            client.close()
        with pg.admin(name) as a:
            assert a.execute(keys).fetchone() == before
        for key in at_limit:
            for sql, params in _writes(w, key):
                assert w.execute(sql, params).fetchone()[0] in ("inserted", "updated"), (sql, key[:10])
            unchanged = "SELECT status FROM rag.document_unchanged('alpha', %s, %s, 'auto', 1)"
            assert w.execute(unchanged, (key, DOC)).fetchall() in ([], [("unchanged",)])
            assert w.execute("SELECT rag.delete_document('alpha', %s)", (key,)).fetchone()[0] is True
    # other roles: 42501 whatever the key (authorization first), for the long key too
    for role in ("reader", "bravo", "nobody"):
        with connect(pg, name, R[role]) as c:
            for key in (over[0], "short.md"):
                for sql, params in (
                    ("SELECT * FROM rag.store_document('alpha', %s, %s::jsonb)", (key, _items())),
                    ("SELECT rag.delete_document('alpha', %s)", (key,)),
                    ("SELECT * FROM rag.ingest('alpha', %s, %s)", (key, DOC)),
                ):
                    assert fails(c, sql, params) == "42501", (role, sql)


def test_null_and_empty_keys_as_before(pg, adb):
    """NULL and blank keys: 22004 for writes and rag.delete_document's NULL; a blank or never-stored key
    deletes nothing (false)."""
    name, _ = adb
    with connect(pg, name, R["writer"]) as w:
        for key in (None, "", "   "):
            for sql, params in _writes(w, key)[:2]:
                assert fails(w, sql, params) == "22004", (sql, key)
            unchanged = "SELECT * FROM rag.document_unchanged('alpha', %s, 'x', 'auto', 1)"
            assert fails(w, unchanged, (key,)) == "22004"
        # NULL: 22004 (documented; was 23502 from rag.document_key's NOT NULL); '' and never-stored keys:
        # false, without a row of rag.document_key made for them (one was)
        assert fails(w, "SELECT rag.delete_document('alpha', NULL)") == "22004"
        with pg.admin(name) as a:
            before = a.execute("SELECT count(*) FROM rag.document_key").fetchone()[0]
        for key in ("", "   ", "never-stored.md", "k" * 3000):
            assert w.execute("SELECT rag.delete_document('alpha', %s)", (key,)).fetchone()[0] is False
        with pg.admin(name) as a:
            assert a.execute("SELECT count(*) FROM rag.document_key").fetchone()[0] == before


def test_the_longest_key_with_the_longest_tenant_and_title_fits_every_index(pg, adb):
    """A 63-character tenant, a 2,048-byte key of random astral characters and a 2,400-byte title that does
    not compress: stored (every index entry, chunk_title_order_idx's included, under the B-tree's limit),
    replaced, its other chunk found by its title through the title leg, deleted. (A 2,400-byte title itself
    is never found by the title leg: word_similarity is the share of the title's trigrams in the question's
    first 500 characters.)"""
    name, _ = adb
    tenant = "t" + "0123456789" * 6 + "xy"
    assert len(tenant) == 63
    rnd = random.Random(63)
    key = "".join(chr(rnd.randrange(0x10000, 0x10FFFF)) for _ in range(512))
    title = "Vacuum schedule " + "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz0123456789 ", k=2384))
    assert len(key.encode()) == 2048 and len(title.encode()) == 2400
    with pg.admin(name) as a:
        a.execute("SELECT rag.create_tenant(%s)", (tenant,))
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, R["writer"]))
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, R["reader"]))
    with connect(pg, name, R["writer"]) as w:
        for content in ("Vacuum runs at night.", "Vacuum runs at noon."):
            items = json.loads(_items(title, content)) + json.loads(_items("Checkpoint tuning", content))
            store_items(w, tenant, key, items)
    with connect(pg, name, R["reader"]) as r:
        rows = r.execute(
            "SELECT doc_key, doc_version, title, trgm_score FROM rag.retrieve('checkpoint tuning', %s, 4)",
            (tenant,),
        ).fetchall()
        # the short title's chunk through the title leg (chunk_title_order_idx), under the longest key
        assert rows[0][:3] == (key, 2, "Checkpoint tuning") and rows[0][3] is not None, rows
        assert {r[0] for r in rows} == {key}
    with connect(pg, name, R["writer"]) as w:
        assert w.execute("SELECT rag.delete_document(%s, %s)", (tenant, key)).fetchone()[0] is True


# ---------------------------------------------------------------- 4. the update from 0.8.0
def _random_key(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=n))


def test_the_update_from_0_8_0_succeeds_with_a_key_0_8_0_stored(pg):
    """0.8.0 stored a document under a 2,672-byte key that does not compress (its own indexes' entries fit).
    Found by the review: migration 020's CREATE INDEX chunk_title_order_idx (tenant, 8-byte hash, doc_key,
    chunk_index, chunk_id: 12-16 bytes more per entry than rag.chunk's unique key) failed with "index row size
    2712 exceeds btree version 4 maximum 2704", and ALTER EXTENSION pgcite UPDATE with it. Now keys over 2,048
    bytes are in a second partial index (tenant, title): the update runs, and the title leg still finds the
    chunk, through that index."""
    key = _random_key(random.Random(2672), 2672)

    def store(c) -> None:
        c.execute("SELECT rag.create_tenant('old')")
        row = c.execute("SELECT status FROM rag.store_document('old', %s, %s::jsonb)", (key, _items()))
        assert row.fetchone() == ("inserted",)

    # updated_from asserts that ALTER EXTENSION pgcite UPDATE ran to 0.9.0
    with updated_from(pg, f"pgcite_s24long_{SFX}", before_update=store) as c:
        trgm = c.execute(
            "SELECT c.doc_key FROM rag._candidates('old', 'Vacuum schedule', %s::vector, 40,"
            " rag._params()) AS x JOIN rag.chunk AS c USING (chunk_id) WHERE x.trgm_rank IS NOT NULL",
            (json.loads(_items())[0]["embedding"],),
        ).fetchall()
        assert trgm == [(key,)]


def sqlstate_of_exc(e: psycopg.Error) -> str | None:
    return getattr(e, "sqlstate", None)


def _store_long_keys(c) -> None:
    c.execute("SELECT rag.create_tenant('old')")
    for key in _LONG_KEYS:
        c.execute("SELECT * FROM rag.store_document('old', %s, %s::jsonb)", (key, _items()))


_LONG_KEYS = [_random_key(random.Random(2500), 2500), "a" * 10000]


def test_documents_stored_under_0_8_0_with_long_keys_can_still_be_deleted(pg):
    """Documents 0.8.0 stored under keys over 2,048 bytes (a 2,500-byte one that does not compress, a
    10,000-byte one that does) keep their keys through the update. Found by the review: rag.delete_document
    (and a new version through rag.store_document) refused them with 54000, so nobody could retire them. Now a
    key already stored stays usable: a new version is stored under it, then it is deleted (its chunks
    retired); a new key of the same length is still refused."""
    with updated_from(pg, f"pgcite_s24upd_{SFX}", before_update=_store_long_keys) as c:
        live_docs = "SELECT count(*) FROM rag.document WHERE tenant = 'old' AND retired_at IS NULL"
        assert c.execute(live_docs).fetchone()[0] == len(_LONG_KEYS)
        problems = []
        for key in _LONG_KEYS:
            row = c.execute(
                "SELECT status FROM rag.store_document('old', %s, %s::jsonb)", (key, _items(content="Twice."))
            ).fetchone()
            assert row == ("updated",)
            with pytest.raises(psycopg.Error) as e:
                c.execute("SELECT * FROM rag.store_document('old', %s, %s::jsonb)", (key + "x", _items()))
            assert e.value.sqlstate == "54000"
            try:
                deleted = c.execute("SELECT rag.delete_document('old', %s)", (key,)).fetchone()[0]
                if deleted is not True:
                    problems.append((len(key), "not deleted"))
            except psycopg.Error as e:
                problems.append((len(key), sqlstate_of_exc(e), str(e).splitlines()[0]))
        live_chunks = "SELECT count(*) FROM rag.chunk WHERE tenant = 'old' AND retired_at IS NULL"
        live = c.execute(live_chunks).fetchone()[0]
        assert not problems and live == 0, (problems, live)


def test_the_update_and_a_fresh_install_have_the_same_indexes(pg, adb):
    name, _ = adb
    q = (
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'rag'"
        " AND indexname !~ '^(chunk_hnsw|chunk_tsv|tenant_title_tsv)_[0-9a-f]{20}$' ORDER BY 1"
    )
    with pg.admin(name) as a:
        fresh = a.execute(q).fetchall()
    with updated_from(pg, f"pgcite_s24idx_{SFX}") as c:
        upgraded = c.execute(q).fetchall()
    assert upgraded == fresh
    names = {n for n, _ in fresh}
    assert {"chunk_tsv_tenant_newest_idx", "chunk_title_order_idx"} <= names
    assert "chunk_title_idx" not in names
