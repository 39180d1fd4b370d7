"""The vector leg's ANN query through a compressed per-tenant index: recall@10 and time, against today's.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/ann_quant.py [--vector-ef 800]
        [--halfvec-ef 800,600,400] [--bit-fetch 800,1600] [--classes largest,1%] [--rounds 2] [--explain]

Per question of the given classes (pgcite_bench.question: stored embedding, exact top 10 in gt_ids), the
variants alternating question by question so they share the machine's load:
- vector: the query rag._candidates runs, through the tenant's partial HNSW index on embedding
  (vector_cosine_ops), iterative scan relaxed_order, LIMIT ef / 2;
- halfvec: the same through a partial HNSW index chunk_hvec_<md5> on (embedding::halfvec(384)) with
  halfvec_cosine_ops, ORDER BY embedding::halfvec(384) <=> the question as halfvec(384);
- bit: through a partial HNSW index chunk_hbit_<md5> on (binary_quantize(embedding)::bit(384)) with
  bit_hamming_ops, LIMIT n with ef_search min(n, 1000) (the over-fetch).
A variant is skipped for a tenant without its index (built by hand: see docs/BENCHMARKS.md, 0.6.0 round 5).
Each variant's candidates are re-scored exactly (vector <=>, rounded to 6 places, the retrieval's tie-break)
and the best 10 compared with gt_ids. Prints per class and variant: recall@10 mean / min, how many questions
fall under 0.99, and p50 / p95 of the ANN query and of the ANN query plus the exact re-score (rounds after the
first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

ORDER = {
    "vector": "c.embedding OPERATOR(public.<=>) %s::public.vector",
    "halfvec": "(c.embedding::public.halfvec(384)) OPERATOR(public.<=>) "
    "%s::public.vector::public.halfvec(384)",
    "bit": "(public.binary_quantize(c.embedding)::bit(384)) OPERATOR(public.<~>) "
    "public.binary_quantize(%s::public.vector)::bit(384)",
}
INDEX_NAME = {
    "vector": "chunk_hnsw_",
    "halfvec": "chunk_hvec_",
    "bit": "chunk_hbit_",
}


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vector-ef", default="800")
    ap.add_argument("--halfvec-ef", default="800,600,400")
    ap.add_argument("--bit-fetch", default="")
    ap.add_argument("--classes", default="largest,1%")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--explain", action="store_true", help="print one EXPLAIN per variant and tenant first")
    args = ap.parse_args()
    variants: list[tuple[str, int]] = [("vector", int(x)) for x in args.vector_ef.split(",") if x]
    variants += [("halfvec", int(x)) for x in args.halfvec_ef.split(",") if x]
    variants += [("bit", int(x)) for x in args.bit_fetch.split(",") if x]
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    c.execute("SET jit = off")
    c.execute("SET max_parallel_workers_per_gather = 0")
    c.execute("SET hnsw.iterative_scan = relaxed_order")
    qs = c.execute(
        "SELECT q.class, q.tenant, q.qemb::text, q.gt_ids[1:10], left(md5(q.tenant), 20) "
        "FROM pgcite_bench.question AS q "
        "WHERE q.class = ANY (%s) ORDER BY q.id",
        (args.classes.split(","),),
    ).fetchall()
    have = {
        (form, h): c.execute(
            "SELECT to_regclass(%s) IS NOT NULL", ("rag." + INDEX_NAME[form] + h,)
        ).fetchone()[0]
        for form in INDEX_NAME
        for h in {q[4] for q in qs}
    }
    recall: dict[tuple[str, str, int], list[float]] = {}
    ann_ms: dict[tuple[str, str, int], list[float]] = {}
    all_ms: dict[tuple[str, str, int], list[float]] = {}
    explained: set[tuple[str, str]] = set()
    for rnd in range(args.rounds):
        for cls, tenant, qemb, gt, h in qs:
            for form, ef in variants:
                if not have[(form, h)]:
                    continue
                c.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(min(ef, 1000))))
                limit = ef if form == "bit" else ef // 2
                query = sql.SQL(
                    "SELECT array_agg(a.chunk_id) FROM (SELECT c.chunk_id FROM rag.chunk AS c "
                    "WHERE c.tenant = {} AND c.retired_at IS NULL ORDER BY " + ORDER[form] + " LIMIT %s) AS a"
                ).format(sql.Literal(tenant))
                if args.explain and (form, tenant) not in explained:
                    explained.add((form, tenant))
                    plan = c.execute(sql.SQL("EXPLAIN (COSTS OFF) ") + query, (qemb, limit)).fetchall()
                    print(f"-- {form} {tenant}:", " / ".join(r[0].strip() for r in plan))
                t0 = time.perf_counter()
                ids = c.execute(query, (qemb, limit)).fetchone()[0]
                t1 = time.perf_counter()
                top = [
                    r[0]
                    for r in c.execute(
                        "SELECT c.chunk_id FROM rag.chunk AS c "
                        "WHERE c.chunk_id = ANY (%s) AND c.retired_at IS NULL "
                        "ORDER BY round((c.embedding OPERATOR(public.<=>) %s::public.vector)::numeric, 6), "
                        "c.doc_key, "
                        "c.chunk_index, c.chunk_id LIMIT 10",
                        (ids or [], qemb),
                    )
                ]
                t2 = time.perf_counter()
                key = (cls, form, ef)
                if rnd == args.rounds - 1:
                    recall.setdefault(key, []).append(len(set(top) & set(gt)) / max(1, len(gt)))
                if rnd or args.rounds == 1:
                    ann_ms.setdefault(key, []).append((t1 - t0) * 1000)
                    all_ms.setdefault(key, []).append((t2 - t0) * 1000)
    for key, v in sorted(recall.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][2])):
        cls, form, ef = key
        a, b = ann_ms[key], all_ms[key]
        what = f"fetch {ef}" if form == "bit" else f"ef {ef}"
        print(
            f"{cls:<8} {form:<8} {what:<10} recall@10 mean {statistics.mean(v):.4f} min {min(v):.2f} "
            f"under 0.99: {sum(x < 0.99 for x in v):3}/{len(v)}   ANN p50 {statistics.median(a):6.2f} "
            f"p95 {pct(a, 0.95):6.2f} ms   +re-score p50 {statistics.median(b):6.2f} "
            f"p95 {pct(b, 0.95):6.2f} ms"
        )


if __name__ == "__main__":
    main()
