"""The embedding model's weights on transparent huge pages or not (pgcite_udfs/hugepages.py), side by side.

    /opt/pgcite/venv/bin/python bench/huge_pages.py [--procs 3] [--repeats 4] [--tunable]

Runs in the DB-side venv on its ONNX export. Each variant runs in processes of its own, alternating (plain,
huge, huge, plain, ...: --procs of each), because two sessions of one process measured 9.1-9.8 ms for the
same model (where each session's weights happen to lie): load_onnx(huge_pages=False) ("plain"), and
load_onnx(huge_pages=True) ("huge"); with --tunable also plain sessions in a process started with
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (glibc's own way, which a PostgreSQL backend gets only from the
postmaster's environment). Each process runs the dev questions (eval/pgdocs-dev.jsonl) through session.run
once untimed, then --repeats times, timing each run as CPU time of the calling thread (one intra-op thread:
onnxruntime computes on it), and reports its p50 and its memory (/proc/self/smaps_rollup: Rss, Anonymous,
AnonHugePages). Prints a row per process and the p50 of each variant over its processes' runs.

With --ingest N: each process also encodes N passages of about 150 words of the PostgreSQL manual
(/usr/share/doc/postgresql-doc-*/html, text of its pages in file order) with embed.encode (batches of 32, as
ingest does), after 64 untimed, and reports passages per second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def manual_passages(n: int, words: int = 150) -> list[str]:
    import glob
    import re

    out: list[str] = []
    for path in sorted(glob.glob("/usr/share/doc/postgresql-doc-*/html/*.html")):
        text = re.sub(r"<[^>]+>", " ", Path(path).read_text(errors="replace"))
        toks = text.split()
        out.extend(" ".join(toks[i : i + words]) for i in range(0, len(toks) - words, words))
        if len(out) >= n + 64:
            break
    return out[: n + 64]


def child(variant: str, repeats: int, ingest: int) -> None:
    sys.path.insert(0, str(ROOT / "python_udfs"))
    import numpy as np
    from pgcite_udfs import embed

    model = embed.load_onnx(threads=1, huge_pages=variant == "huge")
    lines = (ROOT / "eval/pgdocs-dev.jsonl").read_text().splitlines()
    questions = [json.loads(line)["question"] for line in lines]
    feeds = [feed for q in questions for _, feed in model.batches([q])]
    ms: list[float] = []
    for rep in range(repeats + 1):
        for feed in feeds:
            inputs = {k: np.asarray(v) for k, v in feed.items() if k in model.input_names}
            t0 = time.thread_time()
            model.session.run(None, inputs)
            if rep:
                ms.append((time.thread_time() - t0) * 1000)
    rate = None
    if ingest:
        texts = manual_passages(ingest)
        embed.encode(model, texts[:64])
        t0 = time.perf_counter()
        embed.encode(model, texts[64:])
        rate = round(len(texts[64:]) / (time.perf_counter() - t0), 1)
    mem = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("Rss", "Anonymous", "AnonHugePages"):
                mem[key] = int(line.split()[1]) // 1024
    print(json.dumps({"variant": variant, "ms": ms, "mem_mb": mem, "rate": rate}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--tunable", action="store_true")
    ap.add_argument("--ingest", type=int, default=0, help="passages of the manual to encode per process")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.repeats, args.ingest)
        return
    variants = ["plain", "huge"] + (["tunable"] if args.tunable else [])
    runs: dict[str, list[float]] = {v: [] for v in variants}
    rates: dict[str, list[float]] = {}
    print("| process | variant | session.run p50 ms | Rss / Anonymous / AnonHugePages MB | passages / s |")
    print("|---|---|---|---|---|")
    for p in range(args.procs):
        for v in variants if p % 2 == 0 else variants[::-1]:
            env = dict(os.environ, HF_HUB_OFFLINE="1")
            if v == "tunable":
                env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
            child_variant = "plain" if v == "tunable" else v
            out = subprocess.run(
                [sys.executable, __file__, "--child", child_variant, "--repeats", str(args.repeats)]
                + ["--ingest", str(args.ingest)],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[v].extend(r["ms"])
            m = r["mem_mb"]
            print(
                f"| {p + 1} | {v} | {statistics.median(r['ms']):.2f} | "
                f"{m.get('Rss')} / {m.get('Anonymous')} / {m.get('AnonHugePages')} | {r['rate']} |"
            )
            if r["rate"]:
                rates.setdefault(v, []).append(r["rate"])
    print()
    for v, ms in runs.items():
        ms.sort()
        p95 = ms[int(len(ms) * 0.95)]
        print(f"{v}: p50 {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms over {len(ms)} runs")
        if v in rates:
            mean = statistics.mean(rates[v])
            print(f"{v}: ingest {mean:.1f} passages / s (mean of {len(rates[v])} processes)")


if __name__ == "__main__":
    main()
