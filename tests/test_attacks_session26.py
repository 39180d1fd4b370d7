"""Session 26 review (75e6fa0..e21a8ad, then e69f231: rag._candidates), as a hostile reviewer and as tenant
roles (a reader and a writer of tenants own and many, a writer of bravo, a role without grants). The change:
through a tenant's own partial GIN index on rag.chunk_tsv, when `kept` is NULL (even the rarest lexeme over
fts_budget, a negated question, or no lexeme the tenant has), the candidate statement sorts (chunk_id, ctid)
of every match and the newest fts_budget rows are read back by ctid (at e21a8ad a scalar subquery per
candidate, `t.ctid = x.tid`; since e69f231 one TID scan, `t.ctid = ANY (ARRAY(...))`, with enable_tidscan
pinned on); otherwise the old form carries the tsvector through the sort. Meant to give exactly the rows, the
candidates and their tsvectors of the function at 0a061ed (created here as pg_temp._cand_old). Tested: the
installed function (e69f231's form at this commit).

Besides the rows, two probes compare the candidate arrays themselves: copies of the installed function and of
the old one (pg_temp._probe_new, pg_temp._probe_old) that RAISE NOTICE fts_ids, the md5 of each element of
fts_tsv (NULL where the tsvector is left to the primary-key read) and q_match right after the own-index
EXECUTE. A read-back that found nothing, another row version or another tenant's row would not always change
the rows (a NULL tsvector is read again by primary key) but changes the arrays. Checked against mutants of
the installed function (outside this file): never keeping a tsvector, keeping compressed ones, reading the
oldest matches back, dropping the tenant from the scan, or unpinning enable_tidscan each fail 1-7 tests.

Held:
- own (4,800 chunks, its own GIN index, bravo's chunks interleaved in the heap): 12 questions (the two
  rarest of thousands, one rare lexeme over the budget, two over the budget with 6 chunks in common, phrase,
  negated, pure negation, none known) x 7 depths: the installed function's rows equal the old function's, its
  candidate arrays equal the old one's element for element, the ids are the newest fts_budget live matches
  of q_match read from rag.chunk, each kept tsvector is that chunk's own and NULL exactly when the stored
  value is over 2,048 bytes or compressed (stored tsvectors of 1.8-2.4 kB inline and external, compressed
  inline and external, 13 kB), and the full-text rows (tied scores among them) equal
  conftest.bm25_reference over those candidates.
- a caller's enable_tidscan / enable_sort / enable_bitmapscan / enable_hashagg / enable_nestloop /
  enable_material / enable_indexscan off, work_mem 64kB (lossy bitmaps, spilled sorts) and each
  plan_cache_mode, each case six times: the same rows and arrays.
- REPEATABLE READ: the writer replaces and deletes documents, the superuser moves own's rows of
  rag.chunk_tsv (UPDATE), VACUUM runs and bravo stores, all committed between two rounds of calls in one
  transaction: the second round's rows and arrays are the first's; after the commit new == old on the new
  data.
- READ COMMITTED, during calls: while a writer replaces a document in a loop and a superuser changes own's
  tsvectors in rag.chunk_tsv (new row versions, scores changed) and runs VACUUM, 200-400 statements calling
  the new and the old probe (one snapshot): equal arrays and rows in every statement.
- own's deleted rows' slots (ctids) reused by bravo's new rows after VACUUM: own's arrays hold only own's
  tsvectors and its rows and arrays are those before bravo's insert.
- tenant roles: rag._candidates and rag.chunk_tsv (by ctid too) are 42501, no role may make a table inherit
  rag.chunk_tsv (the read-back by ctid assumes one relation), a reader's rag.retrieve (k 1, 3, 10, 100; the
  read-back among them) equals the old function's top k. rag.retrieve's spelling correction drops "-", so a
  reader's question never reaches the negated path; rag._candidates is the owner's.
- many (20,000 chunks, all matching a negated question; 6,667 matching the two rarest lexemes): one call at
  depth 40 and 400 returns the old rows with no more memory and no more time than the old function.

Found at e21a8ad, fixed by e69f231 before this file (the last test, which the function at e21a8ad fails):
the read-back subquery named no tenant and no key, only `t.ctid = x.tid`, so a caller's `SET enable_tidscan =
off` (a `user` setting: any role) planned it as a sequential scan of the whole rag.chunk_tsv, every tenant's
live chunks, once per candidate: here 400 scans, 10.6 million rows and 0.46 s for one call at depth 40 (the
old function 0 rows, 0.03 s); a reader's rag.retrieve at k 10 the same.

Looked at, not this change's (the old function alike, no test here): planner costs are a caller's too, and a
reader's random_page_cost = 100000 (or seq_page_cost, cpu_tuple_cost and cpu_operator_cost 0) turns the
function's index reads into sequential scans: on 20,000 chunks of one tenant (measured outside this file),
one call at depth 40 took ~2 s and at depth 400 (rag.retrieve's k 100) 19-30 s, old and installed function
alike, against 0.03-0.06 s with the defaults.
"""

