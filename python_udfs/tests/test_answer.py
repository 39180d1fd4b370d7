"""answer.py: sentence scoring for extractive answers (fake encoder for exact arithmetic, then the model)."""

from __future__ import annotations

import math

import pytest
from pgcite_udfs import answer
from pgcite_udfs.answer import content_terms, score_sentences, stem


def test_stem_and_content_terms():
    assert stem("indexes") == stem("index") == "index"
    assert stem("vacuuming") == "vacuum"
    assert content_terms("How do I prevent the wraparound failures?") == {"prevent", "wraparound", "failur"}


def unit(*xs):
    n = math.sqrt(sum(x * x for x in xs))
    return [x / n for x in xs]


def test_scores_offsets_and_overlap_with_a_fake_encoder():
    content = "Autovacuum runs VACUUM on tables. Short one.   B-tree indexes handle range queries well."
    passages = [{"chunk_id": 7, "content": content}]

    def encode(texts):
        return [unit(1, 0) if "VACUUM" in t else unit(0, 1) for t in texts]

    out = score_sentences("Does autovacuum VACUUM the tables?", unit(1, 0), passages, encode)
    quotes = [content[o["start"] : o["end"]] for o in out]
    assert quotes == ["Autovacuum runs VACUUM on tables.", "B-tree indexes handle range queries well."]
    first, second = out
    assert (
        first["chunk_id"] == 7 and first["sim"] == pytest.approx(1.0) and second["sim"] == pytest.approx(0.0)
    )
    # question terms {autovacuum, vacuum, tabl}: the first sentence has all three
    assert first["overlap"] == pytest.approx(1.0) and second["overlap"] == 0
    assert first["score"] == pytest.approx(1.0 + answer.LEXICAL_WEIGHT)


def test_no_sentences_no_scores():
    assert score_sentences("q", [1.0], [{"chunk_id": 1, "content": "Too short."}], lambda t: []) == []


def test_real_model_prefers_the_answering_sentence():
    from pgcite_udfs import embed

    model = embed.load_model({}, threads=1)
    content = (
        "The autovacuum daemon is optional but recommended. "
        "To prevent transaction ID wraparound, every table must be vacuumed at least once every two billion "
        "transactions."
    )
    q = "How do I prevent transaction ID wraparound?"
    qvec = embed.encode(model, [q])[0]
    out = score_sentences(q, qvec, [{"chunk_id": 1, "content": content}], lambda t: embed.encode(model, t))
    best = max(out, key=lambda o: o["score"])
    assert content[best["start"] : best["end"]].startswith("To prevent transaction ID wraparound")
