"""Are two versions of rag._candidates the same function on the scale benchmark's questions?

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/candidates_same.py OLD.sql [NEW.sql]

Creates rag._candidates of each 040-retrieve.sql file as pg_temp._cand_a / pg_temp._cand_b (session only) and
compares every row and column they return (k 8's depth 40, each question corrected first, its stored
embedding) for every question of pgcite_bench.question, calling them alternately; prints the differing
questions
and the p50 / p95 of each per class. --all-tenants N: also N questions (of every class, in turn) asked of
every tenant of the corpus (each of its paths: own indexes, table-wide indexes, exact search), first round
only. --short N: also every tenant's short questions on its N titles heading the most chunks (common words,
titles shared by many chunks), in every round.
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

ROOT = Path(__file__).resolve().parent.parent


def candidates_source(path: str, name: str) -> str:
    src = Path(path).read_text()
    f = src[
        src.index("CREATE OR REPLACE FUNCTION rag._candidates(") : src.index(
            "COMMENT ON FUNCTION rag._candidates("
        )
    ]
    return f.replace("rag._candidates(", f"pg_temp.{name}(", 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=str(ROOT / "sql/core/040-retrieve.sql"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--all-tenants", type=int, default=0)
    ap.add_argument(
        "--collate-c",
        action="store_true",
        help='call with the text arguments collated "C", as the entry points do (they pass current_user)',
    )
    ap.add_argument(
        "--top",
        type=int,
        default=8,
        help="also count the questions whose first N fused chunks differ (rag.retrieve's rows at k N)",
    )
    ap.add_argument(
        "--short",
        type=int,
        default=0,
        metavar="N",
        help="also short questions of every tenant (timed in every round after the first, as --all-tenants' "
        "then are): 'What about the <title>?' for its N titles heading the most chunks (a common word of "
        "the tenant, a title shared by many of its chunks), with the embedding of a benchmark question",
    )
    args = ap.parse_args()
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    c.execute(candidates_source(args.old, "_cand_a"))
    c.execute(candidates_source(args.new, "_cand_b"))
    params = c.execute("SELECT rag._params()::text").fetchone()[0]
    qs = c.execute(
        "SELECT id, class, tenant, question, qemb::text FROM pgcite_bench.question ORDER BY id"
    ).fetchall()
    ms: dict[tuple[str, str], list[float]] = {}
    differ = []
    differ_top = []
    calls = rows = 0
    extra = []
    if args.all_tenants:
        tenants = [r[0] for r in c.execute("SELECT tenant FROM rag.tenant_stat ORDER BY tenant").fetchall()]
        pool = sorted(qs, key=lambda r: (r[0] % 7, r[0]))
        for i, t in enumerate(tenants):
            for j in range(args.all_tenants):
                qid, _, _, question, qemb = pool[(i * args.all_tenants + j) % len(pool)]
                extra.append((qid, "all", t, question, qemb))
    if args.short:
        qemb0 = qs[0][4]
        sizes = c.execute("SELECT tenant, live_chunks FROM rag.tenant_stat ORDER BY tenant").fetchall()
        for t, n in sizes:
            bucket = "short>=100k" if n >= 100000 else "short>=10k" if n >= 10000 else "short<10k"
            for (title,) in c.execute(
                "SELECT title FROM rag.tenant_title WHERE tenant = %s AND live_chunks > 0 "
                "ORDER BY live_chunks DESC, title LIMIT %s",
                (t, args.short),
            ).fetchall():
                # the id alternates which version runs first (the second finds the question's pages cached)
                extra.append((len(extra), bucket, t, f"What about the {title}?", qemb0))
    coll = ' COLLATE "C"' if args.collate_c else ""
    for rnd in range(args.rounds):
        for qid, cls, tenant, question, qemb in qs + (extra if rnd == 0 or args.short else []):
            corr = c.execute(
                "SELECT rag._correct_question(%s, %s, %s::jsonb)", (tenant, question, params)
            ).fetchone()[0]
            got = {}
            for name in ("_cand_a", "_cand_b") if qid % 2 else ("_cand_b", "_cand_a"):
                t0 = time.perf_counter()
                got[name] = c.execute(
                    f"SELECT * FROM pg_temp.{name}(%s{coll}, %s, %s::vector, 40, %s::jsonb)",
                    (tenant, corr, qemb, params),
                ).fetchall()
                if rnd:
                    ms.setdefault((cls, name), []).append((time.perf_counter() - t0) * 1000)
            if rnd == 0:
                calls += 1
                rows += len(got["_cand_a"])
                if got["_cand_a"] != got["_cand_b"]:
                    differ.append((tenant, qid))
                    top_a, top_b = ([r[1] for r in got[n][: args.top]] for n in ("_cand_a", "_cand_b"))
                    if top_a != top_b:
                        differ_top.append((tenant, qid))
    print(
        f"{len(qs)} questions + {len(extra)} asked of every tenant (--all-tenants, --short): {calls} calls, "
        f"{rows} rows each version, "
        f"{len(differ)} differ: {differ[:20]}; in their first {args.top} fused chunks: {len(differ_top)} "
        f"{differ_top[:20]}"
    )
    for (cls, name), v in sorted(ms.items()):
        s = sorted(v)
        print(f"{cls:<8} {name}  p50 {statistics.median(s):6.1f}  p95 {s[int(len(s) * 0.95)]:6.1f} ms")


if __name__ == "__main__":
    main()
