"""What rag.store_parsed does with items that reuse a stored chunk text (security session 6).

    .venv/bin/python bench/bench_reuse_copies.py --dsn DSN --tenant T [--sentences 100] [--copies 20 80 3000]

DSN connects as a writer of tenant T (in a database whose setting max_document_bytes has its default). One
chunk of `--sentences` one-character sentences is stored, then for each number of copies one rag.store_parsed
call of that many items carrying only the chunk's text (no embedding: the stored one and its sentences are
copied). Prints the size of the call, its seconds, and the backend's peak resident memory (VmHWM, from
/proc, so run it on the database's machine). Every document it stores is retired at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import psycopg


def peak_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])
    return -1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--tenant", required=True)
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--copies", type=int, nargs="+", default=[20, 80, 3000])
    a = ap.parse_args()
    content = "x" * a.sentences
    keys = []

    def emb() -> list[float]:
        return [round(random.uniform(-1, 1), 6) for _ in range(384)]

    for n in a.copies:
        # a new connection per call, so VmHWM is that call's peak
        with psycopg.connect(a.dsn, autocommit=True) as c:
            model = c.execute("SELECT rag.model_name()").fetchone()[0]
            pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
            parsed = {
                "model": model,
                "format": "text",
                "chunker_version": 1,
                "title": None,
                "empty_sections": 0,
            }
            if not keys:
                seed = [
                    {
                        "content": content,
                        "embedding": emb(),
                        "sentences": [
                            {"start": i, "end": i + 1, "embedding": emb()} for i in range(len(content))
                        ],
                    }
                ]
                c.execute(
                    "SELECT * FROM rag.store_parsed(%s, 'reuse-seed', 'seed', 'text', %s)",
                    (a.tenant, json.dumps({**parsed, "chunks": seed})),
                )
                keys.append("reuse-seed")
            payload = json.dumps({**parsed, "chunks": [{"content": content, "embedding": None}] * n})
            key = f"reuse-{n}-{time.time()}"
            t = time.perf_counter()
            try:
                status = c.execute(
                    "SELECT status FROM rag.store_parsed(%s, %s, 'copies', 'text', %s)",
                    (a.tenant, key, payload),
                ).fetchone()[0]
                keys.append(key)
            except psycopg.Error as e:
                status = f"{e.sqlstate}"
            print(
                f"{n} copies of {a.sentences} sentences: {len(payload)} bytes,"
                f" {time.perf_counter() - t:.2f} s, "
                f"peak {peak_kb(pid) / 1024:.0f} MB, {status}"
            )
    with psycopg.connect(a.dsn, autocommit=True) as c:
        for key in keys:
            c.execute("SELECT rag.delete_document(%s, %s)", (a.tenant, key))


if __name__ == "__main__":
    main()