from __future__ import annotations

import itertools
import json
import random
import string
import threading
import time
import uuid

import psycopg
import pytest
from conftest import (
    backend_peak,
    bm25_reference,
    connect,
    create_database,
    drop_database,
    drop_database_and_roles,
    fails,
    git_show,
    store_items,
)

SFX = uuid.uuid4().hex[:6]
R = {k: f"s26_{k}_{SFX}" for k in ("reader", "writer", "bravo", "nobody")}
BEFORE = "0a061ed"
CAND = "SELECT * FROM {}(%s, %s, %s::vector, %s, %s::jsonb)"
NEW, OLD = "rag._candidates", "pg_temp._cand_old"
PNEW, POLD = "pg_temp._probe_new", "pg_temp._probe_old"
MARK = "ctid AS tid FROM rag.chunk_tsv"
INTO = "INTO fts_ids, fts_tsv USING q_match, fts_budget, fts_keep_bytes;"
PROBE = (
    " RAISE NOTICE 'fts_probe %', pg_catalog.json_build_object('readback', kept IS NULL,"
    " 'q_match', q_match::text, 'ids', fts_ids, 'tsv', (SELECT pg_catalog.json_agg(pg_catalog.md5(u.v::text)"
    " ORDER BY u.o) FROM pg_catalog.unnest(fts_tsv) WITH ORDINALITY AS u (v, o)));"
)
QEMB = json.dumps([round(random.Random(26).gauss(0, 1), 3) for _ in range(384)])
FILL = ["vacuum", "index", "heap", "page", "tuple", "freeze", "bloat", "planner", "replica", "locks"]
N_OWN, DOC_OWN = 4800, 400


def _function(src: str, name: str) -> str:
    f = src[src.index("CREATE OR REPLACE FUNCTION rag._candidates(") :]
    if "COMMENT ON FUNCTION rag._candidates(" in f:
        f = f[: f.index("COMMENT ON FUNCTION rag._candidates(")]
    return f.replace("rag._candidates(", f"{name}(", 1)


def _old_source() -> str | None:
    return git_show(BEFORE, "sql/core/040-retrieve.sql")


OLD_FILE = _old_source()


def _su(pg, name: str, autocommit: bool = False) -> psycopg.Connection:
    """A superuser's connection with the old function and both probes in pg_temp."""
    if OLD_FILE is None:
        pytest.skip("no git history of this checkout")
    c = psycopg.connect(pg.dsn(name), autocommit=True)
    new_src = c.execute(
        "SELECT pg_get_functiondef('rag._candidates(text, text, public.vector, integer, jsonb, text)'"
        "::regprocedure)"
    ).fetchone()[0]
    # the installed function reads the kept candidates back by ctid, the old one does not
    assert MARK in new_src and MARK not in _function(OLD_FILE, OLD)
    c.execute(_function(OLD_FILE, OLD))
    for src, name in ((new_src, PNEW), (OLD_FILE, POLD)):
        f = _function(src, name)
        assert f.count(INTO) == 1, name
        c.execute(f.replace(INTO, INTO + PROBE))
    c.autocommit = autocommit
    return c


def _params(c) -> str:
    return json.dumps(c.execute("SELECT rag._params()").fetchone()[0])


def _probe(c, fn: str, args) -> tuple[list, list[dict]]:
    """(rows, the probes' notices) of one call."""
    seen: list[str] = []

    def handler(d) -> None:
        m = d.message_primary or ""
        if m.startswith("fts_probe "):
            seen.append(m)

    c.add_notice_handler(handler)
    try:
        rows = c.execute(CAND.format(fn), args).fetchall()
    finally:
        c.remove_notice_handler(handler)
    return rows, [json.loads(s[len("fts_probe ") :]) for s in seen]


def _own_gin(a, tenant: str) -> None:
    """The tenant's own partial GIN index on rag.chunk_tsv, as rag._index_tenants builds it (without the HNSW
    index, whose build is not what is tested)."""
    name = a.execute("SELECT rag._tenant_fts_index_name(%s)", (tenant,)).fetchone()[0]
    a.execute(f"CREATE INDEX {name} ON rag.chunk_tsv USING gin (tsv) WHERE tenant = '{tenant}'")
    a.execute("ANALYZE rag.chunk_tsv")


# ---------------------------------------------------------------- the tenants
PREFIX_WORDS = ["quokkaprefix" + "".join(p) for p in itertools.product("abcdefghij", repeat=3)]


