"""Does a version of rag._candidates find the dev set's sections in a large tenant? Retrieval by anchor.

    BENCH_DB=pgcite_bench_1m DATABASE_URL=... .venv/bin/python bench/fts_leg_quality.py A.sql [B.sql ...]
        [--tenant big] [--tenant large01] [--split calibration]

The scale benchmark's tenants hold copies of the PostgreSQL manual's pages (word swaps inside sentences,
anchors kept), so the dev set's answerable questions (eval/pgdocs-dev.jsonl, expected anchors) can be asked of
a tenant of 350,000 chunks, where the full-text leg's budget (10 x depth candidates) is far below most
lexemes' document frequencies: the path that ranks the newest candidates holding the question's rarest
lexemes. For each 040-retrieve.sql given, its rag._candidates as pg_temp._cand_<n> (session only), called like
rag.retrieve at k 5 (depth 40; the question corrected first, its embedding by rag.embed of the text rag.ask
embeds). Per version and split: the questions, those whose rarest lexeme is over the budget ("over"), the mean
number of full-text candidates ranked, fts_hit (an expected anchor among the full-text leg's ranked chunks),
retrieval hit@1 / hit@5 and MRR@5 of the fused ranking, for all questions and for the "over" ones, and the
p50 of the call (the versions alternated per question). Issue #10, session 22.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
from candidates_same import candidates_source  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("versions", nargs="+", help="040-retrieve.sql files")
    ap.add_argument("--tenant", action="append", help="default: big")
    ap.add_argument("--split", action="append", help="default: calibration and test")
    args = ap.parse_args()
    tenants = args.tenant or ["big"]
    splits = args.split or ["calibration", "test"]
    qs = [
        json.loads(line) for line in (ROOT / "eval/pgdocs-dev.jsonl").read_text().splitlines() if line.strip()
    ]
    qs = [q for q in qs if q["kind"] == "answerable" and q.get("expect") and q["split"] in splits]
    c = corpus.connect(os.environ.get("BENCH_DB") or "pgcite_bench")
    names = []
    for n, path in enumerate(args.versions):
        names.append(f"_cand_{n}")
        c.execute(candidates_source(path, names[-1]))
    params = c.execute("SELECT rag._params()::text").fetchone()[0]
    # key (tenant, split, version) -> per-question tuples
    got: dict[tuple[str, str, str], list[dict]] = {}
    ms: dict[str, list[float]] = {name: [] for name in names}
    for tenant in tenants:
        cfg = c.execute("SELECT ts_config::text FROM rag.tenant WHERE tenant = %s", (tenant,)).fetchone()[0]
        for i, q in enumerate(qs):
            corr = c.execute(
                "SELECT rag._correct_question(%s, %s, %s::jsonb)", (tenant, q["question"], params)
            ).fetchone()[0]
            qemb = c.execute(
                "SELECT rag.embed(rag._embedding_text(%s, %s))::text", (q["question"], corr)
            ).fetchone()[0]
            rarest = c.execute(
                """SELECT min(s.live_chunks)
                   FROM unnest(tsvector_to_array(to_tsvector(%s::regconfig, %s))) AS l (x)
                   JOIN rag.tenant_lexeme AS s ON s.tenant = %s AND s.lexeme = l.x WHERE s.live_chunks > 0""",
                (cfg, corr, tenant),
            ).fetchone()[0]
            over = rarest is not None and rarest > 400
            order = names if i % 2 else list(reversed(names))
            for name in order:
                t0 = time.perf_counter()
                rows = c.execute(
                    f"""SELECT x.fused_rank, x.fts_rank, k.anchor
                        FROM pg_temp.{name}(%s, %s, %s::vector, 40, %s::jsonb) AS x
                        JOIN rag.chunk AS k ON k.chunk_id = x.chunk_id ORDER BY x.fused_rank""",
                    (tenant, corr, qemb, params),
                ).fetchall()
                ms[name].append((time.perf_counter() - t0) * 1000)
                want = set(q["expect"])
                fused = [a for r, _, a in rows if r <= 5]
                rank = next((j + 1 for j, a in enumerate(fused) if a in want), None)
                got.setdefault((tenant, q["split"], name), []).append(
                    {
                        "over": over,
                        "fts_n": sum(1 for _, f, _ in rows if f is not None),
                        "fts_hit": any(a in want for _, f, a in rows if f is not None),
                        "hit1": rank == 1,
                        "hit5": rank is not None,
                        "rr": 1 / rank if rank else 0.0,
                    }
                )
    print(
        "| tenant | split | version | questions (over) | fts candidates | fts_hit | hit@1 | hit@5 | MRR@5 |"
        " over: fts_hit | over: hit@1 | over: hit@5 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (tenant, split, name), v in sorted(got.items()):
        o = [x for x in v if x["over"]]

        def mean(xs, key):
            return statistics.mean(float(x[key]) for x in xs) if xs else float("nan")

        print(
            f"| {tenant} | {split} | {args.versions[names.index(name)]} | {len(v)} ({len(o)}) |"
            f" {mean(v, 'fts_n'):.1f} | {mean(v, 'fts_hit'):.3f} | {mean(v, 'hit1'):.3f}"
            f" | {mean(v, 'hit5'):.3f} | {mean(v, 'rr'):.3f} | {mean(o, 'fts_hit'):.3f}"
            f" | {mean(o, 'hit1'):.3f} | {mean(o, 'hit5'):.3f} |"
        )
    for name, v in ms.items():
        print(f"{args.versions[names.index(name)]}: rag._candidates p50 {statistics.median(v):.2f} ms")


if __name__ == "__main__":
    main()
