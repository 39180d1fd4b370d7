"""Which plans rag.retrieve really runs, per tenant size, past PL/pgSQL's five-call plan caching.

    BENCH_DB=pgcite_bench .venv/bin/python bench/plan_check.py [--calls 7] [--tenants big,pct01,tiny01]

On one superuser connection of the scale benchmark's database, with auto_explain logging every nested
statement (log_nested_statements, log_min_duration 0), asks rag.retrieve (k 8, the question's embedding
passed) the tenants in turn, --calls times each, interleaved on the same connection, with a question of
pgcite_bench.question of each tenant's class. For each call it prints the scans of the statements of
rag._candidates (the ANN query, the full-text candidates through a tenant's own GIN index, the vector leg's
exact re-score, the full-text and title legs; from 0.8.0 each leg and the fusion: the index or table each scan
node reads) and their durations,
then whether every call of a tenant used the same plan.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

SCAN = re.compile(
    r"((?:Parallel )?(?:Index Only Scan|Index Scan|Bitmap Index Scan|Seq Scan)(?: Backward)?"
    r"(?: using| on) \S+(?: on \S+)?)"
)


def legs(plan: str) -> str | None:
    """A short name for a statement of rag._candidates, from its query text."""
    if "ORDER BY c.embedding OPERATOR(public.<=>) $1 LIMIT $2" in plan:
        return "ann"
    if "c.tsv OPERATOR(pg_catalog.@@) $1" in plan:
        return "fts"
    if "fts_match AS MATERIALIZED" in plan or "WITH vec AS" in plan:
        return "legs"  # before 0.8.0: the three legs and the fusion in one statement
    # 0.8.0: each leg its own statement, the fusion planned generic
    if "WITH ORDINALITY AS lv" in plan:
        return "fuse"
    if "pg_catalog.unnest(ann_ids)" in plan:
        return "vec-rescore"
    if ") AS e" in plan and "OPERATOR(public.<=>) p_qemb" in plan:
        return "vec-exact"
    if "WITH m AS MATERIALIZED" in plan:
        return "fts-match"
    if "ts_rank_cd" in plan:
        return "fts-rank"
    if "word_similarity" in plan:
        return "titles"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--tenants", default="big,pct01,tiny01")
    args = ap.parse_args()
    dbname = os.environ.get("BENCH_DB") or "pgcite_bench"
    tenants = args.tenants.split(",")
    seen: list[str] = []
    with corpus.connect(dbname) as conn:
        qs = {
            t: conn.execute(
                "SELECT question, qemb::text FROM pgcite_bench.question "
                "WHERE tenant = %s ORDER BY id LIMIT 1",
                (t,),
            ).fetchone()
            for t in tenants
        }
        conn.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for s in (
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_level = notice",
            "client_min_messages = notice",
        ):
            conn.execute(f"SET {s}")
        plans: dict[str, set] = {}
        for i in range(1, args.calls + 1):
            for t in tenants:
                if qs[t] is None:
                    continue
                seen.clear()
                conn.execute(
                    "SELECT chunk_id FROM rag.retrieve(%s, %s, 8, %s::vector)", (*qs[t][:1], t, qs[t][1])
                )
                parts = []
                shape = []
                for p in seen:
                    name = legs(p)
                    if not name:
                        continue
                    ms = re.search(r"duration: ([\d.]+) ms", p)
                    scans = sorted(set(SCAN.findall(p)))
                    shape.append((name, tuple(scans)))
                    parts.append(f"{name} {ms.group(1) if ms else '?'} ms: {'; '.join(scans)}")
                total = [re.search(r"duration: ([\d.]+) ms", p) for p in seen if "FROM rag._retrieve(" in p]
                plans.setdefault(t, set()).add(tuple(shape))
                print(
                    f"call {i} {t:<7} retrieve {total[0].group(1) if total and total[0] else '?'} ms | "
                    + " | ".join(parts)
                )
        for t, shapes in plans.items():
            print(
                f"{t}: {'one plan shape' if len(shapes) == 1 else f'{len(shapes)} plan shapes'} over "
                f"{args.calls} calls"
            )


if __name__ == "__main__":
    main()
