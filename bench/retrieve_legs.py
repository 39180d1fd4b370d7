"""Where rag.retrieve's time goes, statement by statement, from pg_stat_statements (track = all).

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/retrieve_legs.py [--per-class 40]
        [--classes largest,1%,tiny] [--top 12]

Needs the cluster started with shared_preload_libraries = pg_stat_statements and pg_stat_statements.track =
all (track_planning on to see planning); creates the extension in the bench database if missing. For each
class: two warm-up calls per tenant, pg_stat_statements_reset() (all of it: the SECURITY DEFINER statements
count as their owner's), then rag.retrieve(q, t, 8, qemb) as pgcite_bench_reader for each of the class's
questions (its stored embedding); prints the whole call's p50 / p95 (client-side) and the statements of the
bench database with the most execution time (mean ms per call of rag.retrieve, with their calls per retrieve
and planning ms per call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--classes", default="largest,1%,tiny")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    owner = psycopg.connect(corpus.db_dsn(dbname), autocommit=True)
    owner.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    reader = psycopg.connect(
        psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER), autocommit=True
    )
    track = owner.execute("SELECT current_setting('pg_stat_statements.track_planning')").fetchone()[0]
    has_plan = track == "on"
    for cls in args.classes.split(","):
        qs = owner.execute(
            "SELECT tenant, question, qemb::text FROM pgcite_bench.question WHERE class = %s "
            "ORDER BY id LIMIT %s",
            (cls, args.per_class),
        ).fetchall()
        for t in sorted({q[0] for q in qs}):
            for q in qs[:2]:
                reader.execute("SELECT count(*) FROM rag.retrieve(%s, %s, 8, %s::vector)", (q[1], t, q[2]))
        owner.execute("SELECT pg_stat_statements_reset()")
        ms = []
        for t, q, e in qs:
            t0 = time.perf_counter()
            reader.execute("SELECT count(*) FROM rag.retrieve(%s, %s, 8, %s::vector)", (q, t, e))
            ms.append((time.perf_counter() - t0) * 1000)
        ms.sort()
        n = len(qs)
        p50, p95 = statistics.median(ms), ms[int(n * 0.95)]
        print(f"\n{cls}: {n} calls, rag.retrieve p50 {p50:.2f} p95 {p95:.2f} ms", flush=True)
        plan_col = "total_plan_time" if has_plan else "0"
        rows = owner.execute(
            f"SELECT total_exec_time / %s, calls::float8 / %s, {plan_col} / %s, "
            "regexp_replace(left(query, 150), '\\s+', ' ', 'g') FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND query NOT LIKE '%%pg_stat_statements%%' ORDER BY total_exec_time DESC LIMIT %s",
            (n, n, n, args.top),
        ).fetchall()
        for ex, calls, plan, query in rows:
            print(f"  {ex:8.3f} ms  x{calls:4.1f}  plan {plan:6.3f}  {query}")


if __name__ == "__main__":
    main()
