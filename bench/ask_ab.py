"""A quick before/after of rag.retrieve and rag.ask on the scale benchmark's database, one connection.

    BENCH_DB=pgcite_bench_1m .venv/bin/python bench/ask_ab.py LABEL [--per-class 20]

As pgcite_bench_reader, for the first --per-class questions of each class of pgcite_bench.question (after
three warm-up asks): rag.retrieve (k 8, the question's embedding passed) and rag.ask (k 5, embedded in the
database), each once; prints p50, p95 and max per class and call, and the statuses of rag.ask. Load the SQL to
compare (e.g. another commit's sql/core/*.sql) into the database between two runs.
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

RETRIEVE = "SELECT count(*) FROM rag.retrieve(%s, %s, 8, %s::vector)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("label")
    ap.add_argument("--per-class", type=int, default=20)
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    dsn = psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER)
    with psycopg.connect(dsn, autocommit=True) as c:
        qs = c.execute(
            "SELECT class, tenant, question, qemb::text FROM (SELECT *, row_number() OVER "
            "(PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q WHERE n <= %s "
            "ORDER BY class, id",
            (args.per_class,),
        ).fetchall()
        for q in qs[:3]:
            c.execute("SELECT status FROM rag.ask(%s, %s, 5)", (q[2], q[1])).fetchone()
        ms: dict[tuple[str, str], list[float]] = {}
        statuses: dict[str, list[str]] = {}
        for cls, tenant, question, qemb in qs:
            for name, sql, params in (
                ("retrieve", RETRIEVE, (question, tenant, qemb)),
                ("ask", "SELECT status FROM rag.ask(%s, %s, 5)", (question, tenant)),
            ):
                t0 = time.perf_counter()
                got = c.execute(sql, params).fetchone()[0]
                ms.setdefault((cls, name), []).append((time.perf_counter() - t0) * 1000)
                if name == "ask":
                    statuses.setdefault(cls, []).append(got)
    for (cls, name), v in ms.items():
        p95 = sorted(v)[min(len(v) - 1, int(len(v) * 0.95))]
        p50 = statistics.median(v)
        print(f"{args.label} {cls:<8} {name:<9} p50 {p50:7.1f}  p95 {p95:7.1f}  max {max(v):7.1f} ms")
    for cls, v in statuses.items():
        print(f"{args.label} {cls:<8} statuses {dict(sorted((s, v.count(s)) for s in set(v)))}")


if __name__ == "__main__":
    main()
