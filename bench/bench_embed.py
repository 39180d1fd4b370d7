"""Embedding backends side by side: ONNX (onnxruntime + tokenizers) against sentence-transformers (torch).

    /opt/pgcite/venv/bin/python bench/bench_embed.py [--threads 1] [--cold 3] [--repeats 200] [--texts 500]
                                                      [--int8]

Runs in the DB-side venv (the interpreter PostgreSQL embeds), each backend in fresh subprocesses:
- first call: wall time from spawning a fresh `python` to its first question vector (imports, model load,
  one encode), the median of --cold processes per backend, the backends alternating;
- RSS after loading: VmRSS of /proc/self/status right after that first call; peak: VmHWM after everything;
- one short question embedded alone --repeats times (wall p50, p95, min; p50 of the thread's CPU time, which
  other jobs on the machine disturb less), and the eval dev questions one at a time;
- throughput: --texts chunk-sized paragraphs of the PostgreSQL manual (/usr/share/doc/postgresql-doc-*/html),
  encoded in one call (batches of 32);
- agreement: cosine of each text's vector with sentence-transformers'.
--int8 adds onnxruntime's dynamic int8 quantisation of the export (per-channel), measured, never the default.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY_UDFS = HERE.parent / "python_udfs"
QUESTION = "How do I vacuum a table?"
DEV_QUESTIONS = HERE.parent / "eval" / "pgdocs-dev.jsonl"


def manual_paragraphs(n: int, min_words: int = 40) -> list[str]:
    """n paragraphs of at least min_words words, spread evenly over the manual's pages in name order."""
    import lxml.html

    files = sorted(glob.glob("/usr/share/doc/postgresql-doc-15/html/*.html")) or sorted(
        glob.glob("/usr/share/doc/postgresql-doc-*/html/*.html")
    )
    if not files:
        sys.exit("bench_embed: the PostgreSQL manual is not installed (Debian package postgresql-doc-15)")
    paras = []
    for f in files:
        doc = lxml.html.parse(f).getroot()
        for p in doc.iter("p"):
            text = " ".join(p.text_content().split())
            if len(text.split()) >= min_words:
                paras.append(text)
    if len(paras) < n:
        sys.exit(f"bench_embed: only {len(paras)} paragraphs of {min_words}+ words in the manual")
    step = len(paras) / n
    return [paras[int(i * step)] for i in range(n)]


def rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[p - 1]


# ------------------------------------------------------------------------------------------- child side
def child(args) -> None:
    sys.path.insert(0, str(PY_UDFS))
    from pgcite_udfs import embed

    t_import = time.time()
    model = embed.load_model({}, threads=args.threads)
    t_loaded = time.time()
    embed.encode(model, [QUESTION])
    t_first = time.time()
    out = {
        "backend": embed.backend(model),
        "first_call_s": t_first - args.spawned,
        "load_s": t_loaded - t_import,
        "first_encode_s": t_first - t_loaded,
        "rss_loaded_mb": rss_mb(),
    }
    if args.mode == "full":
        import numpy as np

        times, cpu = [], []
        for _ in range(args.repeats):
            t, c = time.perf_counter(), time.thread_time()
            embed.encode(model, [QUESTION])
            times.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
        out["question_ms"] = {
            "p50": pct(times, 50) * 1e3,
            "p95": pct(times, 95) * 1e3,
            "min": min(times) * 1e3,
        }
        # CPU time of this thread (1 thread: the whole inference runs on it), robust to other jobs' turns
        out["question_cpu_ms"] = {"p50": pct(cpu, 50) * 1e3}
        questions = [json.loads(line)["question"] for line in DEV_QUESTIONS.read_text().splitlines() if line]
        times = []
        for q in questions:
            t = time.perf_counter()
            embed.encode(model, [q])
            times.append(time.perf_counter() - t)
        out["dev_questions_ms"] = {"p50": pct(times, 50) * 1e3, "p95": pct(times, 95) * 1e3, "n": len(times)}
        texts = json.loads(Path(args.texts_file).read_text())
        t = time.perf_counter()
        vecs = embed.encode(model, texts, batch_size=32)
        out["throughput_texts_s"] = len(texts) / (time.perf_counter() - t)
        out["rss_after_mb"] = rss_mb()
        out["rss_peak_mb"] = rss_mb("VmHWM")
        np.save(args.vectors, np.asarray(vecs, dtype=np.float32))
    print(json.dumps(out))


