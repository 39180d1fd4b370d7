"""Security review of session 21's second change (ed9d263): a tenant's own GIN index of tsvectors on
rag.chunk_tsv (new column tenant, migration 018), its candidates read back by ctid in rag._candidates.

1. Results: with its own indexes a tenant's rag.retrieve rows are those it had before, on the "two rarest
   lexemes intersect" path (the rarest question lexeme in more than 10 x depth chunks) and the ordinary one.
2. Concurrency: rag._candidates is STABLE, so its candidate scan and its ranking share the calling
   statement's snapshot, whose xmin keeps VACUUM from freeing (and a new row from reusing) a candidate's TID:
   a delete, a new version, another tenant's ingest, a rebuild of rag.chunk_tsv and VACUUM committed during a
   retrieve (READ COMMITTED) or a REPEATABLE READ transaction change nothing it returns; afterwards the rows
   are those of the table-wide path.
3. No tenant role reads rag.chunk_tsv (tenant included); the database owner cannot build, drop or squat the
   moved index names.
4. ALTER EXTENSION pgcite UPDATE and `pgcite install` from 0.8.0 with a tenant's indexes built by 0.8.0 move
   the GIN index to rag.chunk_tsv (same name, predicate tenant = ...), fill tenant, keep the answers, and
   rag._index_tenants builds nothing more."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from conftest import connect, fails, managed_from, two_tenant_database, updated_from

SFX = uuid.uuid4().hex[:6]
R = {k: f"s21b_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
T = "own"
QS = ("walrus penguin migration", "zebra crossing of the walrus", "otter habits")
RET = "SELECT rank, chunk_id, fts_score, fused_score FROM rag.retrieve(%s, %s, 10, %s::vector)"


def _emb(i: int) -> list[float]:
    return [((i * 7 + j) % 11 - 5) / 10 for j in range(384)]


def _items(n: int, tag: str) -> str:
    """n chunks: all hold "walrus", most "penguin" (so the rarest of the two is in > 400), some "zebra"."""
    out = []
    for i in range(n):
        words = ["walrus"] + (["penguin"] * (1 + i % 3) if i % 9 else []) + (["zebra"] if i % 17 == 0 else [])
        words += ["otter"] if i % 23 == 0 else []
        out.append({"content": f"Note {tag} {i}: {' '.join(words)} migration {i % 5}.", "embedding": _emb(i)})
    return json.dumps(out)


def _store(c, tenant: str, key: str, n: int, tag: str = "") -> None:
    c.execute("SELECT * FROM rag.store_document(%s, %s, %s::jsonb)", (tenant, key, _items(n, tag)))


def _rows(c, tenant: str = T) -> list:
    return [c.execute(RET, (q, tenant, json.dumps(_emb(3)))).fetchall() for q in QS]


def _fts_index(c, tenant: str = T) -> tuple:
    return c.execute(
        "SELECT x.indrelid::regclass::text, pg_get_expr(x.indpred, x.indrelid) FROM pg_index AS x"
        " WHERE x.indexrelid = to_regclass('rag.' || rag._tenant_fts_index_name(%s))",
        (tenant,),
    ).fetchone()


@pytest.fixture(scope="module")
def sdb(pg):
    for name in two_tenant_database(pg, f"pgcite_s21b_{SFX}", R):
        with pg.admin(name) as a:
            a.execute("SELECT rag.create_tenant(%s)", (T,))
            _store(a, T, "a.md", 470)
            _store(a, T, "b.md", 30, "b")
            a.execute("SELECT rag.grant_tenant(%s, %s)", (T, R["reader"]))
            a.execute("SELECT rag.grant_tenant(%s, %s)", (T, R["writer"]))
        yield name


@pytest.fixture(scope="module")
def built(pg, sdb):
    """(rows before the tenant's own indexes, rows after): rag._index_tenants as superuser in between."""
    with connect(pg, sdb, R["reader"]) as c:
        before = _rows(c)
    with pg.admin(sdb) as a:
        df = a.execute(
            "SELECT live_chunks FROM rag.tenant_lexeme WHERE tenant = %s AND lexeme = 'penguin'", (T,)
        )
        assert df.fetchone()[0] > 400  # the rarest of "walrus penguin" is over 10 x depth: the pair path
        assert len(a.execute("SELECT * FROM rag._index_tenants(1, %s)", (T,)).fetchall()) == 3
        assert _fts_index(a) == ("rag.chunk_tsv", f"(tenant = '{T}'::text)")
    with connect(pg, sdb, R["reader"]) as c:
        return before, _rows(c)


def test_own_fts_index_on_chunk_tsv_keeps_retrieve_rows(built):
    before, after = built
    assert all(before) and all(any(r[2] is not None for r in q) for q in before)
    assert after == before


def test_concurrent_changes_and_vacuum_change_no_running_retrieve(pg, sdb, built):
    reader = connect(pg, sdb, R["reader"])
    slow = reader.execute  # READ COMMITTED: one statement that sleeps, then retrieves under its snapshot
    got: dict = {}
    q = "SELECT r.rank, r.chunk_id, r.fts_score, r.fused_score FROM (SELECT pg_sleep(2) AS z OFFSET 0) AS s"
    q += " CROSS JOIN LATERAL rag.retrieve(%s || left(s.z::text, 0), %s, 10, %s::vector) AS r"
    th = threading.Thread(target=lambda: got.update(r=slow(q, (QS[0], T, json.dumps(_emb(3)))).fetchall()))
    rr = connect(pg, sdb, R["reader"])
    rr.autocommit = False
    rr.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    assert _rows(rr) == built[1]
    th.start()
    time.sleep(0.5)
    with connect(pg, sdb, R["writer"]) as w:
        w.execute("SELECT rag.delete_document(%s, 'b.md')", (T,))
        _store(w, T, "a.md", 470, "v2")  # a new version: every chunk of a.md retired, their rows deleted
    with connect(pg, sdb, R["bravo"]) as w:
        _store(w, "bravo", "flood.md", 300, "x")
    with pg.admin(sdb) as a:
        a.execute("SELECT rag._rebuild_retrieval_stats()")  # every row of rag.chunk_tsv at a new ctid
        a.execute("VACUUM rag.chunk_tsv")
        _store(a, T, "c.md", 200, "c")  # new rows where VACUUM could have freed some
    th.join()
    assert got["r"] == built[1][0]
    assert _rows(rr) == built[1]  # the REPEATABLE READ transaction's snapshot still holds
    rr.rollback()
    rr.close()
    reader.close()
    with pg.admin(sdb) as a:
        a.execute("VACUUM rag.chunk_tsv")
        a.execute("SELECT * FROM rag.store_document(%s, 'd.md', %s::jsonb)", (T, _items(100, "d")))
    with connect(pg, sdb, R["reader"]) as c:
        now = _rows(c)
    with pg.admin(sdb) as a:
        a.execute("BEGIN")
        own = a.execute("SELECT rag._tenant_fts_index_name(%s)", (T,)).fetchone()[0]
        a.execute(f'DROP INDEX rag."{own}"')
        a.execute(f"SET LOCAL ROLE {R['reader']}")
        table_wide = _rows(a)
        a.execute("ROLLBACK")
        ids = [r[1] for rows in now for r in rows]
        assert a.execute(
            "SELECT DISTINCT tenant FROM rag.chunk WHERE chunk_id = ANY(%s)", (ids,)
        ).fetchall() == [(T,)]
        assert (
            a.execute(
                "SELECT count(*) FROM rag.chunk WHERE chunk_id = ANY(%s) AND retired_at IS NOT NULL", (ids,)
            ).fetchone()[0]
            == 0
        )
    assert now == table_wide and now != built[1]


def test_no_tenant_role_reads_chunk_tsv_and_the_owner_cannot_squat_its_indexes(pg, sdb, built):
    with pg.admin(sdb) as a:
        roles = ["public", "pgcite_reader", "pgcite_writer", "pgcite_admin", *R.values()]
        assert (
            a.execute(
                "SELECT r FROM unnest(%s::text[]) AS r WHERE has_column_privilege(r, 'rag.chunk_tsv',"
                " 'tenant', 'SELECT')"
                " OR has_any_column_privilege(r, 'rag.chunk_tsv', 'SELECT, INSERT, UPDATE')",
                (roles,),
            ).fetchall()
            == []
        )
        name = a.execute("SELECT rag._tenant_fts_index_name('bravo')").fetchone()[0]
        own = a.execute("SELECT rag._tenant_fts_index_name(%s)", (T,)).fetchone()[0]
        dbo = f"s21b_dbo_{SFX}"
        a.execute(f"CREATE ROLE {dbo} LOGIN")
        a.execute(f'ALTER DATABASE "{sdb}" OWNER TO {dbo}')
    try:
        for role in (*R.values(), dbo):
            with connect(pg, sdb, role) as c:
                for sql in (
                    "SELECT tenant, count(*) FROM rag.chunk_tsv GROUP BY 1",
                    "SELECT count(*) FROM rag.chunk_tsv WHERE tenant = 'bravo'",
                    f"CREATE INDEX {name} ON rag.chunk_tsv USING gin (tsv) WHERE tenant = 'bravo'",
                    f"CREATE INDEX {name} ON rag.chunk USING gin (tsv) WHERE tenant = 'bravo'",
                    f"CREATE TABLE rag.{name} ()",
                    f"DROP INDEX rag.{own}",
                    f"REINDEX INDEX rag.{own}",
                    "SELECT * FROM rag._index_tenants(1, 'bravo')",
                ):
                    assert fails(c, sql) == "42501", (role, sql)
                # pg_stats of the new column would name tenants: not readable without SELECT on it
                assert (
                    c.execute(
                        "SELECT count(*) FROM pg_stats WHERE schemaname = 'rag' AND tablename = 'chunk_tsv'"
                    ).fetchone()[0]
                    == 0
                )
        with pg.admin(sdb) as a:
            assert a.execute("SELECT to_regclass('rag.' || %s)", (name,)).fetchone()[0] is None
            assert _fts_index(a) == ("rag.chunk_tsv", f"(tenant = '{T}'::text)")
    finally:
        with pg.admin(sdb) as a:
            a.execute(f'ALTER DATABASE "{sdb}" OWNER TO CURRENT_USER')
            a.execute(f"DROP ROLE IF EXISTS {dbo}")


# ---------------------------------------------------------------- 4. the update from 0.8.0
def _store_old(c, seen: dict) -> None:
    """Under 0.8.0: tenant T's chunks (a new version retiring some) and its three indexes on rag.chunk."""
    c.execute("SELECT rag.create_tenant(%s)", (T,))
    c.execute("SELECT rag.create_tenant('small')")
    _store(c, T, "a.md", 470)
    _store(c, T, "b.md", 40, "b")
    _store(c, T, "b.md", 30, "b2")
    _store(c, "small", "s.md", 20, "s")
    assert len(c.execute("SELECT * FROM rag._index_tenants(100, %s)", (T,)).fetchall()) == 3
    assert _fts_index(c) == ("rag.chunk", f"((tenant = '{T}'::text) AND (retired_at IS NULL))")
    seen["rows"] = {t: _rows(c, t) for t in (T, "small")}


def _check_updated(c, seen: dict) -> None:
    assert _fts_index(c) == ("rag.chunk_tsv", f"(tenant = '{T}'::text)")
    assert _fts_index(c, "small") is None
    assert c.execute(
        "SELECT count(*), count(*) FILTER (WHERE v.tenant = c.tenant) FROM rag.chunk_tsv AS v"
        " JOIN rag.chunk AS c USING (chunk_id)"
    ).fetchone() == (520, 520)  # every live chunk (b.md's first version retired)
    # 0.9.0 ranks otherwise than 0.8.0 (BM25): the moved index gives the table-wide path's rows
    moved = _rows(c)
    assert all(moved) and seen["rows"][T] != moved
    with c.transaction(force_rollback=True):
        c.execute(
            f'DROP INDEX rag."{c.execute("SELECT rag._tenant_fts_index_name(%s)", (T,)).fetchone()[0]}"'
        )
        assert _rows(c) == moved
    assert c.execute("SELECT count(*) FROM rag._index_tenants(1, %s)", (T,)).fetchone()[0] == 0
    assert (
        c.execute("SELECT count(*) FROM pg_class WHERE relname ~ '^chunk_tsv_[0-9a-f]{20}$'").fetchone()[0]
        == 1
    )


def test_an_update_from_0_8_0_moves_a_tenants_fts_index_to_chunk_tsv(pg):
    seen: dict = {}
    with updated_from(pg, f"pgcite_s21bupd_{SFX}", before_update=lambda c: _store_old(c, seen)) as c:
        _check_updated(c, seen)


def test_pgcite_install_from_0_8_0_moves_a_tenants_fts_index_to_chunk_tsv(pg):
    seen: dict = {}
    with managed_from(pg, before_update=lambda c: _store_old(c, seen)) as m, m.admin() as c:
        _check_updated(c, seen)
