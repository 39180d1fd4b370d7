"""The vector leg's ANN query through other per-tenant index forms (IVFFlat, HNSW with more links).

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/ann_ivf.py
        --variants chunk_hnsw_:800,chunk_ivf592_:4,chunk_ivf592_:8,chunk_hnswm24_:400 [--limit 400]
        [--classes largest,1%] [--rounds 2] [--explain]
    ... bench/ann_ivf.py --grow 0.1 --lists 592 --probes 2,4,8 [--tenant big]

Variants: PREFIX:PARAM[:LIMIT], PREFIX the name of a partial index of the tenant's live chunks on embedding
without its md5 suffix (rag._tenant_index_name's form: chunk_hnsw_<md5> is what rag._index_tenants builds;
the others are built by hand, see docs/BENCHMARKS.md, 0.7.0 round 6), PARAM its hnsw.ef_search or
ivfflat.probes (the index's access method says which), LIMIT the rows fetched (default ef / 2 for HNSW,
--limit for IVFFlat). Per question of the given classes (pgcite_bench.question: stored embedding, exact top
10 in gt_ids), the variants alternating question by question so they share the machine's load, each in a
transaction rolled back at the end that drops the tenant's other vector indexes (the planner would otherwise
pick one by its cost estimate): the query rag._candidates runs (iterative scan relaxed_order, LIMIT ef / 2
for HNSW, --limit for IVFFlat) run twice, the second timed; its candidates re-scored exactly (rounded to 6
places, the retrieval's tie-break) and the best 10 compared with gt_ids. Prints per class and variant
recall@10 mean / min, the questions under 0.99 and the ANN query's p50 / p95 (rounds after the first).

--grow F: what IVFFlat's fixed lists do when a tenant grows. A scratch table pgcite_bench.ivf_grow holds the
tenant's live chunks but the newest fraction F / (1 + F) (by chunk_id: the documents loaded last, copies of
base documents the first ones may not hold); an IVFFlat index WITH (lists = --lists) is built on it; recall@10
against exact search on the scratch table is measured at each --probes; then the held-back rows are inserted
(the index is not rebuilt: its centroids stay those of the first rows) and recall@10 is measured again against
gt_ids (the exact top 10 over all the tenant's chunks), then once more after REINDEX.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

QUERY = (
    "SELECT array_agg(a.chunk_id) FROM (SELECT c.chunk_id FROM {tbl} AS c WHERE {pred} "
    "ORDER BY c.embedding OPERATOR(public.<=>) %s::public.vector LIMIT %s) AS a"
)
RESCORE = (
    "SELECT c.chunk_id FROM {tbl} AS c WHERE c.chunk_id = ANY (%s) {pred} "
    "ORDER BY round((c.embedding OPERATOR(public.<=>) %s::public.vector)::numeric, 6), c.doc_key, "
    "c.chunk_index, c.chunk_id LIMIT 10"
)


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


def vector_indexes(c, suffix: str) -> dict[str, str]:
    """The tenant's partial indexes on rag.chunk's embedding (name -> access method)."""
    return dict(
        c.execute(
            "SELECT i.relname, am.amname FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid "
            "JOIN pg_am AS am ON am.oid = i.relam WHERE x.indrelid = 'rag.chunk'::regclass "
            "AND am.amname IN ('hnsw', 'ivfflat') AND i.relname LIKE %s",
            ("%\\_" + suffix,),
        ).fetchall()
    )


def set_param(c, am: str, param: int) -> None:
    if am == "hnsw":
        c.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(param)))
        c.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    else:
        c.execute(sql.SQL("SET LOCAL ivfflat.probes = {}").format(sql.Literal(param)))
        c.execute("SET LOCAL ivfflat.iterative_scan = relaxed_order")


def compare(c, args) -> None:
    variants = [(v.split(":") + [""])[:3] for v in args.variants.split(",") if v]
    tenants = args.tenants.split(",") if args.tenants else None
    qs = c.execute(
        "SELECT q.class, q.tenant, q.qemb::text, q.gt_ids[1:10], left(md5(q.tenant), 20) "
        "FROM pgcite_bench.question AS q WHERE q.class = ANY (%s) "
        "AND (%s::text[] IS NULL OR q.tenant = ANY (%s)) ORDER BY q.id",
        (args.classes.split(","), tenants, tenants),
    ).fetchall()
    have = {h: vector_indexes(c, h) for h in {q[4] for q in qs}}
    recall: dict[tuple, list[float]] = {}
    ann_ms: dict[tuple, list[float]] = {}
    explained: set[tuple] = set()
    for rnd in range(args.rounds):
        for cls, tenant, qemb, gt, h in qs:
            for prefix, param_s, limit_s in variants:
                param = int(param_s)
                name = prefix + h
                if name not in have[h]:
                    continue
                am = have[h][name]
                limit = int(limit_s) if limit_s else param // 2 if am == "hnsw" else args.limit
                query = sql.SQL(QUERY).format(
                    tbl=sql.SQL("rag.chunk"),
                    pred=sql.SQL("c.tenant = {} AND c.retired_at IS NULL").format(sql.Literal(tenant)),
                )
                c.execute("BEGIN")
                for other in have[h]:
                    if other != name:
                        c.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier("rag", other)))
                set_param(c, am, param)
                if args.explain and (prefix, tenant) not in explained:
                    explained.add((prefix, tenant))
                    plan = c.execute(sql.SQL("EXPLAIN (COSTS OFF) ") + query, (qemb, limit)).fetchall()
                    text = " / ".join(r[0].strip() for r in plan)
                    print(f"-- {prefix} {tenant}:", re.sub(r"'\[[^]]*\]'", "'[…]'", text), flush=True)
                c.execute(query, (qemb, limit))
                t0 = time.perf_counter()
                ids = c.execute(query, (qemb, limit)).fetchone()[0]
                dt = (time.perf_counter() - t0) * 1000
                top = [
                    r[0]
                    for r in c.execute(
                        sql.SQL(RESCORE).format(
                            tbl=sql.SQL("rag.chunk"), pred=sql.SQL("AND c.retired_at IS NULL")
                        ),
                        (ids or [], qemb),
                    )
                ]
                c.execute("ROLLBACK")
                key = (cls, prefix, am, param, limit)
                if rnd == args.rounds - 1:
                    recall.setdefault(key, []).append(len(set(top) & set(gt)) / max(1, len(gt)))
                if rnd or args.rounds == 1:
                    ann_ms.setdefault(key, []).append(dt)
    for key, v in sorted(recall.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][3], -kv[0][4])):
        cls, prefix, am, param, limit = key
        a = ann_ms[key]
        what = (f"ef {param}" if am == "hnsw" else f"probes {param}") + f" lim {limit}"
        print(
            f"{cls:<8} {prefix:<15} {what:<20} recall@10 mean {statistics.mean(v):.4f} min {min(v):.2f} "
            f"under 0.99: {sum(x < 0.99 for x in v):3}/{len(v)}   ANN p50 {statistics.median(a):6.2f} "
            f"p95 {pct(a, 0.95):6.2f} ms"
        )


def grow_recall(c, qs, probes: list[int], limit: int, gt_of) -> None:
    for p in probes:
        rec, ms = [], []
        for qemb, gt in ((q[0], gt_of(q)) for q in qs):
            c.execute("BEGIN")
            set_param(c, "ivfflat", p)
            t0 = time.perf_counter()
            ids = c.execute(
                sql.SQL(QUERY).format(tbl=sql.SQL("pgcite_bench.ivf_grow"), pred=sql.SQL("true")),
                (qemb, limit),
            ).fetchone()[0]
            ms.append((time.perf_counter() - t0) * 1000)
            top = [
                r[0]
                for r in c.execute(
                    sql.SQL(RESCORE).format(tbl=sql.SQL("pgcite_bench.ivf_grow"), pred=sql.SQL("")),
                    (ids or [], qemb),
                )
            ]
            c.execute("ROLLBACK")
            rec.append(len(set(top) & set(gt)) / max(1, len(gt)))
        print(
            f"   probes {p:3}  recall@10 mean {statistics.mean(rec):.4f} min {min(rec):.2f} "
            f"under 0.99: {sum(x < 0.99 for x in rec):3}/{len(rec)}   ANN p50 {statistics.median(ms):6.2f} "
            f"p95 {pct(ms, 0.95):6.2f} ms",
            flush=True,
        )


def grow(c, args) -> None:
    probes = [int(x) for x in args.probes.split(",")]
    n = c.execute(
        "SELECT count(*) FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL", (args.tenant,)
    ).fetchone()[0]
    keep = round(n / (1 + args.grow))
    c.execute("DROP TABLE IF EXISTS pgcite_bench.ivf_grow, pgcite_bench.ivf_grow_later")
    c.execute(
        "CREATE TABLE pgcite_bench.ivf_grow AS SELECT chunk_id, embedding, doc_key, chunk_index "
        "FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL ORDER BY chunk_id",
        (args.tenant,),
    )
    first_later = c.execute(
        "SELECT chunk_id FROM pgcite_bench.ivf_grow ORDER BY chunk_id OFFSET %s LIMIT 1", (keep,)
    ).fetchone()[0]
    c.execute(
        "CREATE TABLE pgcite_bench.ivf_grow_later AS "
        "SELECT * FROM pgcite_bench.ivf_grow WHERE chunk_id >= %s",
        (first_later,),
    )
    c.execute("DELETE FROM pgcite_bench.ivf_grow WHERE chunk_id >= %s", (first_later,))
    c.execute("ALTER TABLE pgcite_bench.ivf_grow ADD PRIMARY KEY (chunk_id)")
    c.execute("VACUUM ANALYZE pgcite_bench.ivf_grow")
    n0 = c.execute("SELECT count(*) FROM pgcite_bench.ivf_grow").fetchone()[0]
    n1 = c.execute("SELECT count(*) FROM pgcite_bench.ivf_grow_later").fetchone()[0]
    c.execute("SET maintenance_work_mem = '1GB'")
    c.execute("SET max_parallel_maintenance_workers = 1")
    t0 = time.perf_counter()
    c.execute(
        sql.SQL(
            "CREATE INDEX ivf_grow_ivf ON pgcite_bench.ivf_grow "
            "USING ivfflat (embedding public.vector_cosine_ops) WITH (lists = {})"
        ).format(sql.Literal(args.lists))
    )
    took = time.perf_counter() - t0
    print(f"{args.tenant}: {n0} rows, IVFFlat lists {args.lists} built in {took:.1f} s", flush=True)
    qs = c.execute(
        "SELECT q.qemb::text, q.gt_ids[1:10] FROM pgcite_bench.question AS q "
        "WHERE q.tenant = %s ORDER BY q.id",
        (args.tenant,),
    ).fetchall()
    exact = {}
    c.execute("SET enable_indexscan = off")
    for qemb, _gt in qs:
        exact[qemb] = [
            r[0]
            for r in c.execute(
                "SELECT chunk_id FROM pgcite_bench.ivf_grow ORDER BY "
                "round((embedding OPERATOR(public.<=>) %s::public.vector)::numeric, 6), doc_key, "
                "chunk_index, chunk_id LIMIT 10",
                (qemb,),
            )
        ]
    c.execute("RESET enable_indexscan")
    print(f" before the insert ({n0} rows, exact top 10 of the scratch table):", flush=True)
    grow_recall(c, qs, probes, args.limit, lambda q: exact[q[0]])
    t0 = time.perf_counter()
    c.execute("INSERT INTO pgcite_bench.ivf_grow SELECT * FROM pgcite_bench.ivf_grow_later")
    c.execute("ANALYZE pgcite_bench.ivf_grow")
    took = time.perf_counter() - t0
    print(
        f" after inserting {n1} rows ({100 * n1 / n0:.1f} %, {took:.1f} s) without a rebuild "
        "(gt_ids: exact top 10 over all the tenant's chunks):",
        flush=True,
    )
    grow_recall(c, qs, probes, args.limit, lambda q: q[1])
    t0 = time.perf_counter()
    c.execute("REINDEX INDEX pgcite_bench.ivf_grow_ivf")
    print(f" after REINDEX ({time.perf_counter() - t0:.1f} s):", flush=True)
    grow_recall(c, qs, probes, args.limit, lambda q: q[1])
    c.execute("DROP TABLE pgcite_bench.ivf_grow, pgcite_bench.ivf_grow_later")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="chunk_hnsw_:800,chunk_ivf592_:4,chunk_ivf592_:8")
    ap.add_argument("--limit", type=int, default=400, help="rows an IVFFlat scan returns (HNSW: ef / 2)")
    ap.add_argument("--classes", default="largest,1%")
    ap.add_argument("--tenants", help="only the questions of these tenants (comma-separated)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--explain", action="store_true", help="print one EXPLAIN per variant and tenant first")
    ap.add_argument("--grow", type=float, default=0.0)
    ap.add_argument("--lists", type=int, default=592)
    ap.add_argument("--probes", default="2,4,8,16")
    ap.add_argument("--tenant", default="big")
    args = ap.parse_args()
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    c.execute("SET jit = off")
    c.execute("SET max_parallel_workers_per_gather = 0")
    if args.grow:
        grow(c, args)
    else:
        compare(c, args)


if __name__ == "__main__":
    main()