# ------------------------------------------------------------------------------------------ parent side
def run_child(backend: str, mode: str, args, env_extra: dict, vectors: str = "") -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **env_extra}
    env["PGCITE_EMBED_BACKEND"] = backend
    cmd = [sys.executable, __file__, "--child", "--mode", mode, "--threads", str(args.threads)]
    cmd += ["--repeats", str(args.repeats), "--texts-file", args.texts_file, "--vectors", vectors]
    cmd += ["--spawned", repr(time.time())]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"bench_embed: the {backend} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def make_int8(src: str, dst: str) -> None:
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    os.makedirs(dst, exist_ok=True)
    for f in ("tokenizer.json", "manifest.json"):
        shutil.copy(os.path.join(src, f), dst)
    quantize_dynamic(
        os.path.join(src, "model.onnx"),
        os.path.join(dst, "model.onnx"),
        weight_type=QuantType.QInt8,
        per_channel=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cold", type=int, default=3, help="fresh processes per backend for the first call")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--texts", type=int, default=500)
    ap.add_argument(
        "--int8", action="store_true", help="also measure a dynamic int8 quantisation of the export"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="full", help=argparse.SUPPRESS)
    ap.add_argument("--texts-file", default="", help=argparse.SUPPRESS)
    ap.add_argument("--vectors", default="", help=argparse.SUPPRESS)
    ap.add_argument("--spawned", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    sys.path.insert(0, str(PY_UDFS))
    import numpy as np
    from pgcite_udfs import embed
    from tokenizers import Tokenizer

    if not embed.onnx_export_current():
        sys.exit(
            f"bench_embed: no current ONNX export in {embed.onnx_dir()}: python -m pgcite_udfs.onnx_export"
        )
    tmp = tempfile.mkdtemp(prefix="bench-embed-")
    texts = manual_paragraphs(args.texts)
    args.texts_file = os.path.join(tmp, "texts.json")
    Path(args.texts_file).write_text(json.dumps(texts))
    tok = Tokenizer.from_file(os.path.join(embed.onnx_dir(), embed.TOKENIZER_FILE))
    pieces = [len(e.ids) for e in tok.encode_batch(texts)]
    qlen = len(tok.encode(QUESTION).ids)

    backends = {"onnx": ("onnx", {}), "torch": ("torch", {})}
    if args.int8:
        int8_dir = os.path.join(tmp, "int8")
        make_int8(embed.onnx_dir(), int8_dir)
        backends["onnx-int8"] = ("onnx", {"PGCITE_ONNX_DIR": int8_dir})
    cold: dict[str, list[dict]] = {name: [] for name in backends}
    for _ in range(args.cold):
        for name, (backend, env) in backends.items():
            cold[name].append(run_child(backend, "cold", args, env))
    full = {}
    for name, (backend, env) in backends.items():
        full[name] = run_child(backend, "full", args, env, os.path.join(tmp, f"{name}.npy"))
        full[name]["first_call_s"] = statistics.median(r["first_call_s"] for r in cold[name])
        full[name]["load_s"] = statistics.median(r["load_s"] for r in cold[name])
        full[name]["rss_loaded_mb"] = statistics.median(r["rss_loaded_mb"] for r in cold[name])
        assert full[name]["backend"] == backend, (name, full[name]["backend"])
    ref = np.load(os.path.join(tmp, "torch.npy"))
    for name in backends:
        cos = np.sum(np.load(os.path.join(tmp, f"{name}.npy")) * ref, axis=1)
        full[name]["cos_min"], full[name]["cos_mean"] = float(cos.min()), float(cos.mean())

    import onnxruntime
    import torch

    print(
        f"python {sys.version.split()[0]}, onnxruntime {onnxruntime.__version__}, torch {torch.__version__},"
        f" threads {args.threads}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{len(texts)} manual paragraphs: {statistics.mean(pieces):.0f} word pieces on average "
        f"(max {max(pieces)}, {sum(p >= 256 for p in pieces)} truncated at 256); question {QUESTION!r}: "
        f"{qlen} word pieces; first call: median of {args.cold} fresh processes"
    )
    rows = [
        ("first call in a fresh process (s)", "first_call_s", "{:.2f}", False),
        ("  of which import + load (s)", "load_s", "{:.2f}", False),
        ("RSS after loading (MB)", "rss_loaded_mb", "{:.0f}", False),
        ("RSS after the throughput run (MB)", "rss_after_mb", "{:.0f}", False),
        ("peak RSS, VmHWM (MB)", "rss_peak_mb", "{:.0f}", False),
        ("short question p50 (ms)", ("question_ms", "p50"), "{:.2f}", False),
        ("short question p95 (ms)", ("question_ms", "p95"), "{:.2f}", False),
        ("short question min (ms)", ("question_ms", "min"), "{:.2f}", False),
        ("short question p50, CPU time (ms)", ("question_cpu_ms", "p50"), "{:.2f}", False),
        ("73 dev questions p50 (ms)", ("dev_questions_ms", "p50"), "{:.2f}", False),
        ("73 dev questions p95 (ms)", ("dev_questions_ms", "p95"), "{:.2f}", False),
        (f"throughput, {len(texts)} paragraphs (texts/s)", "throughput_texts_s", "{:.1f}", True),
        ("cosine with sentence-transformers, min", "cos_min", "{:.7f}", None),
        ("cosine with sentence-transformers, mean", "cos_mean", "{:.7f}", None),
    ]
    names = list(backends)
    others = [n for n in names if n != "torch"]
    header = f"{'':42}" + "".join(f"{n:>12}" for n in names) + "".join(f"{'torch/' + n:>18}" for n in others)
    print(header)
    for label, key, fmt, higher_better in rows:

        def get(name, key=key):
            return full[name][key[0]][key[1]] if isinstance(key, tuple) else full[name][key]

        cells = ["reference" if higher_better is None and n == "torch" else fmt.format(get(n)) for n in names]
        line = f"{label:42}" + "".join(f"{c:>12}" for c in cells)
        for n in others:
            if higher_better is None:
                line += f"{'':>18}"
            else:
                ratio = get(n) / get("torch") if higher_better else get("torch") / get(n)
                line += f"{ratio:>17.1f}x"
        print(line)
    print("(ratios: how many times better the ONNX column is: faster, smaller, or more texts per second)")


if __name__ == "__main__":
    main()
