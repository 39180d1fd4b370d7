"""Quote choice's helpers timed on the arguments of real asks: capture once, then time versions by CPU time.

    # 1. capture: a copy of the database (dropped and made again) whose rag._choose_quotes,
    #    rag._sentence_scores and rag._coverage log their arguments (RAISE LOG), the dev set asked there as
    #    the reader (embedding passed), the arguments read back from the server's log file (--log: where this
    #    cluster's stderr goes) into tables cap.cq, cap.ss and cap.cv of the copy; then the copy's functions
    #    are this checkout's again
    .venv/bin/python bench/captured_calls.py capture --dsn 'host=... dbname=pgcite_quotes user=postgres' \\
        --copy pgcite_cap --reader q16_reader --tenant pgdocs --log /var/tmp/q16/pg.log
    # 2. time: each function over every captured call, in one session per database, the versions
    #    interleaved (another version: CREATE DATABASE b TEMPLATE pgcite_cap, then its sql/core files over b):
    .venv/bin/python bench/captured_calls.py time --dsn 'host=... user=postgres' --db pgcite_cap --db b \\
        --runs 6

Issue #10, session 16: on a machine shared with other work, wall time of the same asks varied by up to 2x;
the CPU time of the backend (/proc/PID/schedstat, the server on this machine) of one function over all
captured calls varies by ~5 %, enough to see a cut of a few percent. Regular expressions stay compiled across
the calls of one run: this times execution, not the compilations an ask pays when patterns fall out of the
backend's cache (bench/regex_misses.py counts those). Prints per function and database the md5 of all
outputs (equal md5: the same results) and the minimum and median CPU ms over --runs runs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

import psycopg
import psycopg.sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ask_ab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# function -> (table, the jsonb of its arguments, its call over cap.<table>.a)
TARGETS = {
    "rag._choose_quotes": (
        "cq",
        "pg_catalog.jsonb_build_object('q', p_question, 'c', p_corrected, 'ids', p_ids, 'sc', p_scored, "
        "'mq', p_max_quotes, 'm', p_margin, 'rp', p_rank_penalty)",
        "rag._choose_quotes(a->>'q', a->>'c', ARRAY(SELECT jsonb_array_elements_text(a->'ids'))::bigint[], "
        "a->'sc', (a->>'mq')::integer, (a->>'m')::float8, (a->>'rp')::float8)",
    ),
    "rag._sentence_scores": (
        "ss",
        "pg_catalog.jsonb_build_object('q', p_question, 'e', p_qemb::text, 'ids', p_ids, "
        "'tw', p_term_weights)",
        "rag._sentence_scores(a->>'q', (a->>'e')::vector, "
        "ARRAY(SELECT jsonb_array_elements_text(a->'ids'))::bigint[], a->'tw')",
    ),
    "rag._coverage": (
        "cv",
        "pg_catalog.jsonb_build_object('t', p_tenant, 'cfg', p_config::text, 'c', p_corrected, 'ids', p_ids, "
        "'l', p_live)",
        "rag._coverage(a->>'t', (a->>'cfg')::regconfig, a->>'c', "
        "ARRAY(SELECT jsonb_array_elements_text(a->'ids'))::bigint[], (a->>'l')::bigint)",
    ),
}


def logging_sql(sql_dir: Path) -> list[str]:
    """sql_dir's files, each target function's body opening with a RAISE LOG of its arguments."""
    out = []
    for f in sorted(sql_dir.glob("*.sql")):
        text = f.read_text()
        for fn, (tab, args, _call) in TARGETS.items():
            i = text.find(f"CREATE OR REPLACE FUNCTION {fn}(")
            if i >= 0:
                j = text.index("\nBEGIN\n", i) + len("\nBEGIN\n")
                text = text[:j] + f"    RAISE LOG 'CAP{tab} %', {args};\n" + text[j:]
        out.append(text)
    return out


def capture(args: argparse.Namespace) -> None:
    owner = psycopg.connect(args.dsn, autocommit=True)
    db = owner.execute("SELECT current_database()").fetchone()[0]
    qs = ask_ab.dev_questions(owner, args.tenant, args.offtopic)
    owner.close()
    admin = psycopg.connect(psycopg.conninfo.make_conninfo(args.dsn, dbname="postgres"), autocommit=True)
    ident = psycopg.sql.Identifier
    admin.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident(args.copy)))
    admin.execute(psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(ident(args.copy), ident(db)))
    admin.close()
    copy_dsn = psycopg.conninfo.make_conninfo(args.dsn, dbname=args.copy)
    sql_dir = Path(args.sql)
    with psycopg.connect(copy_dsn, autocommit=True) as c:
        for text in logging_sql(sql_dir):
            c.execute(text)
    start = Path(args.log).stat().st_size
    with psycopg.connect(psycopg.conninfo.make_conninfo(copy_dsn, user=args.reader), autocommit=True) as r:
        for _cls, tenant, question, qemb in qs:
            r.execute("SELECT status FROM rag.ask(%s, %s, 5, %s::vector)", (question, tenant, qemb))
    with open(args.log, encoding="utf-8", errors="replace") as f:
        f.seek(start)
        log = f.read()
    with psycopg.connect(copy_dsn, autocommit=True) as c:
        c.execute("CREATE SCHEMA IF NOT EXISTS cap")
        for tab, _args, _call in TARGETS.values():
            rows = re.findall(rf"LOG:  CAP{tab} (\{{.*\}})$", log, re.M)
            c.execute(f"DROP TABLE IF EXISTS cap.{tab}")
            c.execute(f"CREATE TABLE cap.{tab} (n serial PRIMARY KEY, a jsonb)")
            with c.cursor().copy(f"COPY cap.{tab} (a) FROM STDIN") as cp:
                for x in rows:
                    cp.write_row((x,))
            print(f"cap.{tab}: {len(rows)} calls")
        with c.transaction():
            for f in sorted(sql_dir.glob("*.sql")):
                c.execute(f.read_text())
        c.execute("SELECT rag._apply_grants()")


def time_versions(args: argparse.Namespace) -> None:
    conns = {}
    for db in args.db:
        c = psycopg.connect(psycopg.conninfo.make_conninfo(args.dsn, dbname=db), autocommit=True)
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        conns[db] = (c, pid)

    def cpu_ns(pid: int) -> int:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])

    for fn, (tab, _args, call) in TARGETS.items():
        q = f"SELECT md5(string_agg(({call})::text, '|' ORDER BY n)) FROM cap.{tab}"
        times: dict[str, list[float]] = {db: [] for db in args.db}
        md5 = {}
        for run in range(args.runs + 1):  # run 0 warms up
            for db, (c, pid) in conns.items():
                t = cpu_ns(pid)
                md5[db] = c.execute(q).fetchone()[0]
                if run:
                    times[db].append((cpu_ns(pid) - t) / 1e6)
        n = conns[args.db[0]][0].execute(f"SELECT count(*) FROM cap.{tab}").fetchone()[0]
        for db in args.db:
            print(
                f"{fn} ({n} calls) {db}: md5 {md5[db][:12]}, CPU min {min(times[db]):.1f} ms, "
                f"median {statistics.median(times[db]):.1f} ms"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    cp = sub.add_parser("capture")
    cp.add_argument("--dsn", required=True, help="superuser DSN of the database to copy")
    cp.add_argument("--copy", default="pgcite_cap")
    cp.add_argument("--reader", default="pgcite_bench_reader")
    cp.add_argument("--tenant", default="pgdocs")
    cp.add_argument("--offtopic", type=int, default=40)
    cp.add_argument("--log", required=True, help="the server's log file (RAISE LOG lines go there)")
    cp.add_argument("--sql", default=str(ROOT / "sql/core"), help="sql/core files to log with and keep")
    tp = sub.add_parser("time")
    tp.add_argument("--dsn", required=True, help="superuser DSN (its dbname is replaced by each --db)")
    tp.add_argument("--db", action="append", required=True, help="a database holding cap.* (repeat)")
    tp.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()
    if args.cmd == "capture":
        capture(args)
    else:
        time_versions(args)


if __name__ == "__main__":
    main()
