"""Before and after, side by side in one run: rag.retrieve and rag.ask of two sql/core versions, alternated.

    # the scale benchmark's database (pgcite_bench.question), the SQL already loaded:
    BENCH_DB=pgcite_bench_1m .venv/bin/python bench/ask_ab.py LABEL [--per-class 20]
    # two versions alternated (each block of questions asked with A, then B, then B, then A, ...):
    BENCH_DB=pgcite_bench_100k .venv/bin/python bench/ask_ab.py LABEL --old OLD_DIR [--new sql/core]
    # the dev set (eval/pgdocs-dev.jsonl and --offtopic questions of eval/offtopic.jsonl) of one tenant:
    .venv/bin/python bench/ask_ab.py LABEL --dev --dsn 'host=... dbname=pgcite_quotes user=postgres' \\
        --reader h10b_reader --tenant pgdocs --old OLD_DIR
    # paired: OLD_DIR in the database, NEW_DIR in a copy of it, the two asked in turn for every question:
    .venv/bin/python bench/ask_ab.py LABEL --dev --dsn ... --old OLD_DIR --copy pgcite_quotes_b [--rounds 3]

As the reader (pgcite_bench_reader, or --reader), for each question (after three warm-up asks on every new
connection): rag.retrieve (k 8 on the scale database, 5 on the dev set; the question's embedding passed),
rag.ask with the embedding passed (`ask+qemb`, k 5) and rag.ask embedding it in the database (`ask`, k 5; not
with --no-embed, e.g. a database without pgcite_python), each once. With --old, OLD_DIR's and NEW_DIR's
sql/core/*.sql files are run over the database (a superuser's connection, as an upgrade runs them) before each
block of --block questions, in the order A B B A A B ..., and each block is asked on a fresh reader
connection, so both versions see the same load on this shared machine. Prints p50 / p95 per class and call for
each version,
the after / before ratio of the p50s, `ask+qemb - retrieve` (what rag.ask costs beyond retrieval, p50 of the
per-question differences), and the statuses of rag.ask per version. The database keeps NEW_DIR's version.

With --copy DBNAME (and --old): the database is copied to DBNAME (CREATE DATABASE ... TEMPLATE; dropped and
made again if it exists, dropped at the end unless --keep-copy), OLD_DIR's files are run over the database
and NEW_DIR's over the copy, once, and one reader connection to each asks every question in turn (before
then after for one question, after then before for the next), --rounds times over the questions: the two
versions share every moment of the machine's load, and no plan is invalidated between the blocks. Besides
the p50 / p95 of each version it prints, per class and call, the median of the paired differences (after -
before, ms, one per question and round) and the share of the pairs in which after was faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
import psycopg.sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def load_sql(conn: psycopg.Connection, sql_dir: Path) -> None:
    with conn.transaction():
        for f in sorted(sql_dir.glob("*.sql")):
            conn.execute(f.read_text())


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


def dev_questions(owner: psycopg.Connection, tenant: str, offtopic: int) -> list[tuple]:
    rows = []
    for file, limit in (("pgdocs-dev.jsonl", None), ("offtopic.jsonl", offtopic)):
        qs = [json.loads(x) for x in (ROOT / "eval" / file).read_text().splitlines() if x.strip()][:limit]
        cls = "dev" if file.startswith("pgdocs") else "offtopic"
        rows += [(cls, tenant, q["question"]) for q in qs]
    # the embedding rag.ask computes: of the typo-corrected question when a word was corrected
    out = []
    for cls, t, q in rows:
        e = owner.execute(
            "SELECT rag.embed(rag._embedding_text(%s, rag._correct_question(%s, %s, rag._params())))::text",
            (q, t, q),
        ).fetchone()[0]
        out.append((cls, t, q, e))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("label")
    ap.add_argument("--per-class", type=int, default=20)
    ap.add_argument("--old", help="sql/core directory of the version before (alternated with --new)")
    ap.add_argument("--new", default=str(ROOT / "sql/core"))
    ap.add_argument("--block", type=int, default=10, help="questions per block of one version")
    ap.add_argument(
        "--dev", action="store_true", help="the dev set of --tenant instead of pgcite_bench.question"
    )
    ap.add_argument(
        "--dsn", default=None, help="superuser DSN of the database (default: BENCH_DB on the cluster)"
    )
    ap.add_argument("--reader", default=corpus.READER)
    ap.add_argument("--tenant", default="pgdocs")
    ap.add_argument("--offtopic", type=int, default=40)
    ap.add_argument("--no-embed", action="store_true", help="no rag.ask embedding in the database")
    ap.add_argument("--embed-dsn", help="where the dev set's questions are embedded (default: --dsn)")
    ap.add_argument(
        "--copy", metavar="DBNAME", help="paired: --new in this copy of the database, --old in it"
    )
    ap.add_argument("--rounds", type=int, default=1, help="with --copy: times every question is asked")
    ap.add_argument("--keep-copy", action="store_true", help="with --copy: do not drop the copy at the end")
    ap.add_argument(
        "--functions",
        action="store_true",
        help="with --copy: track_functions = 'all' in both databases, each ask+qemb in a transaction that "
        "reads its functions' total times (pg_stat_xact_user_functions): FUNCTIONS paired too",
    )
    args = ap.parse_args()
    if args.copy and not args.old:
        ap.error("--copy needs --old")
    dsn = args.dsn or corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench")
    owner = psycopg.connect(dsn, autocommit=True)
    if args.dev:
        with psycopg.connect(args.embed_dsn or dsn, autocommit=True) as e:
            qs = dev_questions(e, args.tenant, args.offtopic)
        k_retrieve = 5
    else:
        qs = owner.execute(
            "SELECT class, tenant, question, qemb::text FROM (SELECT *, row_number() OVER "
            "(PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q WHERE n <= %s "
            "ORDER BY class, id",
            (args.per_class,),
        ).fetchall()
        k_retrieve = 8
    calls = [
        ("retrieve", f"SELECT count(*) FROM rag.retrieve(%s, %s, {k_retrieve}, %s::vector)", True),
        ("ask+qemb", "SELECT status FROM rag.ask(%s, %s, 5, %s::vector)", True),
    ]
    if not args.no_embed:
        calls.append(("ask", "SELECT status FROM rag.ask(%s, %s, 5)", False))
    if args.copy:
        owner.close()
        paired(args, dsn, qs, k_retrieve)
        return
    versions = [("before", args.old), ("after", args.new)] if args.old else [(args.label, None)]
    ms: dict[tuple[str, str, str], list[float]] = {}
    beyond: dict[tuple[str, str], list[float]] = {}
    statuses: dict[tuple[str, str], dict[str, int]] = {}
    blocks = [qs[i : i + args.block] for i in range(0, len(qs), args.block)] if args.old else [qs]
    reader_dsn = psycopg.conninfo.make_conninfo(dsn, user=args.reader)
    for b, block in enumerate(blocks):
        order = versions if b % 2 == 0 else versions[::-1]
        for name, sql_dir in order:
            if sql_dir:
                load_sql(owner, Path(sql_dir))
            with psycopg.connect(reader_dsn, autocommit=True) as c:
                for _cls, tenant, question, qemb in qs[:3]:
                    c.execute("SELECT status FROM rag.ask(%s, %s, 5, %s::vector)", (question, tenant, qemb))
                    if not args.no_embed:  # the first in-database embedding of a backend loads the model
                        c.execute("SELECT status FROM rag.ask(%s, %s, 5)", (question, tenant))
                for cls, tenant, question, qemb in block:
                    got = {}
                    for call, sql, with_qemb in calls:
                        params = (question, tenant, qemb) if with_qemb else (question, tenant)
                        t0 = time.perf_counter()
                        got[call] = c.execute(sql, params).fetchone()[0]
                        got[call + " ms"] = (time.perf_counter() - t0) * 1000
                        ms.setdefault((cls, call, name), []).append(got[call + " ms"])
                    beyond.setdefault((cls, name), []).append(got["ask+qemb ms"] - got["retrieve ms"])
                    s = statuses.setdefault((cls, name), {})
                    s[got["ask+qemb"]] = s.get(got["ask+qemb"], 0) + 1
    if args.old:
        load_sql(owner, Path(args.new))  # the database keeps the version after
    names = [n for n, _ in versions]
    classes = sorted({k[0] for k in ms})
    head = " | ".join(f"{n} p50 / p95 ms" for n in names)
    print(f"{args.label}: {len(qs)} questions" + (f", blocks of {args.block} alternated" if args.old else ""))
    print(f"| class | call | {head} |" + (" after / before p50 |" if args.old else ""))
    print("|---|---|" + "---|" * len(names) + ("---|" if args.old else ""))
    for cls in classes:
        rows = [call for call, _, _ in calls] + ["ask+qemb - retrieve"]
        for call in rows:
            vals = [
                beyond[(cls, n)] if call.endswith("retrieve") and call != "retrieve" else ms[(cls, call, n)]
                for n in names
            ]
            cells = " | ".join(f"{statistics.median(v):.2f} / {pct(v, 0.95):.2f}" for v in vals)
            ratio = f" {statistics.median(vals[1]) / statistics.median(vals[0]):.3f} |" if args.old else ""
            print(f"| {cls} | `{call}` | {cells} |{ratio}")
    for (cls, n), s in sorted(statuses.items()):
        print(f"{args.label} {cls} {n}: ask+qemb statuses {dict(sorted(s.items()))}")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "–"


def calls_of(k_retrieve: int, no_embed: bool) -> list[tuple[str, str, bool]]:
    calls = [
        ("retrieve", f"SELECT count(*) FROM rag.retrieve(%s, %s, {k_retrieve}, %s::vector)", True),
        ("ask+qemb", "SELECT status FROM rag.ask(%s, %s, 5, %s::vector)", True),
    ]
    if not no_embed:
        calls.append(("ask", "SELECT status FROM rag.ask(%s, %s, 5)", False))
    return calls


# --functions: stages read from pg_stat_xact_user_functions (total time, nested calls included, summed over a
# function's calls in one ask)
FUNCTIONS = {
    "quote choice (rag._choose_quotes)": ("_choose_quotes",),
    "span scores, all calls (rag._sentence_scores)": ("_sentence_scores",),
    "lower chunks' bound (rag._may_score_at_least)": ("_may_score_at_least",),
    "coverage (rag._coverage)": ("_coverage",),
    "section chunks (rag._section_chunks)": ("_section_chunks",),
    "whole rag._answer": ("_answer",),
}


def timed_calls(
    c: psycopg.Connection, calls, tenant: str, question: str, qemb: str, functions: bool = False
) -> dict:
    got = {}
    for call, sql, with_qemb in calls:
        params = (question, tenant, qemb) if with_qemb else (question, tenant)
        if functions and call == "ask+qemb":
            # the pending function counters of the backend are read before and after the ask in one
            # transaction (they are flushed only between transactions, so they may hold earlier asks too)
            stats = "SELECT funcname, total_time FROM pg_stat_xact_user_functions WHERE schemaname = 'rag'"
            with c.transaction():
                before = dict(c.execute(stats).fetchall())
                t0 = time.perf_counter()
                got[call] = c.execute(sql, params).fetchone()[0]
                got[call + " ms"] = (time.perf_counter() - t0) * 1000
                after = dict(c.execute(stats).fetchall())
            for name, funcs in FUNCTIONS.items():
                got[name + " ms"] = sum(after.get(f, 0.0) - before.get(f, 0.0) for f in funcs)
            continue
        t0 = time.perf_counter()
        got[call] = c.execute(sql, params).fetchone()[0]
        got[call + " ms"] = (time.perf_counter() - t0) * 1000
    got["ask+qemb - retrieve ms"] = got["ask+qemb ms"] - got["retrieve ms"]
    return got


def paired(args: argparse.Namespace, dsn: str, qs: list[tuple], k_retrieve: int) -> None:
    """--copy: before in the database, after in its copy, asked in turn for each question."""
    src = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    admin_dsn = psycopg.conninfo.make_conninfo(dsn, dbname="postgres")
    ident = psycopg.sql.Identifier
    with psycopg.connect(admin_dsn, autocommit=True) as a:
        a.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident(args.copy)))
        a.execute(psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(ident(args.copy), ident(src)))
    copy_dsn = psycopg.conninfo.make_conninfo(dsn, dbname=args.copy)
    for d, sql_dir in ((dsn, args.old), (copy_dsn, args.new)):
        with psycopg.connect(d, autocommit=True) as o:
            load_sql(o, Path(sql_dir))
            if args.functions:
                o.execute(
                    psycopg.sql.SQL("ALTER DATABASE {} SET track_functions = 'all'").format(
                        ident(psycopg.conninfo.conninfo_to_dict(d)["dbname"])
                    )
                )
    calls = calls_of(k_retrieve, args.no_embed)
    rows = [c for c, _, _ in calls] + ["ask+qemb - retrieve"] + (list(FUNCTIONS) if args.functions else [])
    names = ("before", "after")
    ms: dict[tuple[str, str, str], list[float]] = {}
    diff: dict[tuple[str, str], list[float]] = {}
    statuses: dict[tuple[str, str], dict[str, int]] = {}
    differ = 0
    conns = [
        psycopg.connect(psycopg.conninfo.make_conninfo(d, user=args.reader), autocommit=True)
        for d in (dsn, copy_dsn)
    ]
    try:
        for c in conns:
            for _cls, tenant, question, qemb in qs[:3]:
                timed_calls(c, calls, tenant, question, qemb, args.functions)
        n = 0
        for _round in range(args.rounds):
            for cls, tenant, question, qemb in qs:
                order = (0, 1) if n % 2 == 0 else (1, 0)
                n += 1
                got = {}
                for v in order:
                    got[v] = timed_calls(conns[v], calls, tenant, question, qemb, args.functions)
                if got[0]["ask+qemb"] != got[1]["ask+qemb"]:
                    differ += 1
                for call in rows:
                    for v in (0, 1):
                        ms.setdefault((cls, call, names[v]), []).append(got[v][call + " ms"])
                    diff.setdefault((cls, call), []).append(got[1][call + " ms"] - got[0][call + " ms"])
                for v in (0, 1):
                    s = statuses.setdefault((cls, names[v]), {})
                    s[got[v]["ask+qemb"]] = s.get(got[v]["ask+qemb"], 0) + 1
    finally:
        for c in conns:
            c.close()
        with psycopg.connect(dsn, autocommit=True) as o:
            load_sql(o, Path(args.new))  # the database keeps the version after
            for db in (
                (src, args.copy) if args.functions and args.keep_copy else (src,) if args.functions else ()
            ):
                o.execute(psycopg.sql.SQL("ALTER DATABASE {} RESET track_functions").format(ident(db)))
        if not args.keep_copy:
            with psycopg.connect(admin_dsn, autocommit=True) as a:
                a.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident(args.copy)))
    print(
        f"{args.label}: {len(qs)} questions x {args.rounds} rounds, paired (before: {src}, "
        f"after: {args.copy}; the order alternated per question)"
    )
    print(
        "| class | call | before p50 / p95 ms | after p50 / p95 ms | after / before p50 "
        "| median paired after - before ms | after faster |"
    )
    print("|---|---|---|---|---|---|---|")
    for cls in sorted({k[0] for k in ms}):
        for call in rows:
            b, a = ms[(cls, call, "before")], ms[(cls, call, "after")]
            d = diff[(cls, call)]
            print(
                f"| {cls} | `{call}` | {statistics.median(b):.2f} / {pct(b, 0.95):.2f} | "
                f"{statistics.median(a):.2f} / {pct(a, 0.95):.2f} | "
                f"{ratio(statistics.median(a), statistics.median(b))} | {statistics.median(d):+.2f} | "
                f"{sum(x < 0 for x in d) / len(d):.0%} |"
            )
    for (cls, n_), s in sorted(statuses.items()):
        print(f"{args.label} {cls} {n_}: ask+qemb statuses {dict(sorted(s.items()))}")
    print(f"{args.label}: ask+qemb status differs between the versions in {differ} pairs")


if __name__ == "__main__":
    main()
