"""Question embedding: the ONNX export as shipped against variants of it, interleaved, one intra-op thread.

    /opt/pgcite/venv/bin/python bench/bench_onnx_variants.py [--repeats 5] [--wall]

Runs in the DB-side venv on its export (embed.onnx_dir()). Variants: the export as setup makes it
(onnxruntime's own load-time optimisation, ORT_ENABLE_ALL); the same graph after onnxruntime's offline
transformer fusions (onnxruntime.transformers.optimizer, model_type bert: EmbedLayerNormalization, Attention,
SkipLayerNormalization, BiasGelu), written to a temporary directory; the export with denormals flushed to
zero (session.set_denormal_as_zero); with extended instead of full optimisation; and with thread spinning on.
Each of the eval dev questions is run through every variant in turn (alternating the order), --repeats times
after one untimed pass, so all variants see the same machine load. Times session.run only (the tokenizer,
arrays and pooling add ~0.5 ms, bench/bench_embed_stages.py), as CPU time of the calling thread (with one
intra-op thread onnxruntime computes on it; --wall for wall time). Prints p50 / p95 per variant, the minimum
cosine of its vectors with the first variant's, and the question's word pieces; also the GFLOP/s that
p50 means for the median question (21.2 MFLOP per word piece: six layers of 4 x 384^2 + 2 x 384 x 1536 MACs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python_udfs"))
FLOP_PER_PIECE = 2 * 6 * (4 * 384 * 384 + 2 * 384 * 1536)


def session(path: str, level: str = "all", config: dict[str, str] | None = None):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    }[level]
    for k, v in {"session.intra_op.allow_spinning": "0", **(config or {})}.items():
        o.add_session_config_entry(k, v)
    o.log_severity_level = 3
    return ort.InferenceSession(path, sess_options=o, providers=["CPUExecutionProvider"])


def fused(src: str, out: str) -> str:
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    m = optimizer.optimize_model(
        src,
        model_type="bert",
        num_heads=12,
        hidden_size=384,
        optimization_options=FusionOptions("bert"),
        opt_level=1,
        use_gpu=False,
    )
    stats = {k: v for k, v in m.get_fused_operator_statistics().items() if v}
    print(f"offline fusion: {stats}", flush=True)
    m.save_model_to_file(out)
    return out


def main() -> None:
    import numpy as np
    from pgcite_udfs import embed
    from tokenizers import Tokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--wall", action="store_true")
    args = ap.parse_args()
    directory = embed.onnx_dir()
    model = os.path.join(directory, embed.ONNX_FILE)
    tok = Tokenizer.from_file(os.path.join(directory, embed.TOKENIZER_FILE))
    dev = HERE.parent / "eval" / "pgdocs-dev.jsonl"
    encs = [tok.encode(json.loads(line)["question"]) for line in dev.read_text().splitlines()]
    clock = time.perf_counter if args.wall else time.thread_time
    with tempfile.TemporaryDirectory() as tmp:
        variants = {
            "export (ORT_ENABLE_ALL)": session(model),
            "offline bert fusion": session(fused(model, os.path.join(tmp, "fused.onnx"))),
            "denormals as zero": session(model, config={"session.set_denormal_as_zero": "1"}),
            "ORT_ENABLE_EXTENDED": session(model, level="extended"),
            "spinning on": session(model, config={"session.intra_op.allow_spinning": "1"}),
        }
        ms: dict[str, list[float]] = {k: [] for k in variants}
        vecs: dict[str, list] = {k: [] for k in variants}
        items = list(variants.items())
        for rep in range(args.repeats + 1):
            for qi, e in enumerate(encs):
                ids = np.asarray([e.ids], dtype=np.int64)
                feed = {
                    "input_ids": ids,
                    "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.zeros_like(ids),
                }
                for name, s in items if (qi + rep) % 2 == 0 else items[::-1]:
                    names = {i.name for i in s.get_inputs()}
                    f = {k: v for k, v in feed.items() if k in names}
                    t0 = clock()
                    h = s.run(None, f)[0]
                    dt = (clock() - t0) * 1000
                    if rep:
                        ms[name].append(dt)
                    if rep == 1:
                        v = h[0].mean(0)
                        vecs[name].append(v / np.linalg.norm(v))
    pieces = statistics.median(len(e.ids) for e in encs)
    ref = np.array(vecs[items[0][0]])
    print(f"{len(encs)} dev questions x {args.repeats}, median {pieces:.0f} word pieces, {clock.__name__}")
    for name, v in ms.items():
        v.sort()
        p50 = statistics.median(v)
        cos = float(np.min(np.sum(ref * np.array(vecs[name]), axis=1)))
        gflops = FLOP_PER_PIECE * pieces / (p50 / 1000) / 1e9
        p95 = v[int(len(v) * 0.95)]
        print(f"{name:<26} p50 {p50:6.2f}  p95 {p95:6.2f} ms  min cosine {cos:.7f}  ~{gflops:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
