"""rag.retrieve and rag.ask latency over 200 questions, and determinism over 1,000 reruns.

    .venv/bin/python bench/bench_ask.py [--tenant pgdocs] [--reruns 1000]

Questions: the dev set (eval/pgdocs-dev.jsonl) plus "What is <section title>?" for sections of the tenant,
200 in all. Latency is measured from psycopg on one connection (model loaded before timing). Determinism:
the same question asked --reruns times, on two connections, every fingerprint and citation list compared.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import connect, percentiles  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def questions(conn, tenant: str, n: int) -> list[str]:
    qs = [
        json.loads(line)["question"] for line in (ROOT / "eval" / "pgdocs-dev.jsonl").read_text().splitlines()
    ]
    titles = conn.execute(
        "SELECT DISTINCT title FROM rag.chunk WHERE tenant = %s AND title <> '' ORDER BY title LIMIT %s",
        (tenant, n),
    ).fetchall()
    for (title,) in titles:
        qs.append(f"What is {re.sub(r'^[0-9A-Z]*[0-9.]+ ', '', title)}?")
    step = max(1, len(qs) // n)
    return qs[::step][:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tenant", default="pgdocs")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--reruns", type=int, default=1000)
    args = ap.parse_args()
    with connect() as conn, connect() as other:
        conn.execute("SELECT rag.embed('warm up')")
        other.execute("SELECT rag.embed('warm up')")
        qs = questions(conn, args.tenant, args.questions)
        lat = {"retrieve": [], "ask": []}
        statuses = {}
        for q in qs:
            t = time.perf_counter()
            conn.execute("SELECT * FROM rag.retrieve(%s, %s, 8)", (q, args.tenant)).fetchall()
            lat["retrieve"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            status = conn.execute("SELECT status FROM rag.ask(%s, %s, 5)", (q, args.tenant)).fetchone()[0]
            lat["ask"].append((time.perf_counter() - t) * 1000)
            statuses[status] = statuses.get(status, 0) + 1
        q = "How do I prevent transaction ID wraparound failures?"
        sql = "SELECT evidence ->> 'fingerprint', citations::text FROM rag.ask(%s, %s, 5)"
        seen = set()
        t = time.perf_counter()
        for i in range(args.reruns):
            seen.add((conn if i % 2 else other).execute(sql, (q, args.tenant)).fetchone())
        rerun_s = time.perf_counter() - t
    print(
        json.dumps(
            {
                "tenant": args.tenant,
                "questions": len(qs),
                "statuses": statuses,
                "retrieve_ms": {k: round(v, 1) for k, v in percentiles(lat["retrieve"]).items()},
                "ask_ms": {k: round(v, 1) for k, v in percentiles(lat["ask"]).items()},
                "determinism": {
                    "reruns": args.reruns,
                    "connections": 2,
                    "distinct_results": len(seen),
                    "seconds": round(rerun_s, 1),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