def _own_text(rnd: random.Random, i: int) -> str:
    """own's chunk i: common everywhere; pairx and pairy in every 4th chunk (adjacent in every 8th); solo in
    every 30th (1-3 times); disa and disb in 5 % each, both in 6 chunks; every 20th padded with random words
    (tsvectors of 1.8-2.4 kB: inline and external around fts_keep_bytes), compressible words (compressed
    inline and external) or 600 long words (13 kB)."""
    w = [f"Chunk {i} common"]
    if i % 4 == 0:
        w.append("pairx pairy" if i % 8 == 0 else f"pairy {rnd.choice(FILL)} pairx")
    if i % 30 == 0:
        w += ["solo"] * (1 + (i // 30) % 3)
    if i % 20 == 1:
        w.append("disa")
    if i % 20 == 2:
        w.append("disb")
    if i % 800 == 3:
        w.append("disa disb")
    w += rnd.sample(FILL, 3)
    if i % 20 == 0:
        kind = (i // 20) % 8
        if kind in (1, 2, 3, 4):
            w += ["".join(rnd.choices(string.ascii_lowercase, k=8)) for _ in range(rnd.randint(104, 138))]
        elif kind == 5:
            w += PREFIX_WORDS[:150]
        elif kind == 6:
            w += PREFIX_WORDS[:200]
        elif kind == 7 and (i // 20) % 48 == 7:
            w += ["".join(rnd.choices(string.ascii_lowercase, k=12)) for _ in range(600)]
    return " ".join(w) + "."


def _bravo_items(rnd: random.Random, n: int, tag: str) -> list[dict]:
    return [
        {
            "title": "Bravo",
            "content": f"Bravo {tag} {i} pairx pairy solo disa disb common " * 3
            + " ".join(rnd.sample(FILL, 3)),
            "embedding": [0.05] * 384,
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def sdb(pg):
    name = f"pgcite_s26_{SFX}"
    drop_database(pg, name)
    create_database(pg, name, python=False)
    with pg.admin(name) as a:
        a.execute(f"CREATE ROLE {R['reader']} LOGIN IN ROLE pgcite_reader")
        a.execute(f"CREATE ROLE {R['writer']} LOGIN IN ROLE pgcite_writer")
        a.execute(f"CREATE ROLE {R['bravo']} LOGIN IN ROLE pgcite_writer")
        a.execute(f"CREATE ROLE {R['nobody']} LOGIN")
        for t in ("own", "bravo", "many"):
            a.execute("SELECT rag.create_tenant(%s)", (t,))
        for t in ("own", "many"):
            a.execute("SELECT rag.grant_tenant(%s, %s)", (t, R["writer"]))
            a.execute("SELECT rag.grant_tenant(%s, %s)", (t, R["reader"]))
        a.execute("SELECT rag.grant_tenant('bravo', %s)", (R["bravo"],))
    rnd = random.Random(2600)
    with connect(pg, name, R["writer"]) as w, connect(pg, name, R["bravo"]) as b:
        # own's documents and bravo's interleaved: their rows of rag.chunk_tsv share pages
        for d in range(N_OWN // DOC_OWN):
            items = [
                {"title": f"Part {i % 7}", "content": _own_text(rnd, i), "embedding": [0.05] * 384}
                for i in range(d * DOC_OWN, (d + 1) * DOC_OWN)
            ]
            store_items(w, "own", f"o{d:02}.md", items)
            store_items(b, "bravo", f"b{d:02}.md", _bravo_items(rnd, 125, f"b{d}"))
    with pg.admin(name) as a:
        _own_gin(a, "own")
    try:
        yield name
    finally:
        drop_database_and_roles(pg, name, R.values())


# ---------------------------------------------------------------- row and array equality
OWN_QS = [
    "pairx pairy",  # the two rarest of 1,200 chunks each (all in common): new form at depths 2-119
    '"pairx pairy"',  # phrase: candidates of both, ranked if adjacent
    "pairx pairy common",
    "solo",  # one lexeme of 160 chunks: new form at depths 1-15
    "solo common",
    "pairx solo",  # solo and pairx in common: 80 matches
    "disa disb",  # both over the budget, 6 chunks in common: fewer matches than the budget
    "pairx -solo",  # negated: new form at every depth, 1,160 matches
    "common -pairx",  # 3,600 matches
    "-solo",  # pure negation: GIN's full scan, every chunk but solo's
    "solo -common",  # no match
    "zzzunknown quokkaword",  # no lexeme the tenant has
]
OWN_DEPTHS = (1, 2, 4, 15, 40, 119, 120)


def _check_probe(c, tenant: str, depth: int, p: dict) -> tuple[int, int]:
    """The new probe's arrays against rag.chunk: the ids are the tenant's newest fts_budget live matches of
    q_match, each kept tsvector that chunk's own, NULL exactly when the stored one is over 2,048 bytes or
    compressed. Returns (kept, NULL) counts."""
    want = [
        r[0]
        for r in c.execute(
            "SELECT chunk_id FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL AND tsv @@ %s::tsquery"
            " ORDER BY chunk_id DESC LIMIT %s",
            (tenant, p["q_match"], depth * 10),
        )
    ]
    assert (p["ids"] or []) == want, (tenant, depth, p["q_match"])
    if not want:
        return 0, 0
    facts = dict(
        (r[0], (r[1], r[2]))
        for r in c.execute(
            "SELECT c.chunk_id, md5(c.tsv::text), pg_column_size(t.tsv) <= 2048"
            " AND pg_column_compression(t.tsv) IS NULL FROM rag.chunk AS c JOIN rag.chunk_tsv AS t USING"
            " (chunk_id) WHERE c.chunk_id = ANY(%s) AND c.tenant = %s AND t.tenant = %s",
            (want, tenant, tenant),
        )
    )
    assert len(facts) == len(want)
    kept = nulls = 0
    for cid, md5 in zip(p["ids"], p["tsv"], strict=True):
        digest, keep = facts[cid]
        assert md5 == (digest if keep else None), (cid, md5, digest, keep)
        kept += md5 is not None
        nulls += md5 is None
    return kept, nulls


def _sweep(c, tenant: str, questions, depths, params: str, refs: dict | None = None) -> dict:
    """Every (question, depth): the installed function's rows == the old probe's (the old function's), the
    new probe's arrays == the old probe's and right against rag.chunk, the full-text rows == bm25_reference
    over the candidates (refs given). Returns counts."""
    n = {"calls": 0, "readback": 0, "kept": 0, "null": 0, "matches>budget": 0, "fewer": 0, "ties": 0}
    for q in questions:
        for depth in depths:
            args = (tenant, q, QEMB, depth, params)
            rows = c.execute(CAND.format(NEW), args).fetchall()
            prow, pnew = _probe(c, PNEW, args)
            orow, pold = _probe(c, POLD, args)
            assert rows == orow == prow, (tenant, q, depth)
            assert pnew == pold, (tenant, q, depth)
            n["calls"] += 1
            scores = [r[7] for r in rows if r[6] is not None]
            n["ties"] += len(set(scores)) < len(scores)
            for p in pnew:
                k, nl = _check_probe(c, tenant, depth, p)
                if p["readback"]:
                    n["readback"] += 1
                    n["kept"] += k
                    n["null"] += nl
                    total = c.execute(
                        "SELECT count(*) FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL"
                        " AND tsv @@ %s::tsquery",
                        (tenant, p["q_match"]),
                    ).fetchone()[0]
                    n["matches>budget" if total > depth * 10 else "fewer"] += 1
                if refs is not None:
                    if q not in refs:
                        refs[q] = bm25_reference(c, tenant, q, 10**6, leg_query=True)
                    cand = set(p["ids"] or [])
                    fts = sorted((r[6], r[1], r[7]) for r in rows if r[6] is not None)
                    want = [(cid, s) for cid, s in refs[q] if cid in cand][:depth]
                    assert [(cid, s) for _, cid, s in fts] == want, (tenant, q, depth)
    return n


def test_own_index_arrays_and_rows_equal_the_old_function_on_adversarial_tsvectors(pg, sdb):
    """own: 12 questions x 7 depths (see OWN_QS): rows, candidate arrays, tsvectors kept or left NULL, BM25
    scores; the stored tsvectors among the candidates include every class around fts_keep_bytes."""
    with _su(pg, sdb) as c:
        classes = c.execute(
            "SELECT count(*) FILTER (WHERE s BETWEEN 1800 AND 1990 AND z IS NULL),"
            " count(*) FILTER (WHERE s BETWEEN 2000 AND 2048 AND z IS NULL),"
            " count(*) FILTER (WHERE s BETWEEN 2049 AND 2500 AND z IS NULL),"
            " count(*) FILTER (WHERE s <= 2048 AND z IS NOT NULL), count(*) FILTER (WHERE s > 2048 AND z IS"
            " NOT NULL), count(*) FILTER (WHERE s > 10000) FROM (SELECT pg_column_size(tsv) AS s,"
            " pg_column_compression(tsv) AS z FROM rag.chunk_tsv WHERE tenant = 'own'"
            " AND tsv @@ 'pairx & pairi'::tsquery) AS x"
        ).fetchone()
        # inline near the limit; uncompressed between the toast threshold and 2,048 (external, kept as a
        # pointer); uncompressed over 2,048; compressed under and over; 13 kB
        assert min(classes) >= 2, classes
        refs: dict = {}
        n = _sweep(c, "own", OWN_QS, OWN_DEPTHS, _params(c), refs)
        print(n)
        assert n["calls"] == len(OWN_QS) * len(OWN_DEPTHS)
        assert n["readback"] >= 50 and n["matches>budget"] >= 30 and n["fewer"] >= 10, n
        assert n["kept"] > 1000 and n["null"] > 50 and n["ties"] >= 20, n
        c.rollback()


SETTINGS = [
    ("enable_tidscan = off",),
    ("enable_sort = off", "work_mem = '64kB'"),
    ("enable_bitmapscan = off",),
    ("enable_hashagg = off", "enable_nestloop = off", "enable_material = off"),
    ("plan_cache_mode = force_custom_plan",),
    ("plan_cache_mode = force_generic_plan", "work_mem = '64kB'"),
    ("plan_cache_mode = auto", "enable_indexscan = off"),
]
SET_CASES = [("pairx pairy", 4), ("solo", 15), ("pairx -solo", 10), ("disa disb", 2), ('"pairx pairy"', 40)]


def test_a_callers_planner_settings_change_no_row_or_array(pg, sdb):
    """Each group of SETTINGS on a fresh connection, five new-form cases called six times each (past
    PL/pgSQL's plan caching): the rows and arrays of the old function under default settings."""
    with _su(pg, sdb) as c:
        p = _params(c)
        want = {k: _probe(c, POLD, ("own", k[0], QEMB, k[1], p)) for k in SET_CASES}
        assert all(w[1] and w[1][0]["readback"] for w in want.values()), want
        c.rollback()
    for group in SETTINGS:
        with _su(pg, sdb) as c:
            for s in group:
                c.execute(f"SET {s}")
            for _ in range(6):
                for k in SET_CASES:
                    args = ("own", k[0], QEMB, k[1], p)
                    assert c.execute(CAND.format(NEW), args).fetchall() == want[k][0], (group, k)
            for k in SET_CASES:
                assert _probe(c, PNEW, ("own", k[0], QEMB, k[1], p)) == want[k], (group, k)
            c.rollback()


# ---------------------------------------------------------------- tenant roles
def test_tenant_roles_cannot_reach_the_read_back_and_a_readers_retrieve_is_the_old_top_k(pg, sdb):
    """No tenant role calls rag._candidates, reads rag.chunk_tsv (by ctid either) or makes a table inherit it
    (42501); bravo cannot retrieve own's chunks; the reader's rag.retrieve of own (negated and two-rarest
    questions, k 1, 10 and 100) returns the old function's top k."""
    for role in R:
        with connect(pg, sdb, R[role]) as c:
            for sql in (
                "SELECT * FROM rag._candidates('own', 'pairx -solo', NULL, 40, '{}'::jsonb)",
                "SELECT tsv FROM rag.chunk_tsv WHERE ctid = '(0,1)'::tid",
                "SELECT count(*) FROM rag.chunk_tsv WHERE tenant = 'own'",
                "CREATE TEMP TABLE s26_child () INHERITS (rag.chunk_tsv)",
            ):
                assert fails(c, sql) == "42501", (role, sql)
    with connect(pg, sdb, R["bravo"]) as b:
        sql = "SELECT chunk_id FROM rag.retrieve('pairx -solo', 'own', 10, %s::vector)"
        assert fails(b, sql, (QEMB,)) == "42501"
    top, readbacks = {}, 0
    with _su(pg, sdb) as c:
        p = _params(c)
        for q in ("pairx pairy", "pairx pairy common", '"pairx pairy"', "solo", "pairx -solo"):
            corrected = c.execute("SELECT rag._correct_question('own', %s, %s::jsonb)", (q, p)).fetchone()[0]
            for k in (1, 3, 10, 100):
                depth = max(k * 4, 40)
                top[(q, k)] = c.execute(
                    f"SELECT chunk_id FROM {OLD}('own', %s, %s::vector, %s, %s::jsonb, %s)"
                    " WHERE fused_rank <= %s ORDER BY fused_rank",
                    (corrected, QEMB, depth, p, q, k),
                ).fetchall()
                _, probes = _probe(c, PNEW, ("own", corrected, QEMB, depth, p))
                readbacks += sum(x["readback"] for x in probes)
        c.rollback()
    # the reader's calls include the read-back (the question as rag.retrieve corrects it: "-" is dropped)
    assert readbacks >= 8, readbacks
    with connect(pg, sdb, R["reader"]) as r:
        for (q, k), rows in top.items():
            got = r.execute("SELECT chunk_id FROM rag.retrieve(%s, 'own', %s, %s::vector)", (q, k, QEMB))
            assert got.fetchall() == rows and len(rows) == k, (q, k)


# ---------------------------------------------------------------- concurrent writers
CONC_CASES = [("pairx pairy", 40), ("pairx -solo", 10), ("solo", 4), ("-solo", 2), ('"pairx pairy"', 15)]


def _all(c, params: str) -> list:
    return [
        (_probe(c, PNEW, ("own", q, QEMB, d, params)), _probe(c, POLD, ("own", q, QEMB, d, params)))
        for q, d in CONC_CASES
    ]


def test_repeatable_read_sees_its_snapshot_while_rows_move_and_vacuum_runs(pg, sdb):
    """In one REPEATABLE READ transaction, between two rounds of calls: the writer replaces one document and
    deletes another, the superuser moves 1/5 of own's rows of rag.chunk_tsv (UPDATE ... SET tsv = tsv) and
    changes the tsvectors of 1/7 (tf of pairx + 1), VACUUM runs and bravo stores 400 chunks, all committed:
    the second round returns the first's rows and arrays; after the commit, new == old on the new data, which
    differs."""
    rnd = random.Random(2601)
    with _su(pg, sdb) as c:
        p = _params(c)
        c.commit()
        c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        first = _all(c, p)
        for new, old in first:
            assert new == old
        with connect(pg, sdb, R["writer"]) as w:
            items = [
                {"title": "Again", "content": _own_text(rnd, i), "embedding": [0.05] * 384}
                for i in range(2000, 2300)
            ]
            store_items(w, "own", "o05.md", items)
            assert w.execute("SELECT rag.delete_document('own', 'o07.md')").fetchone() == (True,)
        with pg.admin(sdb) as a:
            before = dict(
                a.execute("SELECT chunk_id, ctid FROM rag.chunk_tsv WHERE tenant = 'own'").fetchall()
            )
            a.execute("UPDATE rag.chunk_tsv SET tsv = tsv WHERE tenant = 'own' AND chunk_id % 5 = 0")
            a.execute(
                "UPDATE rag.chunk_tsv SET tsv = tsv || 'pairx:16000'::tsvector WHERE tenant = 'own'"
                " AND chunk_id % 7 = 0 AND tsv @@ 'pairx'::tsquery"
            )
            a.execute("VACUUM rag.chunk_tsv")
            moved = sum(
                1
                for cid, tid in a.execute("SELECT chunk_id, ctid FROM rag.chunk_tsv WHERE tenant = 'own'")
                if cid in before and before[cid] != tid
            )
            assert moved > 500, moved
        with connect(pg, sdb, R["bravo"]) as b:
            store_items(b, "bravo", "rr.md", _bravo_items(rnd, 400, "rr"))
        second = _all(c, p)
        assert second == first
        c.commit()
        third = _all(c, p)
        for new, old in third:
            assert new == old
        assert third != first
        c.commit()
    with pg.admin(sdb) as a:
        # chunk_tsv as the trigger keeps it again (the flipped tsvectors back to rag.chunk's)
        a.execute(
            "UPDATE rag.chunk_tsv AS t SET tsv = c.tsv FROM rag.chunk AS c WHERE c.chunk_id = t.chunk_id"
            " AND t.tenant = 'own' AND t.tsv <> c.tsv"
        )


def _churn(pg, sdb, stop: threading.Event, errors: list, counts: dict) -> None:
    rnd = random.Random(2602)
    try:
        with connect(pg, sdb, R["writer"]) as w, pg.admin(sdb) as a:
            k = 0
            while not stop.is_set():
                items = [
                    {"title": "Churn", "content": _own_text(rnd, i), "embedding": [0.05] * 384}
                    for i in range(4800 + 60 * (k % 3), 4860 + 60 * (k % 3))
                ]
                store_items(w, "own", "churn.md", items)
                m = 11 + k % 5
                a.execute(
                    "UPDATE rag.chunk_tsv SET tsv = tsv || 'pairx:16001 solo:16001'::tsvector"
                    " WHERE tenant = 'own' AND chunk_id %% %s = 0",
                    (m,),
                )
                a.execute(
                    "UPDATE rag.chunk_tsv AS t SET tsv = c.tsv FROM rag.chunk AS c"
                    " WHERE c.chunk_id = t.chunk_id AND t.tenant = 'own' AND t.chunk_id %% %s = 0"
                    " AND t.tsv <> c.tsv",
                    (m + 1,),
                )
                if k % 4 == 3:
                    a.execute("VACUUM rag.chunk_tsv")
                k += 1
            counts["rounds"] = k
    except Exception as e:  # reported by the test
        errors.append(repr(e))


ARGS = "%(t)s, %(q)s, %(e)s::vector, %(d)s, %(p)s"


def test_read_committed_calls_while_rows_change_and_move_under_them(pg, sdb):
    """Read committed, one statement calling the new and the old probe (one snapshot) for 8 s while a writer
    replaces a document in a loop and a superuser changes and restores own's tsvectors in rag.chunk_tsv
    (non-HOT updates: new row versions elsewhere, scores changed) and runs VACUUM: each statement's two calls
    give the same rows and arrays; the data changed under the loop."""
    stop, errors, counts = threading.Event(), [], {}
    with _su(pg, sdb, autocommit=True) as c:
        p = _params(c)
        th = threading.Thread(target=_churn, args=(pg, sdb, stop, errors, counts))
        th.start()
        seen = set()
        try:
            deadline = time.monotonic() + 8
            n = 0
            while time.monotonic() < deadline or n < 20:
                q, d = CONC_CASES[n % len(CONC_CASES)]
                notes: list[str] = []

                def handler(x, notes=notes) -> None:
                    if (x.message_primary or "").startswith("fts_probe "):
                        notes.append(x.message_primary)

                c.add_notice_handler(handler)
                try:
                    a, b = c.execute(
                        f"SELECT (SELECT json_agg(x) FROM {PNEW}({ARGS}) AS x),"
                        f" (SELECT json_agg(x) FROM {POLD}({ARGS}) AS x)",
                        {"t": "own", "q": q, "e": QEMB, "d": d, "p": p},
                    ).fetchone()
                finally:
                    c.remove_notice_handler(handler)
                assert a == b, (n, q, d)
                assert len(notes) == 2 and notes[0] == notes[1], (n, q, d)
                seen.add((q, d, json.dumps(a)))
                n += 1
        finally:
            stop.set()
            th.join()
        assert not errors, errors
        assert counts.get("rounds", 0) >= 5, counts
        # the data did change between statements: several results per case
        assert len(seen) > len(CONC_CASES) + 5, (len(seen), n)
        print(f"{n} statements, {counts['rounds']} churn rounds, {len(seen)} distinct results")
    with pg.admin(sdb) as a:
        a.execute(
            "UPDATE rag.chunk_tsv AS t SET tsv = c.tsv FROM rag.chunk AS c WHERE c.chunk_id = t.chunk_id"
            " AND t.tenant = 'own' AND t.tsv <> c.tsv"
        )


def test_another_tenants_rows_in_own_freed_slots_are_never_read_back(pg, sdb):
    """own's writer deletes a document, VACUUM frees its rows' slots of rag.chunk_tsv, bravo stores 600
    chunks holding every question lexeme three times (their rows land on own's freed ctids): own's rows and
    arrays for the read-back cases are those before bravo's insert, and every kept tsvector is own's chunk's
    (checked against rag.chunk)."""
    rnd = random.Random(2603)
    with connect(pg, sdb, R["writer"]) as w:
        freed = w.execute("SELECT count(*) FROM rag.chunk WHERE tenant = 'own' AND doc_key = 'o03.md'")
        assert freed.fetchone()[0] == DOC_OWN
    with pg.admin(sdb) as a:
        tids = [
            r[0]
            for r in a.execute(
                "SELECT t.ctid::text FROM rag.chunk_tsv AS t JOIN rag.chunk AS c USING (chunk_id)"
                " WHERE c.doc_key = 'o03.md' AND c.tenant = 'own'"
            )
        ]
        assert len(tids) == DOC_OWN
    with connect(pg, sdb, R["writer"]) as w:
        assert w.execute("SELECT rag.delete_document('own', 'o03.md')").fetchone() == (True,)
    with pg.admin(sdb) as a:
        a.execute("VACUUM rag.chunk_tsv")
    cases = [
        (q, d) for q in ("pairx pairy", "pairx -solo", "solo", "-solo", "disa disb") for d in (2, 15, 40)
    ]
    with _su(pg, sdb) as c:
        p = _params(c)
        before = {k: _probe(c, PNEW, ("own", k[0], QEMB, k[1], p)) for k in cases}
        c.rollback()
    with connect(pg, sdb, R["bravo"]) as b:
        store_items(b, "bravo", "reuse.md", _bravo_items(rnd, 600, "reuse"))
    with pg.admin(sdb) as a:
        reused = a.execute(
            "SELECT count(*) FROM rag.chunk_tsv WHERE tenant = 'bravo' AND ctid = ANY(%s::tid[])", (tids,)
        ).fetchone()[0]
    assert reused >= 50, reused
    with _su(pg, sdb) as c:
        readbacks = 0
        for k in cases:
            args = ("own", k[0], QEMB, k[1], p)
            got = _probe(c, PNEW, args)
            assert got == before[k], k
            assert got == _probe(c, POLD, args), k
            for pr in got[1]:
                _check_probe(c, "own", k[1], pr)
                readbacks += pr["readback"]
        assert readbacks >= 10, readbacks
        c.rollback()
    print(f"{reused} of own's {DOC_OWN} freed slots hold bravo's rows")


# ---------------------------------------------------------------- what a call costs
MANY_N = 20000


@pytest.fixture(scope="module")
def many(pg, sdb):
    """many: 20,000 chunks holding manyx (manya and manyb together in every third), its own GIN index."""
    rnd = random.Random(2604)
    with connect(pg, sdb, R["writer"]) as w:
        for d in range(0, MANY_N, 2500):
            items = [
                {
                    "title": f"Many {i % 11}",
                    "content": f"Many {i} manyx "
                    + ("manya manyb " if i % 3 == 0 else "")
                    + " ".join(rnd.sample(FILL, 6)),
                    "embedding": [0.05] * 384,
                }
                for i in range(d, d + 2500)
            ]
            store_items(w, "many", f"m{d:05}.md", items)
    with pg.admin(sdb) as a:
        _own_gin(a, "many")
    return "many"


MANY_CASES = [("manyx -zzz", 40), ("manyx -zzz", 400), ("manya manyb", 40)]


def test_many_matches_cost_no_more_memory_or_time_than_the_old_function(pg, sdb, many):
    """many (20,000 chunks): a negated question matching all of them (depth 40 and 400) and the two rarest
    of 6,667 (depth 40), each through the read-back: one call's peak memory above its start (after a call
    at depth 1 made the plans) and its time, the lower of three on fresh connections: the new function at
    most 8 MB and 1.25 x + 20 ms of the old one, with the old rows."""
    with _su(pg, sdb) as c:
        p = _params(c)
        for q, d in MANY_CASES:
            rows, probes = _probe(c, PNEW, (many, q, QEMB, d, p))
            assert probes and probes[0]["readback"] and len(probes[0]["ids"]) == d * 10, (q, d)
            assert rows == _probe(c, POLD, (many, q, QEMB, d, p))[0]
        c.rollback()
    report = []
    for q, d in MANY_CASES:
        mem: dict = {NEW: [], OLD: []}
        secs: dict = {NEW: [], OLD: []}
        rows: dict = {}
        for _ in range(3):
            for fn in (OLD, NEW):
                with _su(pg, sdb, autocommit=True) as c:
                    c.execute(CAND.format(fn), (many, q, QEMB, 1, p)).fetchall()
                    m, s, got = backend_peak(c, CAND.format(fn), (many, q, QEMB, d, p))
                    mem[fn].append(m)
                    secs[fn].append(s)
                    rows[fn] = got
        assert rows[NEW] == rows[OLD]
        report.append(
            f"{q!r} depth {d}: new {min(mem[NEW]):.1f} MB {min(secs[NEW]) * 1000:.1f} ms, old"
            f" {min(mem[OLD]):.1f} MB {min(secs[OLD]) * 1000:.1f} ms"
        )
        assert min(mem[NEW]) <= min(mem[OLD]) + 8, report
        assert min(secs[NEW]) <= 1.25 * min(secs[OLD]) + 0.02, report
    print("; ".join(report))


def _rows_read(c, sql: str, params) -> tuple[int, int, float]:
    """(sequential scans of rag.chunk_tsv, rows they read, seconds) of one statement in c's transaction."""
    stat = (
        "SELECT coalesce(seq_scan, 0), coalesce(seq_tup_read, 0) FROM pg_stat_xact_user_tables"
        " WHERE relid = 'rag.chunk_tsv'::regclass"
    )
    s0, r0 = c.execute(stat).fetchone()
    t0 = time.perf_counter()
    c.execute(sql, params).fetchall()
    secs = time.perf_counter() - t0
    s1, r1 = c.execute(stat).fetchone()
    return s1 - s0, r1 - r0, secs


def _e21() -> str | None:
    """rag._candidates at e21a8ad (the read-back a scalar subquery per candidate) as pg_temp._cand_e21."""
    src = git_show("e21a8ad", "sql/core/040-retrieve.sql")
    return None if src is None else _function(src, "pg_temp._cand_e21")


def test_a_readers_enable_tidscan_off_makes_no_call_scan_the_whole_table_per_candidate(pg, sdb, many):
    """Failed at e21a8ad (fixed by e69f231: enable_tidscan pinned on, one TID scan of the kept ctids). There
    the read-back `(SELECT ... FROM rag.chunk_tsv AS t WHERE t.ctid = x.tid)` named no tenant and no key;
    with the caller's enable_tidscan off (a `user` setting any role may SET) it was planned as a sequential
    scan of the whole rag.chunk_tsv (every tenant's live chunks: own's, bravo's and many's 20,000 here), once
    per candidate: 400 scans at depth 40 ("pairx pairy" on own), the old function none. A reader's
    rag.retrieve at k 10 runs that call (depth 40; the read-back, as the isolation test's probes show).
    Asserted: the reader's call with enable_tidscan off reads at most own's live chunks more of rag.chunk_tsv
    sequentially than with the default; the installed function under that setting at most own's live chunks
    more than the old function; the function at e21a8ad under it is caught (over 100 x the table's rows)."""
    sql = "SELECT chunk_id FROM rag.retrieve('pairx pairy', 'own', 10, %s::vector)"
    with connect(pg, sdb, R["reader"]) as r:
        r.autocommit = False
        r.execute(sql, (QEMB,)).fetchall()
        default = _rows_read(r, sql, (QEMB,))
        r.rollback()
        r.execute("SET enable_tidscan = off")
        off = _rows_read(r, sql, (QEMB,))
        r.rollback()
    e21 = _e21()
    with _su(pg, sdb) as c:
        n_own, n_all = c.execute(
            "SELECT rag._live_chunks('own'), (SELECT count(*) FROM rag.chunk_tsv)"
        ).fetchone()
        p = _params(c)
        c.execute("SET enable_tidscan = off")
        args = ("own", "pairx pairy", QEMB, 40, p)
        old = _rows_read(c, CAND.format(OLD), args)
        new = _rows_read(c, CAND.format(NEW), args)
        was = None
        if e21 is not None:
            c.execute(e21)
            was = _rows_read(c, CAND.format("pg_temp._cand_e21"), args)
        c.rollback()
    report = (
        f"reader's rag.retrieve (k 10): default {default[0]} seq scans / {default[1]} rows / {default[2]:.3f}"
        f" s, enable_tidscan off {off[0]} / {off[1]} / {off[2]:.3f} s; rag._candidates depth 40 with it off:"
        f" old {old[0]} / {old[1]} / {old[2]:.3f} s, installed {new[0]} / {new[1]} / {new[2]:.3f} s, e21a8ad"
        f" {was}; own {n_own} live chunks, rag.chunk_tsv {n_all} rows"
    )
    print(report)
    assert new[1] <= old[1] + n_own, report
    assert off[1] <= default[1] + n_own, report
    if was is not None:
        assert was[1] > 100 * n_all, report
