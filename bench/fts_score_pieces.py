"""What the full-text leg's BM25 statement costs, piece by piece, on the scale benchmark's largest tenant.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/fts_score_pieces.py [--questions 60]
        [--tenant big] [--repeats 5]

For each question of pgcite_bench.question of the tenant (needs its own GIN index on rag.chunk_tsv,
rag._index_tenants): the question's tsquery, its lexemes with their idf in the tenant and the newest 400
candidates through the tenant's own index, as rag._candidates computes them. Then each statement below, run
from the client with those as parameters (best of --repeats per question; every statement pays the same
parameter parsing, which `base` measures): the pieces of the scoring (the candidates' rows read and tested
with @@, the question's lexemes marked and kept, unnested and summed) and the whole statement as 0.9.0's
session 21 wrote it (one aggregate per candidate, joined with the question's lexemes) and as one aggregate
over every candidate's terms (idf by position), its float8 sum as it comes, in numeric, and on a 2^-36 grid
(what session 22 adopted: an exact sum in any order). Prints p50 / p95 / mean ms per statement, and whether
each whole statement gives session 21's candidates and scores (issue #10, session 22).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

READ = """ROWS FROM (unnest(%(ids)s::bigint[]), unnest(%(tids)s::tid[])) AS u (chunk_id, tid)
CROSS JOIN LATERAL (
    SELECT u.chunk_id, x.tsv FROM (SELECT coalesce(
        (SELECT v.tsv FROM rag.chunk_tsv AS v WHERE v.ctid = u.tid AND v.chunk_id = u.chunk_id),
        (SELECT v.tsv FROM rag.chunk_tsv AS v WHERE u.tid IS NULL AND v.chunk_id = u.chunk_id)) AS tsv
        OFFSET 0) AS x
    WHERE x.tsv @@ %(q)s::tsquery) AS m"""
TF = "coalesce(array_length(tv.positions, 1), 1)::float8"
MARKED = "unnest(ts_filter(setweight(m.tsv, 'B', %(lex)s::text[]), '{b}')) AS tv"
PARAMS = "%(lex)s::text[] IS NOT NULL AND %(idf)s::float8[] IS NOT NULL"
TERM = f"(%(idf)s::float8[])[array_position(%(lex)s::text[], tv.lexeme)] * 2.2 * {TF} / ({TF} + 1.2)"

STATEMENTS = {
    "base (parameters only)": "SELECT count(*)"
    " FROM ROWS FROM (unnest(%(ids)s::bigint[]), unnest(%(tids)s::tid[])) AS u (chunk_id, tid)"
    f" WHERE %(q)s::tsquery IS NOT NULL AND {PARAMS}",
    "rows read, @@ tested": f"SELECT count(*) FROM {READ} WHERE {PARAMS}",
    "+ lexemes marked, kept": "SELECT"
    f" sum(length(ts_filter(setweight(m.tsv, 'B', %(lex)s::text[]), '{{b}}'))) FROM {READ} WHERE {PARAMS}",
    "+ unnested, tf summed": f"SELECT count(*), sum({TF}) FROM {READ}"
    f" CROSS JOIN LATERAL {MARKED} WHERE {PARAMS}",
    "session 21 (per candidate)": f"""SELECT m.chunk_id, ct.s FROM {READ}
CROSS JOIN LATERAL (
    SELECT round(sum(w.idf * 2.2 * e.tf / (e.tf + 1.2))::numeric, 6)::float8 AS s
    FROM (SELECT tv.lexeme, {TF} AS tf
          FROM unnest(ts_filter(setweight(setweight(m.tsv, 'D'), 'A', %(lex)s::text[]), '{{a}}')) AS tv) AS e
    INNER JOIN ROWS FROM (unnest(%(lex)s::text[]), unnest(%(idf)s::float8[])) AS w (lexeme, idf)
        ON w.lexeme = e.lexeme) AS ct
WHERE ct.s IS NOT NULL ORDER BY 1""",
    "one aggregate, float8 sum": f"""SELECT m.chunk_id,
    round(sum({TERM})::numeric, 6)::float8 AS s
