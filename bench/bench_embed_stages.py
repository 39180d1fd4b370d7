"""Where the time of one question embedding goes: tokenizer, input arrays, session.run, pooling; threads.

    /opt/pgcite/venv/bin/python bench/bench_embed_stages.py [--repeats 5]
    .venv/bin/python bench/bench_embed_stages.py --in-db-only --dsn DSN [--repeats 5]

Runs in the DB-side venv with the run-time embedder (python_udfs/pgcite_udfs/embed.py, the ONNX export):
for each of the eval dev questions, --repeats times, the wall time of each stage of OnnxModel.encode for a
single text, with intra-op threads 1 and 2 and onnxruntime's thread spinning off (the backend's setting) and
on. With --in-db-only, `SELECT rag.embed(q)` from a client on a warm connection (the in-database figure: the
stages plus the PL/Python call and the vector literal). Prints p50/p95 per stage in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python_udfs"))


def pct(values: list[float], p: int) -> float:
    v = sorted(values)
    return round(v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))], 2)


def stages(model, text: str) -> dict[str, float]:
    import numpy as np
    from pgcite_udfs import embed

    t0 = time.perf_counter()
    e = model.tokenizer.encode_batch([text])[0]
    t1 = time.perf_counter()
    n = len(e.ids)
    feed = {
        "input_ids": np.asarray([e.ids], dtype=np.int64),
        "attention_mask": np.asarray([e.attention_mask], dtype=np.int64),
        "token_type_ids": np.asarray([e.type_ids], dtype=np.int64),
    }
    feed = {k: v for k, v in feed.items() if k in model.input_names}
    t2 = time.perf_counter()
    hidden = model.session.run(None, feed)[0]
    t3 = time.perf_counter()
    vec = embed.pool_and_normalise(hidden, feed["attention_mask"])
    embed.to_vector_literal(vec[0])
    t4 = time.perf_counter()
    ms = 1000.0
    return {
        "tokens": n,
        "tokenize": (t1 - t0) * ms,
        "arrays": (t2 - t1) * ms,
        "session.run": (t3 - t2) * ms,
        "pool+literal": (t4 - t3) * ms,
        "total": (t4 - t0) * ms,
    }


def dev_questions() -> list[str]:
    dev = HERE.parent / "eval" / "pgdocs-dev.jsonl"
    return [json.loads(x)["question"] for x in dev.read_text().splitlines() if x.strip()]


def in_db(dsn: str, repeats: int) -> None:
    import psycopg

    questions = dev_questions()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for q in questions[:5]:
            conn.execute("SELECT rag.embed(%s)", (q,)).fetchone()
        v = []
        for _ in range(repeats):
            for q in questions:
                t0 = time.perf_counter()
                conn.execute("SELECT rag.embed(%s)", (q,)).fetchone()
                v.append((time.perf_counter() - t0) * 1000)
    print(f"{'SELECT rag.embed(q)':<22} {'client wall':<13} {pct(v, 50):>8} {pct(v, 95):>8}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dsn", default="")
    ap.add_argument("--in-db-only", action="store_true", help="only SELECT rag.embed (any venv with psycopg)")
    args = ap.parse_args()
    if args.in_db_only:
        in_db(args.dsn, args.repeats)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import onnxruntime as ort
    from pgcite_udfs import embed

    dev = HERE.parent / "eval" / "pgdocs-dev.jsonl"
    questions = [json.loads(x)["question"] for x in dev.read_text().splitlines() if x.strip()]
    print(
        f"{len(questions)} questions x {args.repeats}; onnxruntime {ort.__version__}, {os.cpu_count()} cpus"
    )
    print(f"{'config':<22} {'stage':<13} {'p50 ms':>8} {'p95 ms':>8}")
    for threads, spinning in ((1, "0"), (1, "1"), (2, "0"), (2, "1")):
        model = embed.load_onnx(threads=threads)
        if spinning == "1":  # the same session with spinning on
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
            opts.log_severity_level = 3
            model.session = ort.InferenceSession(
                os.path.join(model.directory, embed.ONNX_FILE),
                sess_options=opts,
                providers=["CPUExecutionProvider"],
            )
        for q in questions[:5]:
            stages(model, q)  # warm-up
        rows = [stages(model, q) for _ in range(args.repeats) for q in questions]
        name = f"threads={threads} spin={spinning}"
        for key in ("tokenize", "arrays", "session.run", "pool+literal", "total"):
            v = [r[key] for r in rows]
            print(f"{name:<22} {key:<13} {pct(v, 50):>8} {pct(v, 95):>8}")
        print(f"{name:<22} {'word pieces':<13} {statistics.median(r['tokens'] for r in rows):>8}")
    if args.dsn:
        in_db(args.dsn, args.repeats)


if __name__ == "__main__":
    main()
