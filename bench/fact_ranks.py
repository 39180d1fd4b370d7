"""Where the fact's chunk ranks in each retrieval leg, and whether an answer can quote it (#11, session 14).

    PYTHONPATH=src .venv/bin/python bench/bench_quotes.py --core --calibration-only --keep --out DIR
    PYTHONPATH=src .venv/bin/python bench/fact_ranks.py --dsn 'host=… dbname=pgcite_quotes user=postgres' DIR

For every answerable or typo question of the calibration split of eval/pgdocs-dev.jsonl that the run in DIR
(bench_quotes.py's per-question JSON; the PL/Python path, or with --core the core-only one) answered without
one of its answer_has strings (--all: every one), reads from the database the run used (kept with --keep):

- the fact's chunks: the tenant's live chunks whose text holds one of the question's answer_has strings
  (compared as the eval does: case-insensitive, runs of white space as one space);
- rag._candidates for the question as the run's ask corrected and embedded it (rag.ask_log; depth 40, that
  of k = 5, and depth 400, every leg to its end on the four chapters, in brackets where it differs): each fact
  chunk's rank in the vector, full-text and title legs and in the fused order;
- where the answer could have quoted it from: a passage (fused ranks 1-3), the section reach of the passages
  (rag._section_chunks with the weights in force), the ranks 4-5 retrieved, or nowhere.

Nothing is stored. Choose on the calibration split only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
TENANT = "pgdocs"
PASSAGES = 3


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def legs(conn: psycopg.Connection, corrected: str, qemb: str, depth: int) -> list[tuple]:
    """(chunk_id, fused rank, vector rank, full-text rank, title rank) of every candidate, fused order."""
    return conn.execute(
        "SELECT chunk_id, fused_rank, vec_rank, fts_rank, trgm_rank"
        " FROM rag._candidates(%s, %s, %s::public.vector, %s, rag._params()) ORDER BY fused_rank",
        (TENANT, corrected, qemb, depth),
    ).fetchall()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True, help="the kept pgcite_quotes database (a superuser)")
    ap.add_argument("out", help="bench_quotes.py's --out directory")
    ap.add_argument("--all", action="store_true", help="every calibration question, not only the misses")
    ap.add_argument(
        "--core", action="store_true", help="the core-only path's run (--dsn: pgcite_quotes_core)"
    )
    args = ap.parse_args()
    name = "pgdocs-dev-core-calibration.json" if args.core else "pgdocs-dev-calibration.json"
    run = json.loads((Path(args.out) / name).read_text())["per_question"]
    questions = {
        q["id"]: q
        for q in map(json.loads, (ROOT / "eval" / "pgdocs-dev.jsonl").read_text().splitlines())
        if q["split"] == "calibration" and q.get("answer_has")
    }
    with psycopg.connect(args.dsn) as conn:
        texts = conn.execute(
            "SELECT chunk_id, content FROM rag.chunk WHERE tenant = %s AND retired_at IS NULL", (TENANT,)
        ).fetchall()
        reach_n = conn.execute("SELECT (rag._quote_weights() ->> 'reach')::integer").fetchone()[0]
        print(
            "| question | status | fact chunks | vector rank | full-text rank | title rank | fused rank"
            " | quotable from |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in run:
            q = questions.get(r["id"])
            if q is None or (r["answer_contains"] and not args.all):
                continue
            wanted = [norm(a) for a in q["answer_has"]]
            facts = sorted(cid for cid, text in texts if any(w in norm(text) for w in wanted))
            # the question as that ask corrected and embedded it (its log row; also on the core-only path)
            corrected, qemb = conn.execute(
                "SELECT evidence -> 'gate' ->> 'corrected_question', query_embedding::text FROM rag.ask_log"
                " WHERE ask_id = %s",
                (r["ask_id"],),
            ).fetchone()
            shallow = legs(conn, corrected, qemb, 40)
            deep = {row[0]: row for row in legs(conn, corrected, qemb, 400)}
            order = [row[0] for row in shallow]
            at40 = {row[0]: row for row in shallow}
            passages = order[:PASSAGES]
            reach = {
                e["chunk_id"]
                for e in conn.execute(
                    "SELECT rag._section_chunks(%s, %s, %s)", (TENANT, passages, reach_n)
                ).fetchone()[0]
            }
            hits = set(facts)
            if hits & set(passages):
                where = "passage " + ", ".join(str(i + 1) for i, c in enumerate(passages) if c in hits)
            elif hits & reach:
                where = "section reach"
            elif hits & set(order[PASSAGES:5]):
                where = "ranks 4-5"
            else:
                where = "none"

            def ranks(col: int, f: list[int] = facts, at40: dict = at40, deep: dict = deep) -> str:
                # rank at depth 40 (the leg as rag.ask reads it), and at depth 400 in brackets when it differs
                out = []
                for c in f:
                    a = at40.get(c, (None,) * 5)[col]
                    b = deep.get(c, (None,) * 5)[col]
                    out.append(f"{a or '–'}" + (f" ({b or '–'})" if a != b else ""))
                return ", ".join(out) or "–"

            print(
                f"| {q['id']} | {r['status']} | {', '.join(map(str, facts)) or '–'} | {ranks(2)} | {ranks(3)}"
                f" | {ranks(4)} | {ranks(1)} | {where} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
