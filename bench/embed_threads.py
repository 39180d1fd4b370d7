"""The embedding threads of a backend (the admin setting torch_threads), side by side: one client, and 8.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/embed_threads.py \\
        [--threads 1,2] [--rounds 2] [--clients 8] [--duration 30] [--warmup 20] [--per-class 40]

Issue #10's question embedding target (<= 5 ms) is met with two onnxruntime intra-op threads and not with one
(docs/BENCHMARKS.md, "Question embedding"); two threads also let one backend use two cores while it embeds, so
the default stays 1 unless more clients are not slowed. This measures both on the scale benchmark's database
(bench/bench_scale.py's, whose questions are in pgcite_bench.question), in one run:

1. one client: a reader connection per thread count, each opened while torch_threads held that count (a
   backend reads the setting when it loads the model) and warmed up; then for each question (--per-class of
   each size class) `rag.embed(question)` and `rag.ask(question, tenant, 5)` on every connection in turn, the
   order alternating, so both see the same machine. Prints p50 / p95 per count and the median paired
   difference.
2. many clients: bench/bench_scale.py's pgbench (rag.ask of a random question, --clients clients, --warmup +
   --duration s, throughput and latency of the window after every client's model load) once per count and
   round, the counts alternating (1, 2, 1, 2, ... with --rounds 2).

The setting is restored at the end (to its default if it was not set).
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
import bench_scale  # noqa: E402
import corpus  # noqa: E402


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return round(s[min(len(s) - 1, int(len(s) * p))], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--per-class", type=int, default=40)
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    counts = [int(x) for x in args.threads.split(",")]
    before = bench_scale.torch_threads_set(dbname)
    with corpus.connect(dbname) as conn:
        qs = conn.execute(
            "SELECT tenant, question FROM (SELECT *, row_number() OVER (PARTITION BY class ORDER BY id) AS n "
            "FROM pgcite_bench.question) AS q WHERE n <= %s ORDER BY id",
            (args.per_class,),
        ).fetchall()
    reader_dsn = psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER)
    conns: dict[int, psycopg.Connection] = {}
    try:
        for n in counts:
            bench_scale.set_torch_threads(dbname, str(n))
            c = psycopg.connect(reader_dsn, autocommit=True)
            for t, q in qs[:5]:
                c.execute("SELECT rag.embed(%s)::text", (q,)).fetchone()
                c.execute("SELECT status FROM rag.ask(%s, %s, 5)", (q, t)).fetchone()
            conns[n] = c
        ms: dict[tuple[int, str], list[float]] = {}
        for i, (t, q) in enumerate(qs):
            order = counts if i % 2 == 0 else counts[::-1]
            for n in order:
                for call, sql, params in (
                    ("embed", "SELECT rag.embed(%s)::text", (q,)),
                    ("ask", "SELECT status FROM rag.ask(%s, %s, 5)", (q, t)),
                ):
                    t0 = time.perf_counter()
                    conns[n].execute(sql, params).fetchone()
                    ms.setdefault((n, call), []).append((time.perf_counter() - t0) * 1000)
        print(f"one client, {len(qs)} questions, each call on every connection in turn (ms):")
        for call in ("embed", "ask"):
            for n in counts:
                v = ms[(n, call)]
                print(f"  {call:<6} torch_threads {n}: p50 {pct(v, 0.5):7.2f}  p95 {pct(v, 0.95):7.2f}")
            if len(counts) == 2:
                a, b = ms[(counts[0], call)], ms[(counts[1], call)]
                d = statistics.median(y - x for x, y in zip(a, b, strict=True))
                print(f"  {call:<6} median paired difference ({counts[1]} - {counts[0]}): {d:+.2f} ms")
        for c in conns.values():
            c.close()
        conns.clear()
        print(f"{args.clients} clients (pgbench, rag.ask embedding in the database), counts alternating:")
        for r in range(args.rounds):
            for n in counts if r % 2 == 0 else counts[::-1]:
                bench_scale.set_torch_threads(dbname, str(n))
                b = bench_scale.run_pgbench(dbname, args.clients, args.duration, args.warmup)
                q = b["window_latency_ms"]
                print(
                    f"  round {r + 1} torch_threads {n}: {b['window_tps']} tps over {b['window_s']} s, "
                    f"{b['window_failed']} failed, p50 {q.get('p50')} p95 {q.get('p95')} ms; "
                    f"first transaction p50 {b['first_txn_ms'].get('p50')} ms",
                    flush=True,
                )
    finally:
        for c in conns.values():
            c.close()
        bench_scale.set_torch_threads(dbname, before)


if __name__ == "__main__":
    main()
