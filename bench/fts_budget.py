"""The full-text leg and the fused ranking at other full-text budgets, against the budget of a 040 file.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/fts_budget.py [--factors 10,12,8,5]
        [--sql sql/core/040-retrieve.sql]

Creates rag._candidates of the given 040-retrieve.sql once per budget factor as pg_temp functions (session
only; the factor of `fts_budget bigint := p_depth::bigint * N` replaced; the file's own factor is the
reference), and for every question of pgcite_bench.question (corrected first, its stored embedding, depth 40)
compares each variant's full-text leg (its top 10 and top 40, as sets) and the fused top 8 with the
reference's. Prints per class and factor the mean overlaps, how many fused top 8 are identical, and the p50
time of each variant next to the reference's (the variants alternate per question).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUDGET = re.compile(r"fts_budget bigint := p_depth::bigint \* (\d+);")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--factors", default="10,12,8,5")
    ap.add_argument("--sql", default=str(ROOT / "sql/core/040-retrieve.sql"))
    args = ap.parse_args()
    src = Path(args.sql).read_text()
    f = src[
        src.index("CREATE OR REPLACE FUNCTION rag._candidates(") : src.index(
            "COMMENT ON FUNCTION rag._candidates("
        )
    ]
    ref = int(BUDGET.search(f).group(1))
    factors = [ref] + [int(x) for x in args.factors.split(",") if int(x) != ref]
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    for m in factors:
        g = BUDGET.sub(f"fts_budget bigint := p_depth::bigint * {m};", f).replace(
            "rag._candidates(", f"pg_temp._cand_{m}(", 1
        )
        c.execute(g)
    params = c.execute("SELECT rag._params()::text").fetchone()[0]
    qs = c.execute(
        "SELECT class, tenant, question, qemb::text FROM pgcite_bench.question ORDER BY id"
    ).fetchall()
    res: dict[tuple[str, int], dict] = {}
    for cls, tenant, question, qemb in qs:
        corr = c.execute(
            "SELECT rag._correct_question(%s, %s, %s::jsonb)", (tenant, question, params)
        ).fetchone()[0]
        out = {}
        for m in factors:
            t0 = time.perf_counter()
            rows = c.execute(
                f"SELECT chunk_id, fts_rank, fused_rank "
                f"FROM pg_temp._cand_{m}(%s, %s, %s::vector, 40, %s::jsonb)",
                (tenant, corr, qemb, params),
            ).fetchall()
            dt = (time.perf_counter() - t0) * 1000
            fts = [r[0] for r in sorted((r for r in rows if r[1] is not None), key=lambda r: r[1])]
            top8 = [r[0] for r in sorted(rows, key=lambda r: r[2])[:8]]
            out[m] = (fts, top8, dt)
        a = out[ref]
        for m in factors[1:]:
            b = out[m]
            k = res.setdefault((cls, m), {"f10": [], "f40": [], "same": 0, "ov8": [], "ms": [], "ref": []})
            k["f10"].append(len(set(a[0][:10]) & set(b[0][:10])) / max(1, len(a[0][:10])))
            k["f40"].append(len(set(a[0]) & set(b[0])) / max(1, len(a[0])))
            k["same"] += a[1] == b[1]
            k["ov8"].append(len(set(a[1]) & set(b[1])) / 8)
            k["ms"].append(b[2])
            k["ref"].append(a[2])
    for (cls, m), k in sorted(res.items()):
        print(
            f"{cls:8} x{m:<3} (vs x{ref}) full-text top10 overlap {statistics.mean(k['f10']):.3f} "
            f"top40 {statistics.mean(k['f40']):.3f}  fused top8 identical {k['same']}/{len(k['ms'])} "
            f"overlap {statistics.mean(k['ov8']):.3f}  p50 {statistics.median(k['ms']):.1f} "
            f"vs {statistics.median(k['ref']):.1f} ms"
        )


if __name__ == "__main__":
    main()
