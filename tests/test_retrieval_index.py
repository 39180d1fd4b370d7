"""Retrieval bounded by indexes: the per-tenant statistics the triggers keep, the per-tenant HNSW index."""

from __future__ import annotations

import psycopg

Q = "Notes about the checkpoint of subject 7"


def doc(n: int, word: str) -> str:
    return "\n\n".join(
        f"# {word.title()} topic {i}\n\nNotes on subject {i} about the {word} of the tenant, part {i % 3}."
        for i in range(n)
    )


def stats(conn, tenant: str) -> tuple:
    live = conn.execute("SELECT live_chunks FROM rag.tenant_stat WHERE tenant = %s", (tenant,)).fetchone()
    lex = conn.execute(
        "SELECT lexeme, live_chunks FROM rag.tenant_lexeme WHERE tenant = %s AND live_chunks <> 0 ORDER BY 1",
        (tenant,),
    ).fetchall()
    titles = conn.execute(
        "SELECT title, stripped, tsv::text, live_chunks FROM rag.tenant_title "
        "WHERE tenant = %s AND live_chunks <> 0 ORDER BY 1",
        (tenant,),
    ).fetchall()
    return (live[0] if live else 0), lex, titles


def recomputed(conn, tenant: str) -> tuple:
    """The same figures computed from rag.chunk directly."""
    live = conn.execute(
        "SELECT count(*) FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL", (tenant,)
    ).fetchone()[0]
    lex = conn.execute(
        "SELECT x.lexeme, count(*) FROM rag.chunk AS c CROSS JOIN LATERAL unnest(c.tsv) AS x "
        "WHERE c.tenant = %s AND c.retired_at IS NULL GROUP BY 1 ORDER BY 1",
        (tenant,),
    ).fetchall()
    titles = conn.execute(
        "SELECT title, regexp_replace(title, '^[0-9A-Z]*[0-9.]+\\s+', ''), "
        "to_tsvector(ts_config, regexp_replace(title, '^[0-9A-Z]*[0-9.]+\\s+', ''))::text, count(*) "
        "FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL AND title <> '' "
        "GROUP BY title, ts_config ORDER BY 1",
        (tenant,),
    ).fetchall()
    return live, lex, titles


def test_statistics_follow_ingest_new_version_and_delete(conn):
    conn.execute("SELECT rag.create_tenant('stats')")
    conn.execute("SELECT * FROM rag.ingest('stats', 'a.md', %s)", (doc(6, "vacuum"),))
    conn.execute("SELECT * FROM rag.ingest('stats', 'b.md', %s)", (doc(4, "checkpoint"),))
    assert stats(conn, "stats") == recomputed(conn, "stats")
    assert stats(conn, "stats")[0] == 10
    # a new version of a.md retires its 6 chunks and adds 3; deleting b.md retires 4
    conn.execute("SELECT * FROM rag.ingest('stats', 'a.md', %s)", (doc(3, "wraparound"),))
    conn.execute("SELECT rag.delete_document('stats', 'b.md')")
    got = stats(conn, "stats")
    assert got == recomputed(conn, "stats")
    assert got[0] == 3 and not any(lx == "checkpoint" for lx, _ in got[1])
    # the rebuild (after a bulk load that bypassed the triggers) yields the same rows
    conn.execute("SELECT rag._rebuild_retrieval_stats()")
    assert stats(conn, "stats") == got


def plans(conn, sql: str, params: tuple) -> tuple[list, list[str]]:
    """Runs sql with auto_explain logging every nested plan; returns its rows and the plans."""
    seen: list[str] = []

    def handler(d) -> None:
        seen.append(d.message_primary or "")

    conn.add_notice_handler(handler)
    try:
        conn.execute("LOAD 'auto_explain'")
        for s in (
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_level = notice",
            "client_min_messages = notice",
        ):
            conn.execute(f"SET LOCAL {s}")
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.remove_notice_handler(handler)
        conn.execute("SET LOCAL auto_explain.log_min_duration = -1")
    return rows, seen


def test_own_hnsw_index_is_used_after_many_calls_and_not_for_other_tenants(conn):
    """A tenant's partial HNSW index serves its vector leg (past PL/pgSQL's five-call plan caching), gives
    the exact result on a small tenant, and a tiny tenant asked on the same connection is still searched
    exactly."""
    n_tiny = conn.execute("SELECT rag._live_chunks('tiny')").fetchone()[0]
    conn.execute("SELECT rag.create_tenant('own')")
    conn.execute("SELECT * FROM rag.ingest('own', 'a.md', %s)", (doc(n_tiny + 5, "checkpoint"),))
    sql = "SELECT chunk_id FROM rag.retrieve(%s, %s, 10)"
    exact = conn.execute(sql, (Q, "own")).fetchall()
    built = conn.execute("SELECT tenant, index_name FROM rag._index_tenants(%s)", (n_tiny + 1,)).fetchall()
    assert built == [("own", conn.execute("SELECT rag._tenant_index_name('own')").fetchone()[0])]
    index = built[0][1]
    assert conn.execute("SELECT count(*) FROM rag._index_tenants(%s)", (n_tiny + 1,)).fetchone()[0] == 0
    for i in range(7):
        rows, seen = plans(conn, sql, (Q, "own"))
        assert rows == exact, i
        assert any(f"Index Scan using {index} on chunk" in p for p in seen), i
        rows, seen = plans(conn, sql, (WRAP, "tiny"))
        assert len(rows) == 10
        hnsw = ("Index Scan using chunk_hnsw_", "Index Scan using chunk_embedding_hnsw_idx")
        assert not any(h in p for p in seen for h in hnsw), i


WRAP = "How do I prevent transaction ID wraparound failures?"


def test_index_tenants_rejects_a_bad_minimum(conn):
    try:
        conn.execute("SELECT * FROM rag._index_tenants(0)")
    except psycopg.Error as e:
        assert e.sqlstate == "22023"
    else:
        raise AssertionError("no error")
