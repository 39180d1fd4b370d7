"""The question embedded in the background or before retrieval, side by side in one run (the setting
background_embedding 1 and 0).

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/background_ab.py [--per-class 40]
        [--rounds 2] [--duration 30] [--warmup 30] [--clients 8]

On the scale benchmark's database (bench/bench_scale.py: pgcite_bench.question, the reader
pgcite_bench_reader). The setting is read when a backend embeds its first question, so each side has its own
connections, opened after the setting is made:

1. One client: two reader connections, one opened with background_embedding 1 and one with 0 (each warmed up
   with three asks), and every question of --per-class per class asked on both in turn (the order alternating
   per question), --rounds times: p50 / p95 of `rag.ask` (the question embedded in the database) on each, the
   median of the paired differences (1 - 0) and the share of pairs in which 1 was faster. The two return the
   same statuses (checked).
2. pgbench with --clients clients (bench_scale.py's script: rag.ask of a random question), the settings of
   --load-settings (1,0) alternating (1, 0, 0, 1, ...) for --rounds rounds of --warmup + --duration seconds:
   throughput and latency percentiles of the last --duration seconds of each, failures. With 1 the worker is
   used only while the 1-minute load average is below the CPUs (a saturating pgbench turns it off).

The setting is restored to what it was at the end.
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

SETTING = "background_embedding"


def reader(dbname: str) -> psycopg.Connection:
    dsn = psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER)
    return psycopg.connect(dsn, autocommit=True)


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return round(v[min(len(v) - 1, int(len(v) * p))], 2)


def one_client(dbname: str, per_class: int, rounds: int) -> None:
    with corpus.connect(dbname) as conn:
        qs = conn.execute(
            "SELECT class, tenant, question FROM (SELECT *, row_number() OVER"
            " (PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q"
            " WHERE n <= %s ORDER BY class, id",
            (per_class,),
        ).fetchall()
    conns = {}
    for value in ("1", "0"):
        bench_scale.set_setting(dbname, SETTING, value)
        c = reader(dbname)
        for _cls, tenant, question in qs[:3]:
            c.execute("SELECT status FROM rag.ask(%s, %s, 5)", (question, tenant))
        conns[value] = c
    ms: dict[tuple[str, str], list[float]] = {}
    diff: dict[str, list[float]] = {}
    differ = 0
    for r in range(rounds):
        for i, (cls, tenant, question) in enumerate(qs):
            order = ("1", "0") if (i + r) % 2 == 0 else ("0", "1")
            got = {}
            for value in order:
                t0 = time.perf_counter()
                status = conns[value].execute("SELECT status FROM rag.ask(%s, %s, 5)", (question, tenant))
                got[value] = (status.fetchone()[0], (time.perf_counter() - t0) * 1000)
                ms.setdefault((cls, value), []).append(got[value][1])
            differ += got["1"][0] != got["0"][0]
            diff.setdefault(cls, []).append(got["1"][1] - got["0"][1])
    for c in conns.values():
        c.close()
    print(f"one client: {len(qs)} questions x {rounds} rounds, rag.ask (embedded in the database), paired")
    print(
        "| class | background_embedding 1: p50 / p95 ms | 0: p50 / p95 ms | 1 / 0 p50 "
        "| median paired 1 - 0 ms | 1 faster |"
    )
    print("|---|---|---|---|---|---|")
    for cls in sorted(diff):
        on, off = ms[(cls, "1")], ms[(cls, "0")]
        d = diff[cls]
        print(
            f"| {cls} | {statistics.median(on):.2f} / {pct(on, 0.95):.2f} | {statistics.median(off):.2f} / "
            f"{pct(off, 0.95):.2f} | {statistics.median(on) / statistics.median(off):.3f} | "
            f"{statistics.median(d):+.2f} | {100 * sum(x < 0 for x in d) // len(d)}% |"
        )
    print(f"statuses differ between the two in {differ} pairs")


def load(dbname: str, clients: int, duration: int, warmup: int, rounds: int, values: list[str]) -> None:
    print(f"\npgbench, {clients} clients, last {duration} s of {warmup} + {duration} s, settings alternated")
    print("| round | background_embedding | tps | p50 / p95 / p99 ms | failed |")
    print("|---|---|---|---|---|")
    tps: dict[str, list[float]] = {}
    for r in range(rounds):
        for value in values if r % 2 == 0 else values[::-1]:
            bench_scale.set_setting(dbname, SETTING, value)
            b = bench_scale.run_pgbench(dbname, clients, duration, warmup)
            q = b["window_latency_ms"]
            tps.setdefault(value, []).append(b["window_tps"])
            print(
                f"| {r + 1} | {value} | {b['window_tps']} | {q.get('p50')} / {q.get('p95')} / "
                f"{q.get('p99')} | {b['window_failed']} (whole run {b['failed']}) |"
            )
    print(
        "mean tps: "
        + ", ".join(f"background_embedding {v}: {statistics.mean(t):.1f}" for v, t in sorted(tps.items()))
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--no-load", action="store_true", help="one client only, no pgbench")
    ap.add_argument(
        "--load-settings",
        default="1,0",
        help="the values of background_embedding pgbench alternates (1: while a core is to spare, 2: always)",
    )
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    before = bench_scale.setting_as_set(dbname, SETTING)
    try:
        one_client(dbname, args.per_class, args.rounds)
        if not args.no_load:
            values = [v.strip() for v in args.load_settings.split(",") if v.strip()]
            load(dbname, args.clients, args.duration, args.warmup, args.rounds, values)
    finally:
        bench_scale.set_setting(dbname, SETTING, before)


if __name__ == "__main__":
    main()
