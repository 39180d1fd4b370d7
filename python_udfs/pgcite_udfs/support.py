"""How well a generated sentence is supported by the quotes it cites: the replaceable part of the check.

rag._support_scores (SQL) combines two signals per sentence: the share of its content words found in its
quotes (computed in SQL) and a model score in [0, 1] computed here, through `SupportModel`. The model shipped
is MiniLM cosine similarity (the embedding model pgcite already loads); no NLI model can be installed where
pgcite runs today. An NLI cross-encoder (premise: the quotes; hypothesis: the sentence; score: P(entailment))
implements the same interface: return it from `default_model` and recalibrate the setting min_support
(docs/generation.md, bench/support_threshold.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

Pair = tuple[str, Sequence[str]]  # (sentence, its verified quotes)


class SupportModel(Protocol):
    """Scores how strongly quotes support a sentence."""

    name: str

    def scores(self, pairs: Sequence[Pair]) -> list[float | None]:
        """One score in [0, 1] per (sentence, quotes); None for a sentence without quotes."""
        ...


class MiniLMSimilarity:
    """Cosine similarity of the sentence's embedding with each quote's and with all its quotes joined; the
    best of these, clipped to [0, 1]. `encode` maps texts to row vectors (rag's MiniLM in the backend)."""

    name = "minilm-cosine"

    def __init__(self, encode: Callable[[list[str]], np.ndarray]) -> None:
        self.encode = encode

    def scores(self, pairs: Sequence[Pair]) -> list[float | None]:
        texts: dict[str, int] = {}

        def index(text: str) -> int:
            return texts.setdefault(text, len(texts))

        plan = []
        for sentence, quotes in pairs:
            quotes = [q for q in quotes if q and q.strip()]
            if not sentence or not quotes:
                plan.append(None)
                continue
            candidates = list(quotes) + ([" ".join(quotes)] if len(quotes) > 1 else [])
            plan.append((index(sentence), [index(q) for q in candidates]))
        if not texts:
            return [None] * len(plan)
        vectors = np.asarray(self.encode(list(texts)), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1, norms)
        out: list[float | None] = []
        for item in plan:
            if item is None:
                out.append(None)
                continue
            s, qs = item
            best = max(float(vectors[s] @ vectors[q]) for q in qs)
            out.append(round(min(1.0, max(0.0, best)), 6))
        return out


def default_model(encode: Callable[[list[str]], np.ndarray]) -> SupportModel:
    """The support model rag._support_similarity uses."""
    return MiniLMSimilarity(encode)
