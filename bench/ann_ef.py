"""Recall@10 of the vector leg and the ANN query's time at several hnsw.ef_search values.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/ann_ef.py [--ef 800,600,400,300,200]
        [--classes largest,1%] [--rounds 2] [--without-index NAME]

For each question of the given classes: the ANN query of rag._candidates (the tenant's own partial HNSW index
when it has one, iterative scan relaxed_order, LIMIT ef / 2), its candidates re-scored exactly and the best 10
compared with the question's exact top 10 (pgcite_bench.question.gt_ids). Prints, per class and ef, the mean
and the minimum recall@10 over the questions, how many fall under 0.99, and the ANN query's p50 / p95
(the ef values alternate question by question, so they share the machine's load). --rows-factor F
fetches F x ef rows; --rows-rule what rag._candidates fetches (rag._ann_rows: 1.5 x ef through the own index
of a tenant of over 100,000 chunks); --probes prints the curve rag._tune_ann measured on each tenant's probe
sentences, to compare. --misses lists each question under 0.99 at some ef with its recall at every ef, its
exact nearest and 10th distances, and its place among its class's questions by two signals a rule could read
before searching again (the exact nearest distance, farthest first, and the relative contrast of the ANN's
rows at the first ef, the farthest fetched distance over the nearest, lowest first): a signal that picks out
the misses in its first few places would let a second, deeper search run for those questions only.
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
from common import ann_search  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ef", default="800,600,400,300,200")
    ap.add_argument("--classes", default="largest,1%")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--rows-rule",
        action="store_true",
        help="fetch rag._ann_rows(live, ef, own index) rows, as rag._candidates does (else ef / 2)",
    )
    ap.add_argument(
        "--rows-factor",
        type=float,
        help="fetch this many times ef_search rows (e.g. 1 or 2), instead of ef / 2 or --rows-rule",
    )
    ap.add_argument(
        "--probes",
        action="store_true",
        help="also print each tenant's curve measured on its probes by rag._tune_ann (rag.tenant_ann)",
    )
    ap.add_argument(
        "--misses",
        action="store_true",
        help="list the questions under 0.99, with their distances and how two signals rank them",
    )
    ap.add_argument(
        "--without-index",
        help="an index to drop for this run, in a transaction rolled back at the end (two HNSW builds)",
    )
    args = ap.parse_args()
    efs = [int(x) for x in args.ef.split(",")]
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    if args.without_index:
        c.execute("BEGIN")
        c.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier("rag", args.without_index)))
    c.execute("SET jit = off")
    c.execute("SET max_parallel_workers_per_gather = 0")
    c.execute("SET hnsw.iterative_scan = relaxed_order")
    qs = c.execute(
        "SELECT class, tenant, qemb::text, gt_ids[1:10], id, gt_dist[1], gt_dist[10] "
        "FROM pgcite_bench.question WHERE class = ANY (%s) ORDER BY id",
        (args.classes.split(","),),
    ).fetchall()
    rows: dict[tuple[str, int], int] = {}
    for tenant in sorted({q[1] for q in qs}):
        live, own = c.execute(
            "SELECT rag._live_chunks(%s), to_regclass('rag.' || rag._tenant_index_name(%s)) IS NOT NULL",
            (tenant, tenant),
        ).fetchone()
        for ef in efs:
            if args.rows_factor:
                rows[tenant, ef] = round(args.rows_factor * ef)
            elif args.rows_rule:
                got = c.execute("SELECT rag._ann_rows(%s, %s, %s)", (live, ef, own)).fetchone()
                rows[tenant, ef] = got[0]
            else:
                rows[tenant, ef] = ef // 2
    recall: dict[tuple[str, int], list[float]] = {}
    ms: dict[tuple[str, int], list[float]] = {}
    # per question (--misses): recall at each ef, and the relative contrast of the ANN's rows at the first ef
    by_q: dict[int, dict[int, float]] = {}
    contrast: dict[int, float] = {}
    for rnd in range(args.rounds):
        for cls, tenant, qemb, gt, qid, _d1, _d10 in qs:
            for ef in efs:
                c.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
                ids, dt = ann_search(c, tenant, qemb, rows[tenant, ef])
                top = [
                    r[0]
                    for r in c.execute(
                        "SELECT chunk_id FROM rag.chunk WHERE chunk_id = ANY (%s) "
                        "ORDER BY round((embedding OPERATOR(public.<=>) %s::vector)::numeric, 6), doc_key, "
                        "chunk_index, chunk_id LIMIT 10",
                        (ids or [], qemb),
                    )
                ]
                if rnd == args.rounds - 1:
                    recall.setdefault((cls, ef), []).append(len(set(top) & set(gt)) / max(1, len(gt)))
                    by_q.setdefault(qid, {})[ef] = recall[(cls, ef)][-1]
                    if args.misses and ef == efs[0] and ids:
                        near, far = c.execute(
                            "SELECT min(embedding OPERATOR(public.<=>) %s::vector), "
                            "max(embedding OPERATOR(public.<=>) %s::vector) "
                            "FROM rag.chunk WHERE chunk_id = ANY (%s)",
                            (qemb, qemb, ids),
                        ).fetchone()
                        contrast[qid] = far / max(near, 1e-9)
                if rnd:
                    ms.setdefault((cls, ef), []).append(dt)
    if args.without_index:
        c.execute("ROLLBACK")
    if args.probes:
        for tenant in sorted({q[1] for q in qs}):
            got = c.execute(
                "SELECT ef_search, recall, min_recall, probes, curve::text FROM rag.tenant_ann "
                "WHERE tenant = %s",
                (tenant,),
            ).fetchone()
            print(f"{tenant}: probes (rag._tune_ann) ef_search, recall, min, probes, curve: {got}")
    if args.misses:
        for cls in sorted({q[0] for q in qs}):
            mine = [q for q in qs if q[0] == cls]
            by_far = [q[4] for q in sorted(mine, key=lambda q: (-q[5], q[4]))]
            by_contrast = sorted((q[4] for q in mine if q[4] in contrast), key=lambda i: (contrast[i], i))
            for q in mine:
                got = by_q.get(q[4], {})
                if min(got.values(), default=1) >= 0.99:
                    continue
                print(
                    f"{cls:<8} question {q[4]:4}: recall "
                    + " ".join(f"ef {ef} {got.get(ef, float('nan')):.1f}" for ef in efs)
                    + f"; exact d1 {q[5]:.3f} d10 {q[6]:.3f}; place by d1 (farthest first) "
                    f"{by_far.index(q[4]) + 1}/{len(mine)}, by contrast (lowest first) "
                    + (f"{by_contrast.index(q[4]) + 1}/{len(by_contrast)}" if q[4] in contrast else "-")
                )
    for (cls, ef), v in sorted(recall.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        t = sorted(ms[(cls, ef)])
        print(
            f"{cls:<8} ef {ef:4}  recall@10 mean {statistics.mean(v):.4f} min {min(v):.2f} "
            f"under 0.99: {sum(x < 0.99 for x in v):3}/{len(v)}   ANN p50 {statistics.median(t):6.2f} "
            f"p95 {t[int(len(t) * 0.95)]:6.2f} ms"
        )


if __name__ == "__main__":
    main()
