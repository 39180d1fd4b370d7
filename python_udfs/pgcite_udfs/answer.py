"""Sentence-level scoring for extractive answers.

Every sentence of the top passages is scored against the question by MiniLM cosine similarity plus the share
of the question's content words it contains. The database picks the quotes from these scores and
verifies them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from .sentences import split_sentences

LEXICAL_WEIGHT = 0.25
MIN_SENTENCE_CHARS = 20

STOPWORDS = frozenset(
    """a an and are as at be by can could do does did for from how i if in into is it its me my of on or
    should so than that the their them then there these this those to was were what when where which who
    whom why will with would you your we our us use used using about after before between both each few
    more most other some such only own same too very just also any all not no nor one get make want
    need""".split()
)

_WORD = re.compile(r"[A-Za-z0-9_]+")


def stem(word: str) -> str:
    """A deliberately small stemmer: enough to match plural/verb forms of the same word."""
    w = word.lower()
    for suffix in ("ations", "ation", "ings", "ing", "ies", "es", "ed", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def content_terms(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in STOPWORDS}


def score_sentences(
    question: str,
    query_vec: Sequence[float],
    passages: list[dict],
    encode: Callable[[list[str]], Sequence[Sequence[float]]],
) -> list[dict]:
    """passages: [{"chunk_id", "content"}] -> [{"chunk_id", "start", "end", "sim", "overlap", "score"}].

    start/end are character offsets into the passage content (Python str indices = PostgreSQL characters).
    """
    q_terms = content_terms(question)
    items: list[tuple[int, int, int, str]] = []
    for p in passages:
        content = p["content"]
        for start, end in split_sentences(content):
            text = content[start:end]
            if len(text) >= MIN_SENTENCE_CHARS:
                items.append((p["chunk_id"], start, end, text))
    if not items:
        return []
    vecs = encode([t for _, _, _, t in items])
    qnorm = math.sqrt(sum(x * x for x in query_vec)) or 1.0
    out = []
    for (chunk_id, start, end, text), v in zip(items, vecs, strict=True):
        vnorm = math.sqrt(sum(float(x) * float(x) for x in v)) or 1.0
        sim = sum(float(a) * float(b) for a, b in zip(query_vec, v, strict=True)) / (qnorm * vnorm)
        overlap = len(q_terms & content_terms(text)) / len(q_terms) if q_terms else 0.0
        out.append(
            {
                "chunk_id": chunk_id,
                "start": start,
                "end": end,
                "sim": round(sim, 6),
                "overlap": round(overlap, 6),
                "score": round(sim + LEXICAL_WEIGHT * overlap, 6),
            }
        )
    return out
