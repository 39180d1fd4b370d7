"""What the question's embedding in the background costs the backend's own thread: the hand-offs around it.

    DATABASE_URL='host=... dbname=pgcite_bench_1m user=postgres' .venv/bin/python bench/embed_handoff.py \\
        [--class largest] [--rounds 3] [--gap-ms 15]

rag.ask begins the question's embedding on the backend's worker thread (rag._embed_begin), runs the
full-text and title legs, then ends it in the vector leg (rag._embed_end). What the backend's thread pays
for that beside the run itself is on the ask's critical path: beginning it (tokenizing, handing the run to
the worker and waiting until the worker is inside onnxruntime) and ending it (the worker needs the
interpreter's lock again to pool the run's output and hand it over, which it gets only once the backend
calls into PL/Python; then the vector literal). For each question of pgcite_bench.question of --class, on
one warm connection (a superuser: the two functions are pgcite_owner's only), each call timed from the
client:

- `SELECT 1` (the round trip, to subtract);
- `rag._embed_begin(q)`;
- after --gap-ms of sleep (longer than a run), the first `rag._embed_end(q)`: the run is over, only the
  hand-off and the literal are left;
- a second `rag._embed_end(q)` (the literal is kept: the call alone);
- `rag.embed(q || ' x')` (a whole embedding on the backend's thread, for scale).

Prints p50 / p95 per call over every round after the first, and the two hand-offs less the round trip.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    ap.add_argument("--class", dest="cls", default="largest")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gap-ms", type=float, default=15.0)
    args = ap.parse_args()
    c = psycopg.connect(args.dsn, autocommit=True)
    qs = [
        r[0]
        for r in c.execute(
            "SELECT question FROM pgcite_bench.question WHERE class = %s ORDER BY id", (args.cls,)
        ).fetchall()
    ]
    c.execute("SELECT rag.embed('warm')")
    c.execute("SELECT rag._embed_begin('warm')")
    c.execute("SELECT rag._embed_end('warm')")
    calls = ["select 1", "begin", "end (first, run over)", "end (again)", "rag.embed"]
    ms: dict[str, list[float]] = {k: [] for k in calls}

    def timed(key: str, query: str, params: tuple, keep: bool) -> None:
        t0 = time.perf_counter()
        c.execute(query, params).fetchone()
        if keep:
            ms[key].append((time.perf_counter() - t0) * 1000)

    for rnd in range(args.rounds):
        keep = rnd > 0
        for q in qs:
            timed("select 1", "SELECT 1", (), keep)
            timed("begin", "SELECT rag._embed_begin(%s)", (q,), keep)
            time.sleep(args.gap_ms / 1000)
            timed("end (first, run over)", "SELECT rag._embed_end(%s)::text", (q,), keep)
            timed("end (again)", "SELECT rag._embed_end(%s)::text", (q,), keep)
            timed("rag.embed", "SELECT rag.embed(%s)::text", (q + " x",), keep)
    p50 = {k: statistics.median(v) for k, v in ms.items()}
    for k in calls:
        v = sorted(ms[k])
        print(f"{k:<24} p50 {p50[k]:6.3f}  p95 {v[int(len(v) * 0.95)]:6.3f} ms  (n {len(v)})")
    rt = p50["select 1"]
    print(
        f"on the ask's critical path (p50, less the round trip): begin {p50['begin'] - rt:.3f} ms, "
        f"end {p50['end (first, run over)'] - rt:.3f} ms "
        f"(of which the call itself {p50['end (again)'] - rt:.3f})"
    )


if __name__ == "__main__":
    main()
