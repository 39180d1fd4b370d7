"""Recall@10 of the vector leg per question and the ANN query's time over a grid of pgvector settings.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/ann_grid.py \
        [--grid 800:400:relaxed_order:20000,400:800:relaxed_order:20000,...] [--classes largest,1%] \
        [--rounds 2] [--below 0.99]

A setting is ef_search:limit:iterative_scan:max_scan_tuples (iterative_scan off, relaxed_order or
strict_order). For each question of the classes: rag._candidates's ANN query (the tenant's own partial HNSW
index when it has one, else the table's, LIMIT `limit`), its candidates ordered by their exact distance as the
leg does (rounded to 6 places, then doc_key, chunk_index, chunk_id) and the best 10 compared with the
question's exact top 10 (pgcite_bench.question.gt_ids). "tie-aware" also counts a returned chunk whose exact
distance equals the 10th true distance (to 6 places): a top 10 that differs from gt_ids only in which of the
equidistant chunks it holds misses nothing. Prints per class and setting the mean and minimum recall, how
many questions fall under --below, and the ANN query's p50 / p95 (the settings alternate question by question
in every round, in an order rotated per question, so they share the machine's load and the cold pages; latency
from round 2 on), then the questions under --below
for the first setting with their true distances at ranks 1, 10 and 11.
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

DEFAULT_GRID = "800:400:relaxed_order:20000"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", default=DEFAULT_GRID)
    ap.add_argument("--classes", default="largest,1%")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--below", type=float, default=0.99)
    args = ap.parse_args()
    grid = []
    for s in args.grid.split(","):
        ef, lim, mode, mx = s.split(":")
        grid.append((int(ef), int(lim), mode, int(mx)))
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    c.execute("SET jit = off")
    c.execute("SET max_parallel_workers_per_gather = 0")
    c.execute("SET hnsw.scan_mem_multiplier = 1")
    qs = c.execute(
        "SELECT id, class, tenant, qemb::text, gt_ids[1:10], gt_dist[1:11] FROM pgcite_bench.question "
        "WHERE class = ANY (%s) ORDER BY id",
        (args.classes.split(","),),
    ).fetchall()
    recall: dict[tuple, dict[int, float]] = {}
    tie: dict[tuple, dict[int, float]] = {}
    ms: dict[tuple, list[float]] = {}
    n_ids: dict[tuple, list[int]] = {}
    for rnd in range(args.rounds):
        for i, (qid, cls, tenant, qemb, gt, _gd) in enumerate(qs):
            # the 10th true distance, rounded as the leg rounds (the harness's gt_dist is unrounded)
            d10 = c.execute(
                "SELECT round((embedding OPERATOR(public.<=>) %s::vector)::numeric, 6)::float8 "
                "FROM rag.chunk WHERE chunk_id = %s",
                (qemb, gt[-1]),
            ).fetchone()[0]
            # the settings in a rotated order, so none is always the first to touch a question's pages
            for s in grid[i % len(grid) :] + grid[: i % len(grid)]:
                ef, lim, mode, mx = s
                c.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
                c.execute(sql.SQL("SET hnsw.iterative_scan = {}").format(sql.Literal(mode)))
                c.execute(sql.SQL("SET hnsw.max_scan_tuples = {}").format(sql.Literal(mx)))
                ids, dt = ann_search(c, tenant, qemb, lim)
                top = exact_top10(c, ids, qemb)
                key = (cls, s)
                recall.setdefault(key, {})[qid] = len({t[0] for t in top} & set(gt)) / max(1, len(gt))
                tie.setdefault(key, {})[qid] = min(
                    1.0, sum(1 for t in top if t[0] in gt or t[1] <= d10) / max(1, len(gt))
                )
                n_ids.setdefault(key, []).append(len(ids or []))
                if rnd:
                    ms.setdefault(key, []).append(dt)
    classes = args.classes.split(",")
    for cls in classes:
        for s in grid:
            key = (cls, s)
            if key not in recall:
                continue
            v = list(recall[key].values())
            w = list(tie[key].values())
            t = sorted(ms.get(key) or [0.0])
            print(
                f"{cls:<8} ef {s[0]:4} limit {s[1]:5} {s[2]:<13} max {s[3]:6}  recall@10 mean "
                f"{statistics.mean(v):.4f} min {min(v):.2f} under {args.below}: "
                f"{sum(x < args.below for x in v):3}/{len(v)}  tie-aware mean {statistics.mean(w):.4f} "
                f"min {min(w):.2f} under: {sum(x < args.below for x in w):3}  rows {min(n_ids[key])}-"
                f"{max(n_ids[key])}  ANN p50 {statistics.median(t):6.2f} p95 {t[int(len(t) * 0.95)]:6.2f} ms",
                flush=True,
            )
    first = grid[0]
    print(f"\nquestions under {args.below} at {first}:")
    for qid, cls, tenant, _qemb, _gt, gd in qs:
        r = recall[(cls, first)][qid]
        if r < args.below:
            print(
                f"  q{qid:<4} {cls:<8} {tenant:<8} recall {r:.2f} tie-aware {tie[(cls, first)][qid]:.2f}  "
                f"true d@1 {gd[0]:.6f} d@10 {gd[9]:.6f} d@11 {gd[10] if len(gd) > 10 else float('nan'):.6f}"
            )


if __name__ == "__main__":
    main()