FROM {READ} CROSS JOIN LATERAL {MARKED}
GROUP BY m.chunk_id ORDER BY 1""",
    "one aggregate, numeric sum": f"""SELECT m.chunk_id,
    round(sum(({TERM})::numeric), 6)::float8 AS s
FROM {READ} CROSS JOIN LATERAL {MARKED}
GROUP BY m.chunk_id ORDER BY 1""",
    "session 22 (terms on a 2^-36 grid)": f"""SELECT m.chunk_id,
    round(sum(round(68719476736::float8 * {TERM}) / 68719476736::float8)::numeric, 6)::float8 AS s
FROM {READ} CROSS JOIN LATERAL {MARKED}
GROUP BY m.chunk_id ORDER BY 1""",
}


def inputs(cur, tenant: str, question: str):
    corrected = cur.execute(
        "SELECT rag._correct_question(%s, %s, rag._params())", (tenant, question)
    ).fetchone()[0]
    cfg = cur.execute("SELECT ts_config FROM rag.tenant WHERE tenant = %s", (tenant,)).fetchone()[0]
    q, lexemes = cur.execute(
        "SELECT rag._fts_query(%s::regconfig, %s), tsvector_to_array(to_tsvector(%s::regconfig, %s))",
        (cfg, corrected, cfg, corrected),
    ).fetchone()
    lex, idf = cur.execute(
        """SELECT array_agg(x.lexeme ORDER BY x.lexeme),
               array_agg(ln(1 + (rag._live_chunks(%s) - x.df + 0.5) / (x.df + 0.5)) ORDER BY x.lexeme)
           FROM (SELECT l.lexeme, s.live_chunks::float8 AS df FROM unnest(%s::text[]) AS l (lexeme)
                 JOIN rag.tenant_lexeme AS s ON s.tenant = %s AND s.lexeme = l.lexeme
                 WHERE s.live_chunks > 0) AS x""",
        (tenant, lexemes, tenant),
    ).fetchone()
    if not lex:
        return None
    ids, tids = cur.execute(
        """SELECT array_agg(x.chunk_id ORDER BY x.chunk_id DESC), array_agg(x.ctid ORDER BY x.chunk_id DESC)
           FROM (SELECT m.chunk_id, m.ctid FROM (
                     SELECT t.chunk_id, t.ctid FROM rag.chunk_tsv AS t
                     WHERE t.tenant = %s AND t.tsv @@ rag._any_lexeme(%s::text[]) OFFSET 0) AS m
                 ORDER BY m.chunk_id DESC LIMIT 400) AS x""",
        (tenant, lex),
    ).fetchone()
    return {"q": q, "lex": lex, "idf": idf, "ids": ids, "tids": tids} if ids else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenant", default="big")
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with corpus.connect(os.environ.get("BENCH_DB") or "pgcite_bench") as conn:
        cur = conn.cursor()
        qs = [
            r[0]
            for r in cur.execute(
                "SELECT question FROM pgcite_bench.question WHERE tenant = %s ORDER BY id LIMIT %s",
                (args.tenant, args.questions),
            )
        ]
        ms: dict[str, list[float]] = {name: [] for name in STATEMENTS}
        rows: dict[str, list[list]] = {name: [] for name in STATEMENTS}
        for question in qs:
            p = inputs(cur, args.tenant, question)
            if p is None:
                continue
            for name, stmt in STATEMENTS.items():
                best = float("inf")
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    out = cur.execute(stmt, p).fetchall()
                    best = min(best, time.perf_counter() - t0)
                ms[name].append(best * 1000)
                rows[name].append(out)
    for name, v in ms.items():
        v = sorted(v)
        print(
            f"{name:36s} p50 {v[len(v) // 2]:6.3f}  p95 {v[int(len(v) * 0.95)]:6.3f}"
            f"  mean {statistics.mean(v):6.3f} ms  ({len(v)} questions)"
        )
    for name in list(STATEMENTS)[5:]:
        same = rows["session 21 (per candidate)"] == rows[name]
        print(f"session 21 and {name}: the same candidates and scores: {same}")


if __name__ == "__main__":
    main()
