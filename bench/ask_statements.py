"""Where one rag.ask spends its time, statement by statement (pg_stat_statements, track = all).

    .venv/bin/python bench/ask_statements.py --dsn 'host=... dbname=pgcite_quotes user=postgres' \\
        --reader q10a_reader --tenant pgdocs [--offtopic 40] [--top 30] [--embed]
    # the scale benchmark's questions of one class (pgcite_bench.question):
    .venv/bin/python bench/ask_statements.py --dsn '...dbname=pgcite_bench' --class tiny --per-class 40

Needs a cluster with shared_preload_libraries = pg_stat_statements, pg_stat_statements.track = all and
track_planning = on (a private one: the settings are the superuser's). As the reader, on one connection: three
warm-up asks, pg_stat_statements_reset(), then every question asked once (`rag.ask` with the question's
embedding passed, or embedded in the database with --embed). Prints, per statement (nested statements of
PL/pgSQL and SQL functions included), calls per ask, planning and execution ms per ask and per call, sorted by
execution time. A statement's execution time includes the statements it calls (a nested function's body):
read the rows as a tree, not a sum. Nothing else should run in the database meanwhile.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import psycopg
import psycopg.sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ask_ab  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True, help="superuser DSN of the database")
    ap.add_argument("--reader", default="pgcite_bench_reader")
    ap.add_argument("--tenant", default="pgdocs")
    ap.add_argument("--offtopic", type=int, default=40)
    ap.add_argument("--class", dest="cls", help="pgcite_bench.question's class instead of the dev set")
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--embed", action="store_true", help="rag.ask embeds the question in the database")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--width", type=int, default=110, help="characters of each statement's text")
    args = ap.parse_args()
    owner = psycopg.connect(args.dsn, autocommit=True)
    owner.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    if args.cls:
        qs = owner.execute(
            "SELECT class, tenant, question, qemb::text FROM pgcite_bench.question WHERE class = %s "
            "ORDER BY id LIMIT %s",
            (args.cls, args.per_class),
        ).fetchall()
    else:
        qs = ask_ab.dev_questions(owner, args.tenant, args.offtopic)
    sql = (
        "SELECT status FROM rag.ask(%s, %s, 5)"
        if args.embed
        else "SELECT status FROM rag.ask(%s, %s, 5, %s::vector)"
    )
    dbname = owner.execute("SELECT current_database()").fetchone()[0]
    owner.execute(
        psycopg.sql.SQL("ALTER DATABASE {} SET track_functions = 'all'").format(
            psycopg.sql.Identifier(dbname)
        )
    )
    reader = psycopg.connect(psycopg.conninfo.make_conninfo(args.dsn, user=args.reader), autocommit=True)
    for _cls, tenant, question, qemb in qs[:3]:
        reader.execute(sql, (question, tenant) if args.embed else (question, tenant, qemb))
    dbid = owner.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
    reader.execute("SELECT pg_stat_force_next_flush()")
    reader.execute("SELECT 1")
    time.sleep(1.2)
    owner.execute("SELECT pg_stat_statements_reset()")
    owner.execute("SELECT pg_stat_reset()")
    t0 = time.perf_counter()
    statuses: dict[str, int] = {}
    for _cls, tenant, question, qemb in qs:
        s = reader.execute(sql, (question, tenant) if args.embed else (question, tenant, qemb)).fetchone()[0]
        statuses[s] = statuses.get(s, 0) + 1
    wall = (time.perf_counter() - t0) * 1000 / len(qs)
    reader.close()
    owner.execute(
        psycopg.sql.SQL("ALTER DATABASE {} RESET track_functions").format(psycopg.sql.Identifier(dbname))
    )
    time.sleep(1.5)
    n = len(qs)
    rows = owner.execute(
        "SELECT calls, total_plan_time, total_exec_time, plans, query FROM pg_stat_statements "
        "WHERE dbid = %s AND query NOT LIKE '%%pg_stat_statements%%' ORDER BY total_exec_time DESC",
        (dbid,),
    ).fetchall()
    plan_all = sum(r[1] for r in rows)
    print(
        f"{n} asks ({'embedded in the database' if args.embed else 'embedding passed'}), client wall "
        f"{wall:.2f} ms per ask, statuses {dict(sorted(statuses.items()))}; planning of every statement "
        f"{plan_all / n:.3f} ms per ask over {sum(r[3] for r in rows) / n:.1f} plans per ask"
    )
    print("| calls / ask | plan ms / ask | exec ms / ask | exec ms / call | statement |")
    print("|---|---|---|---|---|")
    for calls, plan, ex, _plans, query in rows[: args.top]:
        q = " ".join(query.split())[: args.width].replace("|", "\\|")
        print(f"| {calls / n:.1f} | {plan / n:.3f} | {ex / n:.3f} | {ex / calls:.4f} | `{q}` |")
    print("by planning time:")
    for _calls, plan, ex, plans, query in sorted(rows, key=lambda r: -r[1])[: args.top // 2]:
        q = " ".join(query.split())[: args.width].replace("|", "\\|")
        print(f"| {plans / n:.1f} plans | {plan / n:.3f} | {ex / n:.3f} | `{q}` |")

    print("functions (track_functions = all): self time excludes the functions each calls")
    print("| function | calls / ask | total ms / ask | self ms / ask |")
    print("|---|---|---|---|")
    for name, calls, total, self_ in owner.execute(
        "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions WHERE schemaname = 'rag' "
        "ORDER BY self_time DESC"
    ).fetchall()[: args.top]:
        print(f"| `rag.{name}` | {calls / n:.1f} | {total / n:.3f} | {self_ / n:.3f} |")


if __name__ == "__main__":
    main()
