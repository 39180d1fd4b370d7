"""Ingest throughput of the whole PostgreSQL manual vs plain-Python encoding of the same chunk texts.

    .venv/bin/python bench/bench_ingest.py [--tenant bench_manual] [--threads 1]

Prints: documents, chunks, seconds and chunks/s of `pgcite ingest`-equivalent calls (one rag.ingest per
file, one transaction each), the same chunk texts encoded by the backend's own embedding code
(pgcite_udfs.embed: the ONNX export, see bench_embed.py) in a plain Python process with the same thread count,
their ratio, and the time of re-ingesting the unchanged manual.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import connect, timer  # noqa: E402

MANUAL = next(iter(sorted(Path("/usr/share/doc").glob("postgresql-doc-*/html"))), Path("/nonexistent"))
DB_PYTHON = "/opt/pgcite/venv/bin/python"
PLAIN = """
import json, sys, time
from pgcite_udfs import embed
texts = json.load(open(sys.argv[1]))
m = embed.load_model({}, threads=int(sys.argv[2]))
embed.encode(m, texts[:8])
t = time.perf_counter()
embed.encode(m, texts, batch_size=32)
print(json.dumps({"seconds": time.perf_counter() - t, "texts": len(texts), "backend": embed.backend(m)}))
"""


def ingest_all(conn, tenant: str, files: list[Path]) -> dict:
    stats = {"documents": 0, "chunks": 0, "statuses": {}}
    with timer() as t:
        for f in files:
            row = conn.execute(
                "SELECT status, chunks FROM rag.ingest(%s, %s, %s, 'html')", (tenant, f.name, f.read_text())
            ).fetchone()
            stats["documents"] += 1
            stats["chunks"] += row[1]
            stats["statuses"][row[0]] = stats["statuses"].get(row[0], 0) + 1
    stats["seconds"] = round(t["s"], 2)
    return stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tenant", default="bench_manual")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (0: all)")
    args = ap.parse_args()
    files = sorted(MANUAL.glob("*.html"))
    if args.limit:
        files = files[: args.limit]
    with connect() as conn:
        conn.execute("SELECT rag.set_config('torch_threads', %s)", (str(args.threads),))
        conn.execute("SELECT rag.create_tenant(%s)", (args.tenant,))
        if conn.execute("SELECT count(*) FROM rag.document WHERE tenant = %s", (args.tenant,)).fetchone()[0]:
            sys.exit(f"tenant {args.tenant} is not empty: use another --tenant for a first-ingest figure")
        conn.execute("SELECT rag.embed('warm up')")  # model load is not ingest throughput
        first = ingest_all(conn, args.tenant, files)
        embedded = conn.execute("SELECT (rag.python_info() ->> 'embedded_texts')::int").fetchone()[0] - 1
        again = ingest_all(conn, args.tenant, files)
        texts = [
            r[0]
            for r in conn.execute(
                "SELECT rag._embed_text(title, content) FROM rag.chunk WHERE tenant = %s ORDER BY chunk_id",
                (args.tenant,),
            )
        ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        json.dump(texts, tmp)
    plain = json.loads(
        subprocess.run(
            [DB_PYTHON, "-c", PLAIN, tmp.name, str(args.threads)], capture_output=True, text=True, check=True
        ).stdout
    )
    in_db_rate = first["chunks"] / first["seconds"]
    plain_rate = plain["texts"] / plain["seconds"]
    print(
        json.dumps(
            {
                "threads": args.threads,
                "first_ingest": {**first, "chunks_per_s": round(in_db_rate, 1), "texts_embedded": embedded},
                "plain_python_encode": {
                    **plain,
                    "seconds": round(plain["seconds"], 2),
                    "texts_per_s": round(plain_rate, 1),
                },
                "ratio_in_db_vs_plain": round(in_db_rate / plain_rate, 3),
                "reingest_unchanged": {
                    **again,
                    "share_of_first": round(again["seconds"] / first["seconds"], 4),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
