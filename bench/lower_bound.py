"""What rag._may_score_at_least saves of the lower chunks' scoring, skipping no winner (issue #10).

    .venv/bin/python bench/lower_bound.py --dsn 'host=... dbname=pgcite_quotes user=postgres' \\
        [--tenant pgdocs]

For each question of eval/pgdocs-dev.jsonl, as rag._answer sees it (the corrected question, its embedding,
the fused ranks 1..weights.lower of rag._candidates, the three passages first): every stored sentence span
of 20 characters or more of those chunks scored by rag._sentence_scores and bounded by
rag._span_score_bounds; then the chunks below the passages that rag._may_score_at_least keeps at the
passages' best + lower_margin, next to those whose best span reaches it (the winners, which must all be
kept). Prints the counts, the spans whose score exceeds their bound (must be 0) and the smallest bound -
score.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--tenant", default="pgdocs")
    args = ap.parse_args()
    c = psycopg.connect(args.dsn, autocommit=True)
    w = c.execute("SELECT rag._quote_weights()").fetchone()[0]
    lower, margin = int(w["lower"]), float(w["lower_margin"])
    qs = [
        json.loads(x)["question"]
        for x in (ROOT / "eval" / "pgdocs-dev.jsonl").read_text().splitlines()
        if x.strip()
    ]
    n_lower = n_kept = n_win = n_spans = over = 0
    slack = float("inf")
    for q in qs:
        corrected, text = c.execute(
            "SELECT x.c, rag._embedding_text(%s, x.c) "
            "FROM (SELECT rag._correct_question(%s, %s, rag._params()) AS c) AS x",
            (q, args.tenant, q),
        ).fetchone()
        qemb = c.execute("SELECT rag.embed(%s)::text", (text,)).fetchone()[0]
        ids = [
            r[0]
            for r in c.execute(
                "SELECT chunk_id FROM rag._candidates(%s, %s, %s::vector, 40, rag._params()) "
                "WHERE fused_rank <= %s ORDER BY fused_rank",
                (args.tenant, corrected, qemb, lower),
            )
        ]
        weights = json.dumps(
            c.execute("SELECT rag._question_term_weights(%s, %s)", (text, ids[0])).fetchone()[0]
        )
        scored = c.execute(
            "SELECT rag._sentence_scores(%s, %s::vector, %s, %s)", (text, qemb, ids, weights)
        ).fetchone()[0]
        bounds = {
            (r[0], r[1], r[2]): r[3]
            for r in c.execute(
                "SELECT * FROM rag._span_score_bounds(%s, %s::vector, %s, %s)", (text, qemb, ids, weights)
            )
        }
        spans = [s for s in scored if s["end"] - s["start"] >= 20]
        for s in spans:
            b = bounds[(s["chunk_id"], s["start"], s["end"])]
            n_spans += 1
            over += s["score"] > b + 1e-6
            slack = min(slack, b - s["score"])
        at_least = max(s["score"] for s in spans if s["chunk_id"] in ids[:3]) + margin
        below = ids[3:]
        kept = c.execute(
            "SELECT rag._may_score_at_least(%s, %s::vector, %s, %s, %s)",
            (text, qemb, below, weights, at_least),
        ).fetchone()[0]
        winners = [
            i for i in below if max((s["score"] for s in spans if s["chunk_id"] == i), default=-1) >= at_least
        ]
        assert set(winners) <= set(kept), (q, winners, kept)
        n_lower, n_kept, n_win = n_lower + len(below), n_kept + len(kept), n_win + len(winners)
    print(
        f"{len(qs)} questions: {n_lower} chunks below the passages, {n_kept} kept by the bound "
        f"({n_kept / n_lower:.1%}), {n_win} winners (all kept); {n_spans} spans, {over} above their bound, "
        f"smallest bound - score {slack:.4f}"
    )


if __name__ == "__main__":
    main()
