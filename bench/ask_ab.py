"""Before and after, side by side in one run: rag.retrieve and rag.ask of two sql/core versions, alternated.

    # the scale benchmark's database (pgcite_bench.question), the SQL already loaded:
    BENCH_DB=pgcite_bench_1m .venv/bin/python bench/ask_ab.py LABEL [--per-class 20]
    # two versions alternated (each block of questions asked with A, then B, then B, then A, ...):
    BENCH_DB=pgcite_bench_100k .venv/bin/python bench/ask_ab.py LABEL --old OLD_DIR [--new sql/core]
    # the dev set (eval/pgdocs-dev.jsonl and --offtopic questions of eval/offtopic.jsonl) of one tenant:
    .venv/bin/python bench/ask_ab.py LABEL --dev --dsn 'host=... dbname=pgcite_quotes user=postgres' \\
        --reader h10b_reader --tenant pgdocs --old OLD_DIR

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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
