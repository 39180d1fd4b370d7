"""Per-stage timings of rag._candidates (the legs of rag.retrieve) on the scale benchmark's database.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/retrieve_stages.py [--per-class 100]
        [--sql sql/core/040-retrieve.sql] [--rounds 2] [--titles-question 3990 --per-class 3] [--slowest 12]

Builds a probe copy of rag._candidates from the given 040-retrieve.sql as pg_temp._candidates_probe (session
only, nothing is written to the database): the same statements, with clock_timestamp() taken after its
declarations and after each statement of its legs, and instead of returning the fused rows it runs the fusing
query (counting its rows). For each question of pgcite_bench.question (its stored embedding, the question
corrected by rag._correct_question first) it also times the whole rag.retrieve as pgcite_bench_reader on a
second connection. Prints p50 / p95 / max per class and stage over every round after the first (warm-up);
with --slowest N also each class's N slowest questions, stage by stage (which legs make the tail).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _lap(name: str) -> str:
    return (
        f"    stage := '{name}'; ms := extract(epoch from clock_timestamp() - t1) * 1000; RETURN NEXT;"
        " t1 := clock_timestamp();\n"
    )


def probe_source(src: str) -> str:
    """The probe copy of rag._candidates (see the module docstring): a lap after its declarations (the
    tenant, the question's tsquery and lexemes, the tenant's size and indexes) and after each statement of
    its legs, then the fusing query counted instead of returned."""
    f = src[
        src.index("CREATE OR REPLACE FUNCTION rag._candidates(") : src.index(
            "COMMENT ON FUNCTION rag._candidates("
        )
    ]
    f = f.replace("rag._candidates(", "pg_temp._candidates_probe(", 1)
    f = (
        f[: f.index("RETURNS TABLE (")]
        + "RETURNS TABLE (stage text, ms float8)\n"
        + f[f.index("LANGUAGE plpgsql") :]
    )
    decl = f.index("\nDECLARE\n") + len("\nDECLARE\n")
    f = (
        f[:decl]
        + "    t1 timestamptz := clock_timestamp();\n    nn bigint;\n"
        + f[decl:].replace("\nBEGIN\n", "\nBEGIN\n" + _lap("declare"), 1)
    )
    # each lap names the statements since the one before, in the order 0.9.0 runs them (session 18: the
    # vector leg after the full-text and title legs, its ANN query among them)
    for marker, name in (
        ("    -- full text: which lexemes choose the candidates", "setup"),
        ("    -- full-text leg: the candidates", "fts_choose"),
        ("        -- the question's lexemes the tenant has", "fts_candidates"),
        ("    -- title leg: each distinct title", "fts_score"),
        ("        -- their chunks", "title_scores"),
        ("    -- vector leg (after the others", "title_chunks"),
        ("    IF use_ann THEN\n", "vector_setup"),
        ("    -- Every leg's chunks with their tie-break keys", "ann"),
        ("    -- fused: the legs' arrays", "vector_leg"),
    ):
        if marker not in f:
            raise SystemExit(f"retrieve_stages: {name}: its statement is not in the SQL any more")
        f = f.replace(marker, _lap(name) + marker, 1)
    i = f.index("    RETURN QUERY\n")
    j = f.index("END\n$fn$;", i)
    fuse = f[i + len("    RETURN QUERY\n") : j].rstrip().rstrip(";")
    body = "    SELECT count(*) INTO nn FROM (\n" + fuse + "\n    ) AS zz;\n" + _lap("fuse")
    return f[:i] + body + f[j:] + ";\n"


def pct(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(len(s) * p))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sql", default=str(ROOT / "sql/core/040-retrieve.sql"))
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--slowest",
        type=int,
        default=0,
        metavar="N",
        help="also print, per class, the N questions whose stages add up to most (each question's fastest "
        "round after the first), with every stage of 0.5 ms or more: what makes the tail",
    )
    ap.add_argument(
        "--titles-question",
        type=int,
        default=0,
        metavar="N",
        help="instead: one question of N characters made of the largest tenant's titles (a long question "
        "that shares a lexeme with every title), with the embedding of that tenant's first question",
    )
    ap.add_argument(
        "--question",
        action="append",
        default=[],
        metavar="TEXT",
        help="instead: these questions (repeatable) on the largest tenant, with the embedding of its first "
        "question (how a question's words and titles cost, whatever its meaning), as one class, given",
    )
    ap.add_argument("--tenant", default="", help="with --question: this tenant instead of the largest")
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    src = Path(args.sql).read_text()
    owner = psycopg.connect(corpus.db_dsn(dbname), autocommit=True)
    reader = psycopg.connect(
        psycopg.conninfo.make_conninfo(corpus.db_dsn(dbname), user=corpus.READER), autocommit=True
    )
    owner.execute(probe_source(src))
    params = owner.execute("SELECT rag._params()::text").fetchone()[0]
    if args.titles_question:
        tenant, qemb = owner.execute(
            "SELECT tenant, qemb::text FROM pgcite_bench.question WHERE class = 'largest' ORDER BY id LIMIT 1"
        ).fetchone()
        question = owner.execute(
            "SELECT left(string_agg(z.t, ' '), %s) FROM (SELECT DISTINCT x.title AS t "
            "FROM rag.tenant_title AS x WHERE x.tenant = %s ORDER BY 1 LIMIT 400) AS z",
            (args.titles_question, tenant),
        ).fetchone()[0]
        qs = [(f"titles-{len(question)}", tenant, question, qemb)] * args.per_class
    elif args.question:
        tenant, qemb = owner.execute(
            "SELECT tenant, qemb::text FROM pgcite_bench.question WHERE class = 'largest' ORDER BY id LIMIT 1"
        ).fetchone()
        qs = [("given", args.tenant or tenant, q, qemb) for q in args.question]
    else:
        qs = owner.execute(
            "SELECT class, tenant, question, qemb::text FROM (SELECT *, row_number() OVER "
            "(PARTITION BY class ORDER BY id) AS n FROM pgcite_bench.question) AS q WHERE n <= %s "
            "ORDER BY id",
            (args.per_class,),
        ).fetchall()
    ms: dict[tuple[str, str], list[float]] = {}
    # per question (its index in qs): the fastest round's stages, by their sum
    per_q: dict[int, tuple[float, dict[str, float]]] = {}
    for rnd in range(args.rounds):
        for n, (cls, tenant, question, qemb) in enumerate(qs):
            t0 = time.perf_counter()
            reader.execute(
                "SELECT count(*) FROM rag.retrieve(%s, %s, 8, %s::vector)", (question, tenant, qemb)
            )
            whole = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            corrected = owner.execute(
                "SELECT rag._correct_question(%s, %s, %s::jsonb)", (tenant, question, params)
            ).fetchone()[0]
            corr = (time.perf_counter() - t0) * 1000
            rows = owner.execute(
                "SELECT stage, ms FROM pg_temp._candidates_probe(%s, %s, %s::vector, 40, %s::jsonb)",
                (tenant, corrected, qemb, params),
            ).fetchall()
            if rnd == 0:
                continue
            ms.setdefault((cls, "retrieve (reader, whole)"), []).append(whole)
            ms.setdefault((cls, "correct (client round trip)"), []).append(corr)
            for stage, v in rows:
                ms.setdefault((cls, stage), []).append(v)
            total = sum(v for _, v in rows)
            if n not in per_q or total < per_q[n][0]:
                per_q[n] = (total, dict(rows))
    for (cls, stage), v in sorted(ms.items(), key=lambda kv: (kv[0][0], list(ms).index(kv[0]))):
        print(
            f"{args.label}{cls:<8} {stage:<28} p50 {pct(v, 0.5):7.2f}  p95 {pct(v, 0.95):7.2f}"
            f"  max {max(v):7.2f} ms"
        )
    if args.slowest:
        for cls in dict.fromkeys(q[0] for q in qs):
            ranked = sorted(
                ((t, n, st) for n, (t, st) in per_q.items() if qs[n][0] == cls), key=lambda x: -x[0]
            )
            print(f"{args.label}{cls}: the {args.slowest} slowest questions (sum of stages, fastest round)")
            for t, n, st in ranked[: args.slowest]:
                big = ", ".join(f"{k} {v:.2f}" for k, v in st.items() if v >= 0.5)
                print(f"  {t:6.2f} ms  {qs[n][2][:60]!r}: {big}")


if __name__ == "__main__":
    main()
