"""How soon one client's asks get the background embedding back after a burst of load (setting
background_embedding 1: the worker thread only while a core is to spare).

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/burst_recovery.py [--burst 30]
        [--clients 8] [--after 90] [--bucket 10]

On the scale benchmark's database (bench/bench_scale.py). Waits until the 1-minute load average is under 0.5,
runs pgbench with --clients clients for --burst seconds (bench_scale.py's script: rag.ask of a random
question), then one reader connection (opened before the burst, its model loaded) asks the largest class's
questions in turn for --after seconds. Prints, per --bucket seconds after the burst: the asks' p50, how many
of them the worker embedded (read from each ask's logged `timings.embed_ms`: under 3 ms when the embedding was
only begun there, about 10 ms when it ran in the backend's thread),
and the 1-minute load average and the CPU pressure (`some avg10` of /proc/pressure/cpu) at the bucket's start.
Run it once per version of the rule to compare them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from pgcite_udfs.background import cpu_pressure_avg10

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scale  # noqa: E402
import corpus  # noqa: E402

# an ask whose embedding ran on the worker spent only its start before retrieval (`embed_ms`: spelling and
# the tokenizer, ~0.5-1 ms); one embedded in the backend's thread spent the whole run there (~10 ms)
BEGUN_MS = 3.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=30)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--after", type=int, default=90)
    ap.add_argument("--bucket", type=int, default=10)
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    with corpus.connect(dbname) as c:
        qs = c.execute(
            "SELECT tenant, question FROM pgcite_bench.question WHERE class = 'largest' ORDER BY id"
        ).fetchall()
    while os.getloadavg()[0] >= 0.5:
        time.sleep(5)
    dsn = psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER)
    with psycopg.connect(dsn, autocommit=True) as rc:
        for tenant, q in qs[:3]:
            rc.execute("SELECT status FROM rag.ask(%s, %s, 5)", (q, tenant))
        b = bench_scale.run_pgbench(dbname, args.clients, args.burst, 0)
        tps, failed = b["window_tps"], b["failed"]
        print(f"burst: pgbench, {args.clients} clients, {args.burst} s: {tps} tps, {failed} failed")
        t0 = time.monotonic()
        buckets: dict[int, list[tuple[float, float]]] = {}
        marks: dict[int, tuple[float, float | None]] = {}
        i = 0
        while (t := time.monotonic() - t0) < args.after:
            k = int(t // args.bucket)
            if k not in marks:
                marks[k] = (os.getloadavg()[0], cpu_pressure_avg10())
            tenant, q = qs[i % len(qs)]
            i += 1
            s = time.perf_counter()
            ask_id = rc.execute("SELECT ask_id FROM rag.ask(%s, %s, 5)", (q, tenant)).fetchone()[0]
            ms = (time.perf_counter() - s) * 1000
            embed_ms = rc.execute(
                "SELECT (timings ->> 'embed_ms')::float8 FROM rag.ask_log WHERE ask_id = %s", (ask_id,)
            ).fetchone()[0]
            buckets.setdefault(k, []).append((ms, embed_ms))
    print("| seconds after the burst | asks | p50 ms | by the worker | load average (1 min) | CPU pressure |")
    print("|---|---|---|---|---|---|")
    for k in sorted(buckets):
        v = buckets[k]
        worker = sum(e < BEGUN_MS for _, e in v)
        load, psi = marks[k]
        p50 = statistics.median(m for m, _ in v)
        print(
            f"| {k * args.bucket}-{(k + 1) * args.bucket} | {len(v)} | {p50:.1f} | {worker} | {load:.2f} | "
            f"{psi if psi is not None else '-'} |"
        )


if __name__ == "__main__":
    main()
