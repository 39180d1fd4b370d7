"""The title leg of rag._candidates with and without the tenant's partial GIN index on rag.tenant_title.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/title_leg.py
        [--classes largest,1%,tiny] [--rounds 3]

For each question of pgcite_bench.question (corrected by rag._correct_question first), the title leg's query
as 040-retrieve.sql runs it for a tenant with its own title index or over 2,000 chunks (the tenant's distinct
titles sharing a lexeme with the question, scored once by word_similarity, the best down to p_depth 40
chunks), in a PL/pgSQL function with plan_cache_mode = force_custom_plan like rag._candidates: once as the
database stands ('own': the tenant's index from rag._index_tenants, used when it exists) and once in a
transaction that drops the tenant's title index first and is rolled back ('shared': the table-wide
tenant_title_tsv_idx), alternating per question; the second of two runs in each transaction is timed (the
first rebuilds the catalog caches the DROP invalidated). Every row (chunk, score, rank) is compared; prints
per class p50 / p95 of each (rounds after the first) and how many questions differ (in any round).
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

LEG = r"""
CREATE FUNCTION pg_temp.title_leg(p_tenant text, corrected text, p_depth integer)
RETURNS TABLE (chunk_id bigint, s float8, r integer)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan SET jit = off SET max_parallel_workers_per_gather = 0
AS $fn$
DECLARE
    t rag.tenant := rag._require_tenant(p_tenant);
    v_tenant text COLLATE "default" := p_tenant;
    lexemes text [] := pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(t.ts_config, corrected));
    q_title tsquery := rag._any_lexeme(lexemes);
    min_title float8 := (rag._params() ->> 'min_title_similarity')::float8;
BEGIN
    RETURN QUERY
    WITH scored AS (
        SELECT x.title, x.live_chunks,
            round(public.word_similarity(x.stripped, corrected)::numeric, 6)::float8 AS s
        FROM rag.tenant_title AS x
        WHERE x.tenant = v_tenant AND x.live_chunks > 0 AND x.tsv @@ q_title
    ),
    titles AS (
        SELECT sc.title, sc.s FROM scored AS sc
        WHERE sc.s >= min_title AND sc.s >= coalesce((
            SELECT min(y.s) FROM (
                SELECT z.s, sum(z.live_chunks) OVER (ORDER BY z.s DESC, z.title) - z.live_chunks AS before
                FROM scored AS z WHERE z.s >= min_title
            ) AS y WHERE y.before < p_depth
        ), 2)
    )
    SELECT g.chunk_id, g.s,
        pg_catalog.row_number() OVER (ORDER BY g.s DESC, g.doc_key, g.chunk_index, g.chunk_id)::integer AS r
    FROM (
        SELECT c.chunk_id, c.doc_key, c.chunk_index, ti.s
        FROM titles AS ti
        INNER JOIN rag.chunk AS c ON c.tenant = v_tenant AND c.retired_at IS NULL AND c.title = ti.title
        WHERE ti.s >= min_title
        ORDER BY ti.s DESC, c.doc_key, c.chunk_index, c.chunk_id
        LIMIT p_depth
    ) AS g;
END
$fn$;
"""


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", default="largest,1%,tiny")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    c = psycopg.connect(corpus.db_dsn(os.environ.get("BENCH_DB") or "pgcite_bench"), autocommit=True)
    c.execute(LEG)
    qs = c.execute(
        "SELECT q.class, q.tenant, rag._correct_question(q.tenant, q.question, rag._params()), "
        "rag._tenant_title_index_name(q.tenant) FROM pgcite_bench.question AS q WHERE q.class = ANY (%s) "
        "ORDER BY q.id",
        (args.classes.split(","),),
    ).fetchall()
    ms: dict[tuple[str, str], list[float]] = {}
    differ: dict[str, set[int]] = {}
    for rnd in range(args.rounds):
        for i, (cls, tenant, corrected, index) in enumerate(qs):
            got = {}
            for variant in ("own", "shared"):
                c.execute("BEGIN")
                if variant == "shared":
                    c.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier("rag", index)))
                leg = "SELECT chunk_id, s, r FROM pg_temp.title_leg(%s, %s, 40) ORDER BY r"
                c.execute(
                    leg, (tenant, corrected)
                )  # the catalog caches the DROP invalidated, rebuilt untimed
                t0 = time.perf_counter()
                got[variant] = c.execute(leg, (tenant, corrected)).fetchall()
                dt = (time.perf_counter() - t0) * 1000
                c.execute("ROLLBACK")
                if rnd:
                    ms.setdefault((cls, variant), []).append(dt)
            if got["own"] != got["shared"]:
                differ.setdefault(cls, set()).add(i)
    for cls in args.classes.split(","):
        a, b = ms.get((cls, "own"), []), ms.get((cls, "shared"), [])
        if not a:
            continue
        print(
            f"{cls:<8} title leg: own index p50 {statistics.median(a):6.2f} p95 {pct(a, 0.95):6.2f} ms, "
            f"table-wide index p50 {statistics.median(b):6.2f} p95 {pct(b, 0.95):6.2f} ms; "
            f"questions differing: {len(differ.get(cls, ()))} of {sum(q[0] == cls for q in qs)}"
        )


if __name__ == "__main__":
    main()
