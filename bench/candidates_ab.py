"""Versions of rag._candidates side by side on one class of the scale benchmark's questions, in one run.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/candidates_ab.py OLD.sql NEW.sql \
        [MORE.sql] [--class largest] [--rounds 7]

Creates rag._candidates of each 040-retrieve.sql file as pg_temp._cand_0, _cand_1, ... (session only;
nothing is written to the database) and calls every version for each question of the class (k 8's depth 40,
the question corrected first, its stored embedding), the versions in an order rotated per question and round,
so each runs first, second, ... equally often: the one that runs after another finds the rows that one read in
the buffers. The first round is a warm-up. Prints, per version, the p50 / p95 / max over the questions of each
question's median time, each later version's per-question difference from the first (median and sum), and the
slowest questions of the first version with every version's time. bench/candidates_same.py checks that the
versions return the same rows.
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
from candidates_same import candidates_source  # noqa: E402


def p95(values: list[float]) -> float:
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[94]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="040-retrieve.sql files, the first the reference")
    ap.add_argument("--class", dest="cls", default="largest", help="largest, 1%% or tiny")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--slowest", type=int, default=10)
    args = ap.parse_args()
    versions = list(range(len(args.files)))
    with psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True) as c:
        for v, f in enumerate(args.files):
            c.execute(candidates_source(f, f"_cand_{v}"))
        qs = c.execute(
            "SELECT q.question, q.tenant, q.qemb::text FROM pgcite_bench.question AS q WHERE q.class = %s"
            " ORDER BY q.id",
            (args.cls,),
        ).fetchall()
        if not qs:
            sys.exit(f"candidates_ab: no questions of class {args.cls!r}")
        corrected = [
            c.execute("SELECT rag._correct_question(%s, %s, rag._params())", (t, q)).fetchone()[0]
            for q, t, _ in qs
        ]
        times: dict[int, list[list[float]]] = {v: [[] for _ in qs] for v in versions}
        for r in range(args.rounds):
            for i, (_, tenant, qemb) in enumerate(qs):
                k = (i + r) % len(versions)
                for v in versions[k:] + versions[:k]:
                    t0 = time.perf_counter()
                    c.execute(
                        f"SELECT count(*) FROM pg_temp._cand_{v}(%s, %s, %s::vector, 40, rag._params())",
                        (tenant, corrected[i], qemb),
                    )
                    if r:
                        times[v][i].append((time.perf_counter() - t0) * 1000)
    med = {v: [statistics.median(x) for x in times[v]] for v in versions}
    for v in versions:
        print(
            f"{args.cls} {args.files[v]}: per-question median p50 {statistics.median(med[v]):.2f}"
            f" p95 {p95(med[v]):.2f} max {max(med[v]):.2f} ms"
        )
    for v in versions[1:]:
        d = [b - a for a, b in zip(med[0], med[v], strict=True)]
        print(
            f"  version {v} - version 0, per question: median {statistics.median(d):+.2f} ms,"
            f" sum {sum(d):+.1f} ms"
        )
    for i in sorted(range(len(qs)), key=lambda i: -med[0][i])[: args.slowest]:
        print("   " + "  ".join(f"{med[v][i]:6.2f}" for v in versions) + f"  {qs[i][0][:60]}")


if __name__ == "__main__":
    main()
