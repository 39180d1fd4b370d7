"""rag.chunk_tsv (migrations/010): the live chunks' tsvectors in narrow rows, which the full-text leg ranks.

It must always hold exactly (chunk_id, tsv) of the live chunks, whoever ingests (a tenant writer through
rag.ingest, a new version, a deletion), no tenant role may read it, and the leg must rank exactly as it
ranked rag.chunk.tsv.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from conftest import CHAPTERS_TENANT, bm25_reference, fails


def side(conn, tenant: str) -> list:
    return conn.execute(
        "SELECT t.chunk_id, t.tsv::text FROM rag.chunk_tsv AS t JOIN rag.chunk AS c USING (chunk_id) "
        "WHERE c.tenant = %s ORDER BY 1",
        (tenant,),
    ).fetchall()


def live(conn, tenant: str) -> list:
    return conn.execute(
        "SELECT chunk_id, tsv::text FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL ORDER BY 1",
        (tenant,),
    ).fetchall()


def doc(n: int, word: str) -> str:
    return "\n\n".join(
        f"# {word.title()} part {i}\n\nNotes on {word} number {i} and the checkpoint." for i in range(n)
    )


@pytest.fixture
def writer(pg, db, conn):
    """A tenant 'tsvside' and a LOGIN writer role of it (committed, dropped after the test)."""
    tenant = "tsvside_" + uuid.uuid4().hex[:6]
    role = "tsv_writer_" + uuid.uuid4().hex[:6]
    reader = "tsv_reader_" + uuid.uuid4().hex[:6]
    with pg.admin(db) as a:
        a.execute("SELECT rag.create_tenant(%s)", (tenant,))
        a.execute(f"CREATE ROLE {role} LOGIN IN ROLE pgcite_writer")
        a.execute(f"CREATE ROLE {reader} LOGIN IN ROLE pgcite_reader")
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, role))
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, reader))
    dsn = psycopg.conninfo.make_conninfo(pg.dsn(db), user=role)
    rdsn = psycopg.conninfo.make_conninfo(pg.dsn(db), user=reader)
    with psycopg.connect(dsn, autocommit=True) as w, psycopg.connect(rdsn, autocommit=True) as r:
        yield tenant, w, r


def test_chunk_tsv_follows_ingest_new_version_and_delete_by_a_tenant_writer(pg, db, writer):
    tenant, w, _ = writer
    with pg.admin(db) as a:
        w.execute("SELECT * FROM rag.ingest(%s, 'a.md', %s)", (tenant, doc(5, "vacuum")))
        w.execute("SELECT * FROM rag.ingest(%s, 'b.md', %s)", (tenant, doc(3, "wraparound")))
        got = side(a, tenant)
        assert got == live(a, tenant) and len(got) == 8
        # a new version retires a.md's 5 chunks and adds 2; deleting b.md retires its 3
        w.execute("SELECT * FROM rag.ingest(%s, 'a.md', %s)", (tenant, doc(2, "freeze")))
        w.execute("SELECT rag.delete_document(%s, 'b.md')", (tenant,))
        got = side(a, tenant)
        assert got == live(a, tenant) and len(got) == 2
        assert (
            a.execute(
                "SELECT count(*) FROM rag.chunk_tsv AS t JOIN rag.chunk AS c USING (chunk_id) "
                "WHERE c.retired_at IS NOT NULL"
            ).fetchone()[0]
            == 0
        )
        # the rebuild (after a bulk load that bypassed the triggers) makes the same rows
        a.execute("BEGIN")
        a.execute("DELETE FROM rag.chunk_tsv")
        a.execute("SELECT rag._rebuild_retrieval_stats()")
        assert side(a, tenant) == got
        a.execute("ROLLBACK")


def test_chunk_tsv_is_not_readable_by_tenant_roles(writer):
    tenant, w, r = writer
    w.execute("SELECT * FROM rag.ingest(%s, 'a.md', %s)", (tenant, doc(2, "vacuum")))
    for c in (w, r):
        assert fails(c, "SELECT count(*) FROM rag.chunk_tsv") == "42501"
        assert fails(c, "DELETE FROM rag.chunk_tsv") == "42501"
    # retrieval as the reader still ranks full text (through pgcite's own functions)
    rows = r.execute("SELECT fts_score FROM rag.retrieve('vacuum checkpoint', %s, 2)", (tenant,)).fetchall()
    assert len(rows) == 2 and all(s is not None and s > 0 for (s,) in rows)


def test_full_text_leg_ranks_as_rag_chunk_tsv_would(conn, chapters):
    """For questions whose lexemes all fit the budget (every match is a candidate), the leg over
    rag.chunk_tsv equals the unbounded reference ranked from rag.chunk.tsv: the top 40 of every live match by
    BM25 (conftest.bm25_reference), in total order; and the rows change with rag.chunk_tsv (the leg really
    reads it)."""
    questions = [
        "how does autovacuum decide when to vacuum a table",
        "what is the visibility map",
        "transaction id wraparound freeze",
        "hot standby conflicts with recovery",
        "checkpoint write ahead log",
    ]
    leg_sql = (
        "SELECT chunk_id, fts_score FROM rag._candidates(%s, %s, rag.embed(%s), 40, rag._params()) "
        "WHERE fts_rank IS NOT NULL ORDER BY fts_rank"
    )
    compared = 0
    for q in questions:
        corrected = conn.execute(
            "SELECT rag._correct_question(%s, %s, rag._params())", (CHAPTERS_TENANT, q)
        ).fetchone()[0]
        df = conn.execute(
            "SELECT coalesce(sum(s.live_chunks), 0) "
            "FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS l "
            "JOIN rag.tenant_lexeme AS s ON s.tenant = %s AND s.lexeme = l",
            (corrected, CHAPTERS_TENANT),
        ).fetchone()[0]
        if df > 400:  # the budget of depth 40 (10 x depth)
            continue
        leg = conn.execute(leg_sql, (CHAPTERS_TENANT, corrected, corrected)).fetchall()
        ref = bm25_reference(conn, CHAPTERS_TENANT, corrected, 40)
        assert [c for c, _ in leg] == [c for c, _ in ref] and len(leg) > 0, q
        assert all(abs(a - b) < 2e-6 for (_, a), (_, b) in zip(leg, ref, strict=True)), q
        compared += 1
        # the leg reads the side table: the best chunk's narrow row emptied of the question's words, it
        # drops out
        best = leg[0][0]
        conn.execute("SAVEPOINT s")
        conn.execute("UPDATE rag.chunk_tsv SET tsv = 'zzzunrelated'::tsvector WHERE chunk_id = %s", (best,))
        assert best not in [
            cid for cid, _ in conn.execute(leg_sql, (CHAPTERS_TENANT, corrected, corrected))
        ], q
        conn.execute("ROLLBACK TO SAVEPOINT s")
    assert compared >= 2
