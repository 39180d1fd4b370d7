"""How many titles the title leg of rag._candidates scores, against how many could be kept (#10, session 25).

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/title_bound.py [--per-class 100]

For the scale benchmark's questions (pgcite_bench.question, each corrected first, depth 40 as rag.retrieve at
k 8), per class: the titles of the tenant sharing a lexeme with the question whose trigram bound (the share
of their trigrams found in the question, session 21) reaches min_title_similarity; of those, how many have a
bound at or above the cut-off the leg ends with (the score at which the best titles' chunks reach the depth:
those that may be kept); and how many the installed rag._candidates scores (its word_similarity calls, counted
with track_functions = 'all' in a transaction of their own): per class the sum, the p95 and the max per
question.
Needs a superuser (track_functions).
"""

from __future__ import annotations

import argparse
import os

import psycopg

PASSING = """
WITH q AS (
    SELECT y.tq, y.cfg, array_to_tsvector(show_trgm(y.tq)) AS qt
    FROM (
        SELECT rag._title_question(%(c)s) AS tq, t.ts_config AS cfg
        FROM rag.tenant AS t WHERE t.tenant = %(t)s
    ) AS y
), b AS (
    SELECT x.title, x.live_chunks, round(word_similarity(x.stripped, q.tq)::numeric, 6)::float8 AS s,
        (length(q.qt) - length(ts_delete(q.qt, x.trgm)))::float8 / greatest(cardinality(x.trgm), 1) AS bound
    FROM rag.tenant_title AS x, q
    WHERE x.tenant = %(t)s AND x.live_chunks > 0
        AND x.tsv @@ rag._any_lexeme(tsvector_to_array(to_tsvector(q.cfg, q.tq)))
        AND length(q.qt) - length(ts_delete(q.qt, x.trgm)) >= (%(m)s - 1e-6) * cardinality(x.trgm)
), c AS (
    SELECT coalesce((SELECT min(y.s) FROM (
        SELECT z.s, sum(z.live_chunks) OVER (ORDER BY z.s DESC, z.title) - z.live_chunks AS before
        FROM b AS z WHERE z.s >= %(m)s) AS y WHERE y.before < 40), 2) AS cut
)
SELECT count(*), count(*) FILTER (WHERE b.bound >= c.cut - 1e-6) FROM b, c
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-class", type=int, default=100)
    args = ap.parse_args()
    dsn = os.environ.get("DATABASE_URL", "")
    with psycopg.connect(dsn, dbname=os.environ.get("BENCH_DB", "pgcite_bench_1m"), autocommit=True) as c:
        min_title = c.execute("SELECT (rag._params() ->> 'min_title_similarity')::float8").fetchone()[0]
        ws = c.execute("SELECT 'public.word_similarity(text, text)'::regprocedure::oid").fetchone()[0]
        qs = c.execute(
            "SELECT class, tenant, question, qemb::text FROM (SELECT *, row_number() OVER "
            "(PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q WHERE n <= %s "
            "ORDER BY class, id",
            (args.per_class,),
        ).fetchall()
        per: dict[str, list[tuple[int, int, int]]] = {}
        for cls, tenant, question, qemb in qs:
            corrected = c.execute(
                "SELECT rag._correct_question(%s, %s, rag._params())", (tenant, question)
            ).fetchone()[0]
            passing, may = c.execute(PASSING, {"c": corrected, "t": tenant, "m": min_title}).fetchone()
            with c.transaction():
                c.execute("SET LOCAL track_functions = 'all'")
                # (the backend's pending counts, which may hold earlier transactions' until they are flushed)
                calls = "SELECT coalesce(pg_stat_get_xact_function_calls(%s), 0)"
                before = c.execute(calls, (ws,)).fetchone()[0]
                c.execute(
                    "SELECT count(*) FROM rag._candidates(%s, %s, %s::vector, 40, rag._params())",
                    (tenant, corrected, qemb),
                )
                scored = c.execute(calls, (ws,)).fetchone()[0] - before
            per.setdefault(cls, []).append((passing, may, scored))
    print("class      questions  passing the bound (sum / p95 / max)  may be kept  scored (sum / p95 / max)")
    for cls, rows in sorted(per.items()):
        print(f"{cls:10} {len(rows):9}  {_stat(rows, 0):36} {sum(r[1] for r in rows):11}  {_stat(rows, 2)}")


def _stat(rows: list[tuple[int, int, int]], i: int) -> str:
    xs = sorted(r[i] for r in rows)
    return f"{sum(xs)} / {xs[int(0.95 * (len(xs) - 1))]} / {xs[-1]}"


if __name__ == "__main__":
    main()
