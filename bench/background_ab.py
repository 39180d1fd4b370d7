"""The question embedded in the background or before retrieval, side by side in one run (the setting
background_embedding 1 and 0; or another setting read when a backend loads the model: --setting).

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/background_ab.py [--per-class 40]
        [--rounds 2] [--duration 30] [--warmup 30] [--clients 8]
    # the model's weights on huge pages or not, rag.embed timed too:
    ... bench/background_ab.py --setting embedding_huge_pages --embed --no-load

On the scale benchmark's database (bench/bench_scale.py: pgcite_bench.question, the reader
pgcite_bench_reader). The setting is read when a backend embeds its first question, so each side has its own
connections, opened after the setting is made:

1. One client: two reader connections, one opened with background_embedding 1 and one with 0 (each warmed up
   with three asks), and every question of --per-class per class asked on both in turn (the order alternating
   per question), --rounds times: p50 / p95 of `rag.ask` (the question embedded in the database) on each, the
   median of the paired differences (1 - 0) and the share of pairs in which 1 was faster. The two return the
   same statuses (checked). With --embed, `rag.embed(question)` is timed the same way, each right after the
   ask on the same connection.
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


def one_client(
    dbname: str, per_class: int, rounds: int, setting: str, values: tuple[str, str], embed: bool
) -> None:
    a, b = values
    with corpus.connect(dbname) as conn:
        qs = conn.execute(
            "SELECT class, tenant, question FROM (SELECT *, row_number() OVER"
            " (PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q"
            " WHERE n <= %s ORDER BY class, id",
            (per_class,),
        ).fetchall()
    conns = {}
    for value in values:
        bench_scale.set_setting(dbname, setting, value)
        c = reader(dbname)
        for _cls, tenant, question in qs[:3]:
            c.execute("SELECT status FROM rag.ask(%s, %s, 5)", (question, tenant))
        conns[value] = c
    calls = ["ask", "embed"] if embed else ["ask"]
    ms: dict[tuple[str, str, str], list[float]] = {}
    diff: dict[tuple[str, str], list[float]] = {}
    differ = 0
    for r in range(rounds):
        for i, (cls, tenant, question) in enumerate(qs):
            order = (a, b) if (i + r) % 2 == 0 else (b, a)
            got: dict[tuple[str, str], float] = {}
            status = {}
            for value in order:
                t0 = time.perf_counter()
                row = conns[value].execute("SELECT status FROM rag.ask(%s, %s, 5)", (question, tenant))
                status[value] = row.fetchone()[0]
                got[("ask", value)] = (time.perf_counter() - t0) * 1000
                if embed:
                    t0 = time.perf_counter()
                    conns[value].execute("SELECT rag.embed(%s)", (question,)).fetchone()
                    got[("embed", value)] = (time.perf_counter() - t0) * 1000
            differ += status[a] != status[b]
            for call in calls:
                for value in values:
                    ms.setdefault((cls, call, value), []).append(got[(call, value)])
                diff.setdefault((cls, call), []).append(got[(call, a)] - got[(call, b)])
    for c in conns.values():
        c.close()
    print(f"one client: {len(qs)} questions x {rounds} rounds, paired ({setting} {a} against {b})")
    print(
        f"| class | call | {setting} {a}: p50 / p95 ms | {b}: p50 / p95 ms | {a} / {b} p50 "
        f"| median paired {a} - {b} ms | {a} faster |"
    )
    print("|---|---|---|---|---|---|---|")
    for cls, call in sorted(diff):
        x, y = ms[(cls, call, a)], ms[(cls, call, b)]
        d = diff[(cls, call)]
        mx, my = statistics.median(x), statistics.median(y)
        print(
            f"| {cls} | {call} | {mx:.2f} / {pct(x, 0.95):.2f} | {my:.2f} / {pct(y, 0.95):.2f} | "
            f"{mx / my:.3f} | {statistics.median(d):+.2f} | {100 * sum(v < 0 for v in d) // len(d)}% |"
        )
    print(f"statuses differ between the two in {differ} pairs")


def load(
    dbname: str, clients: int, duration: int, warmup: int, rounds: int, setting: str, values: list[str]
) -> None:
    print(f"\npgbench, {clients} clients, last {duration} s of {warmup} + {duration} s, settings alternated")
    print(f"| round | {setting} | tps | p50 / p95 / p99 ms | failed |")
    print("|---|---|---|---|---|")
    tps: dict[str, list[float]] = {}
    for r in range(rounds):
        for value in values if r % 2 == 0 else values[::-1]:
            bench_scale.set_setting(dbname, setting, value)
            b = bench_scale.run_pgbench(dbname, clients, duration, warmup)
            q = b["window_latency_ms"]
            tps.setdefault(value, []).append(b["window_tps"])
            print(
                f"| {r + 1} | {value} | {b['window_tps']} | {q.get('p50')} / {q.get('p95')} / "
                f"{q.get('p99')} | {b['window_failed']} (whole run {b['failed']}) |"
            )
    means = ", ".join(f"{setting} {v}: {statistics.mean(t):.1f}" for v, t in sorted(tps.items()))
    print(f"mean tps: {means}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--no-load", action="store_true", help="one client only, no pgbench")
    ap.add_argument("--setting", default=SETTING, help="a setting read when a backend loads the model")
    ap.add_argument("--pair", default="1,0", help="the two values the one-client run compares")
    ap.add_argument("--embed", action="store_true", help="time rag.embed(question) too")
    ap.add_argument(
        "--load-settings",
        default="1,0",
        help="the values pgbench alternates (background_embedding 1: while a core is to spare, 2: always)",
    )
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    pair = tuple(v.strip() for v in args.pair.split(","))
    if len(pair) != 2:
        ap.error("--pair takes two values")
    before = bench_scale.setting_as_set(dbname, args.setting)
    try:
        one_client(dbname, args.per_class, args.rounds, args.setting, pair, args.embed)
        if not args.no_load:
            values = [v.strip() for v in args.load_settings.split(",") if v.strip()]
            load(dbname, args.clients, args.duration, args.warmup, args.rounds, args.setting, values)
    finally:
        bench_scale.set_setting(dbname, args.setting, before)


if __name__ == "__main__":
    main()
