"""Security round 6: how another tenant's titles slow a tenant's title leg (docs/security.md, a known limit).

    DATABASE_URL=... .venv/bin/python bench/title_flood.py [--flood 100000] [--rounds 30]

In one transaction that is rolled back: a tenant "victim" with a dozen chunks whose rag.tenant_stat row
says 5,000 live chunks (so rag._candidates reads its titles through an index, not by primary key), and a
tenant "flood" whose rag.tenant_title holds --flood titles sharing the words of the victim's question (what
a writer's ingests of that many chunks leave there; written directly, without embedding them). Times
rag._candidates for the victim (the question embedded once; p50 of --rounds calls after five): with no
flood, with the flood (and which index its title leg reads), with the flood once the victim has its own
title index (rag._index_tenants); and a victim of 12 chunks (titles by primary key) with the flood.
Compares the rows of each with the no-flood run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

DOC = "\n\n".join(
    f"# Checkpoint tuning part {i}\n\nThe checkpoint of part {i} writes dirty pages of the {i} buffers."
    for i in range(12)
)
Q = "Checkpoint tuning part 3"
CALL = "SELECT c.* FROM rag._candidates('victim', %s, %s::public.vector, 40, rag._params()) AS c ORDER BY 1"


def timed(conn, rounds: int) -> tuple[float, list]:
    emb = conn.execute("SELECT rag.embed(%s)::text", (Q,)).fetchone()[0]
    rows = conn.execute(CALL, (Q, emb)).fetchall()
    for _ in range(5):  # warm-up: the plans and the pages
        conn.execute(CALL, (Q, emb)).fetchall()
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        conn.execute(CALL, (Q, emb)).fetchall()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts), rows


def title_scans(conn, emb: str) -> list[str]:
    """The index scans of rag.tenant_title in the plan of one rag._candidates call (auto_explain)."""
    seen: list[str] = []
    conn.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for s in ("log_min_duration = 0", "log_nested_statements = on", "log_level = notice"):
        conn.execute(f"SET LOCAL auto_explain.{s}")
    conn.execute(CALL, (Q, emb)).fetchall()
    conn.execute("SET LOCAL auto_explain.log_min_duration = -1")
    return sorted(
        {
            ln.split("(")[0].strip(" ->")
            for p in seen
            for ln in p.splitlines()
            if "Index Scan on" in ln and ("tenant_title" in ln)
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flood", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=60)
    a = ap.parse_args()
    with common.connect() as conn, conn.transaction(force_rollback=True):
        for t in ("victim", "flood"):
            conn.execute("SELECT rag.create_tenant(%s)", (t,))
        conn.execute("SELECT * FROM rag.ingest('victim', 'c.md', %s)", (DOC,))
        small_ms, small_rows = timed(conn, a.rounds)
        conn.execute("UPDATE rag.tenant_stat SET live_chunks = 5000 WHERE tenant = 'victim'")
        base_ms, base_rows = timed(conn, a.rounds)
        conn.execute(
            "INSERT INTO rag.tenant_title (tenant, title, stripped, tsv, live_chunks) "
            "SELECT 'flood', t, t, to_tsvector('english', t), 1 "
            "FROM (SELECT 'Checkpoint tuning part ' || i || ' of the flood' AS t "
            "      FROM generate_series(1, %s) AS i) AS g",
            (a.flood,),
        )
        conn.execute("ANALYZE rag.tenant_title")
        flood_ms, flood_rows = timed(conn, a.rounds)
        emb = conn.execute("SELECT rag.embed(%s)::text", (Q,)).fetchone()[0]
        scans = title_scans(conn, emb)
        conn.execute("SELECT * FROM rag._index_tenants(1, 'victim')").fetchall()
        own_ms, own_rows = timed(conn, a.rounds)
        conn.execute("UPDATE rag.tenant_stat SET live_chunks = 12 WHERE tenant = 'victim'")
        for fn in ("_tenant_index_name", "_tenant_fts_index_name", "_tenant_title_index_name"):
            name = conn.execute(f"SELECT rag.{fn}('victim')").fetchone()[0]
            conn.execute(f'DROP INDEX rag."{name}"')
        small_flood_ms, small_flood_rows = timed(conn, a.rounds)
    print(f"flood of {a.flood} titles, p50 of {a.rounds} rag._candidates calls (ms):")
    print(
        f"  5,000-chunk victim, table-wide title index: {base_ms:.2f} -> {flood_ms:.2f} with the flood"
        f" (rows same: {flood_rows == base_rows}); it reads {', '.join(scans)}"
    )
    print(f"  with its own title index and the flood: {own_ms:.2f} (rows same: {own_rows == base_rows})")
    print(
        f"  12-chunk victim (titles by primary key): {small_ms:.2f} -> {small_flood_ms:.2f} with the flood"
        f" (rows same: {small_flood_rows == small_rows})"
    )


if __name__ == "__main__":
    main()
