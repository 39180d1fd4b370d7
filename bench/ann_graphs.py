"""Two HNSW graphs of one tenant compared paired: recall@10 and the ANN query's time over ef_search:rows.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/ann_graphs.py \
        --a rag.chunk_hnsw_<default> --b rag.chunk_hnsw_<denser> [--grid 800:1200,600:900] [--class largest]

Both indexes must exist with the same predicate (build the second by hand, e.g. WITH (ef_construction = 200)).
--a and --b may each be a comma-separated list (one index per tenant of a class, e.g. the ten 1 % tenants):
each connection then sees only its own list.
Two connections, each in a transaction it never commits that marks the other index invalid in pg_index (as the
superuser), so each plans with one graph only; every setting runs on both connections for every question in an
order rotated per question, two rounds (latency from the second). hnsw.iterative_scan = relaxed_order and
max_scan_tuples 20000, as rag._candidates pins them; recall against pgcite_bench.question.gt_ids.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
from common import ann_search, exact_top10  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the first index (schema-qualified), or a comma list")
    ap.add_argument("--b", required=True, help="the second index, or a comma list")
    ap.add_argument("--grid", default="800:1200,600:900,400:600,300:450")
    ap.add_argument("--class", dest="cls", default="largest")
    args = ap.parse_args()
    grid = [tuple(int(x) for x in g.split(":")) for g in args.grid.split(",")]
    dsn = corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench")
    conns = {}
    for name, hide in ((args.a, args.b), (args.b, args.a)):
        c = psycopg.connect(dsn)
        c.execute("SET jit = off")
        c.execute("SET max_parallel_workers_per_gather = 0")
        c.execute("SET hnsw.iterative_scan = relaxed_order")
        c.execute("SET hnsw.max_scan_tuples = 20000")
        c.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = ANY(%s::regclass[])",
            (hide.split(","),),
        )
        conns[name] = c
    qs = (
        conns[args.a]
        .execute(
            "SELECT id, tenant, qemb::text, gt_ids[1:10] FROM pgcite_bench.question "
            "WHERE class = %s ORDER BY id",
            (args.cls,),
        )
        .fetchall()
    )
    res: dict[tuple, dict] = {}
    for rnd in range(2):
        for i, (qid, tenant, qemb, gt) in enumerate(qs):
            order = [(n, g) for n in conns for g in grid]
            k = i % len(order)
            for name, (ef, rows) in order[k:] + order[:k]:
                c = conns[name]
                c.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
                ids, ms = ann_search(c, tenant, qemb, rows)
                top = exact_top10(c, ids, qemb)
                r = res.setdefault((name, ef, rows), {"recall": {}, "ms": []})
                r["recall"][qid] = len({t[0] for t in top} & set(gt)) / 10
                if rnd:
                    r["ms"].append(ms)
    for (name, ef, rows), r in sorted(res.items()):
        rec, ms = list(r["recall"].values()), sorted(r["ms"])
        print(
            f"{name:40s} ef {ef:4d} rows {rows:5d}  recall@10 mean {statistics.mean(rec):.3f} "
            f"min {min(rec):.2f} under 0.99: {sum(x < 0.99 for x in rec):2d}  "
            f"ANN p50 {statistics.median(ms):6.2f} p95 {ms[max(0, int(0.95 * len(ms)) - 1)]:6.2f} ms"
        )
    for c in conns.values():
        c.rollback()


if __name__ == "__main__":
    main()
