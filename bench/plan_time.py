"""Planning against execution time of rag._candidates' statements per tenant class, two versions side by side.

    BENCH_DB=pgcite_bench DATABASE_URL=... .venv/bin/python bench/plan_time.py OLD.sql [NEW.sql]
        [--per-class 20] [--rounds 2]

Needs pg_stat_statements in shared_preload_libraries with pg_stat_statements.track = all and
pg_stat_statements.track_planning = on (a private cluster: the script creates the extension in BENCH_DB and
a NOLOGIN superuser role pgcite_plan_probe whose statements alone it counts, so other sessions' calls of the
same statements do not mix in).

Creates rag._candidates of each 040-retrieve.sql file as pg_temp._cand_a / pg_temp._cand_b on a fresh
connection per (round, version, class), as SET ROLE pgcite_plan_probe, and calls it (depth 40, k 8's) on
--per-class questions of pgcite_bench.question of each class (corrected first, their stored embeddings)
after two warm-up calls, with that role's pg_stat_statements entries reset between warm-up and timing.
Versions alternate A B B A ... Prints per class and version: plans made per call, planning ms per call (the
nested statements' total_plan_time), the call's execution ms (the top-level statement's total_exec_time,
which includes the nested planning), execution less planning, and the client-side p50.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import candidates_same  # noqa: E402
import corpus  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROLE = "pgcite_plan_probe"


def setup(dbname: str) -> None:
    with corpus.connect(dbname) as c:
        got = dict(
            c.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('pg_stat_statements.track', 'pg_stat_statements.track_planning')"
            ).fetchall()
        )
        if (
            got.get("pg_stat_statements.track") != "all"
            or got.get("pg_stat_statements.track_planning") != "on"
        ):
            sys.exit(
                f"plan_time: needs pg_stat_statements preloaded, track = all, track_planning = on (got {got})"
            )
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            c.execute(f"CREATE ROLE {ROLE} NOLOGIN SUPERUSER")


def measure(dbname: str, path: str, qs: list, params: str) -> dict:
    """One fresh connection: the version's function, two warm-up calls, then the counted calls."""
    with corpus.connect(dbname) as c:
        c.execute(f"SET ROLE {ROLE}")
        c.execute(candidates_same.candidates_source(path, "_cand"))
        call = "SELECT * FROM pg_temp._cand(%s, %s, %s::vector, 40, %s::jsonb)"
        for tenant, corr, qemb in qs[:2]:
            c.execute(call, (tenant, corr, qemb, params)).fetchall()
        oid = c.execute("SELECT oid FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()[0]
        c.execute("SELECT pg_stat_statements_reset(%s::oid)", (oid,))
        wall = []
        for tenant, corr, qemb in qs:
            t0 = time.perf_counter()
            c.execute(call, (tenant, corr, qemb, params)).fetchall()
            wall.append((time.perf_counter() - t0) * 1000)
        nested = c.execute(
            "SELECT coalesce(sum(plans), 0), coalesce(sum(total_plan_time), 0), coalesce(sum(calls), 0) "
            "FROM pg_stat_statements WHERE userid = %s AND NOT toplevel",
            (oid,),
        ).fetchone()
        top = c.execute(
            "SELECT sum(calls), sum(total_exec_time), sum(total_plan_time) FROM pg_stat_statements "
            "WHERE userid = %s AND toplevel AND query LIKE %s",
            (oid, "%pg_temp._cand(%"),
        ).fetchone()
        worst = c.execute(
            "SELECT total_plan_time / %s, plans, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) "
            "FROM pg_stat_statements WHERE userid = %s AND NOT toplevel "
            "ORDER BY total_plan_time DESC LIMIT 2",
            (len(qs), oid),
        ).fetchall()
    n = len(qs)
    return {
        "plans": float(nested[0]) / n,
        "statements": float(nested[2]) / n,
        "plan": float(nested[1]) / n,
        "exec": float(top[1]) / n,
        "top_plan": float(top[2]) / n,
        "wall": wall,
        "worst": worst,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=str(ROOT / "sql/core/040-retrieve.sql"))
    ap.add_argument("--per-class", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--classes", default="", help="comma-separated classes (default: every class)")
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    setup(dbname)
    with corpus.connect(dbname) as c:
        params = c.execute("SELECT rag._params()::text").fetchone()[0]
        classes = [
            r[0] for r in c.execute("SELECT DISTINCT class FROM pgcite_bench.question ORDER BY 1").fetchall()
        ]
        if args.classes:
            classes = [x for x in classes if x in args.classes.split(",")]
        qs: dict[str, list] = {}
        sizes: dict[str, str] = {}
        for cls in classes:
            rows = c.execute(
                "SELECT tenant, question, qemb::text FROM pgcite_bench.question WHERE class = %s "
                "ORDER BY id LIMIT %s",
                (cls, args.per_class + 2),
            ).fetchall()
            qs[cls] = [
                (
                    t,
                    c.execute("SELECT rag._correct_question(%s, %s, %s::jsonb)", (t, q, params)).fetchone()[
                        0
                    ],
                    e,
                )
                for t, q, e in rows
            ]
            sizes[cls] = ", ".join(
                sorted(
                    {
                        f"{t} {c.execute('SELECT rag._live_chunks(%s)', (t,)).fetchone()[0]}"
                        for t, _, _ in rows
                    }
                )
            )
    res: dict[tuple[str, str], list[dict]] = {}
    for rnd in range(args.rounds):
        order = ("a", "b") if rnd % 2 == 0 else ("b", "a")
        for cls in classes:
            for v in order:
                path = args.old if v == "a" else args.new
                res.setdefault((cls, v), []).append(measure(dbname, path, qs[cls], params))
    print(
        f"{args.rounds} rounds x {args.per_class} calls per class and version "
        f"(A = {args.old}, B = {args.new})"
    )
    print(
        f"{'class':<7} {'ver':<3} {'stmts':>6} {'plans':>6} {'plan ms':>8} {'exec ms':>8} "
        f"{'exec-plan':>9} {'wall p50':>9}"
    )
    for cls in classes:
        for v in ("a", "b"):
            rs = res[cls, v]
            plan = statistics.mean(r["plan"] for r in rs)
            ex = statistics.mean(r["exec"] for r in rs)
            wall = statistics.median([w for r in rs for w in r["wall"]])
            print(
                f"{cls:<7} {v.upper():<3} {statistics.mean(r['statements'] for r in rs):6.1f} "
                f"{statistics.mean(r['plans'] for r in rs):6.1f} {plan:8.2f} {ex:8.2f} {ex - plan:9.2f} "
                f"{wall:9.2f}"
            )
        a = statistics.mean(r["plan"] for r in res[cls, "a"])
        b = statistics.mean(r["plan"] for r in res[cls, "b"])
        print(f"{cls:<7} planning B / A {b / a if a else float('nan'):.3f}   tenants: {sizes[cls]}")
        for v in ("a", "b"):
            for ms, plans, text in res[cls, v][-1]["worst"]:
                print(f"        {v.upper()} {ms:6.2f} ms/call ({plans} plans) {text}")


if __name__ == "__main__":
    main()
