"""udf.sentence_spans and udf.sentence_vectors: what rag.ingest stores, what rag.ask embeds for old chunks."""

from __future__ import annotations

import json

import pytest
from pgcite_udfs import udf
from pgcite_udfs.sentences import TooManySentences


def test_spans_are_per_text_with_1_based_ordinals_and_exact_offsets():
    texts = ["Autovacuum runs VACUUM. It also runs ANALYZE.", "", "One sentence only here."]
    spans = udf.sentence_spans(texts)
    assert [(o, texts[o - 1][s:e]) for o, s, e in spans] == [
        (1, "Autovacuum runs VACUUM."),
        (1, "It also runs ANALYZE."),
        (3, "One sentence only here."),
    ]


def test_vectors_come_with_their_chunk_and_offsets(monkeypatch):
    seen = []

    def fake_embed(plpy, gd, texts):
        seen.extend(texts)
        return [f"[{i}]" for i, _ in enumerate(texts)]

    monkeypatch.setattr(udf, "embed_texts", fake_embed)
    content = "Short. A second sentence that is longer."
    out = json.loads(udf.sentence_vectors(None, {}, json.dumps([{"chunk_id": 7, "content": content}])))
    expected = ["Short.", "A second sentence that is longer."]
    assert [content[o["start"] : o["end"]] for o in out] == seen == expected
    assert [o["chunk_id"] for o in out] == [7, 7] and [o["embedding"] for o in out] == ["[0]", "[1]"]
    assert json.loads(udf.sentence_vectors(None, {}, "[]")) == []


def test_spans_stop_past_max_spans_inside_one_text():
    """rag._split_sentences passes the spans a document may store: the split stops as soon as it has more,
    also in the middle of one long text (a 16 MB text of short sentences held 950 MB of spans before)."""
    texts = ["One. Two. Three.", "Four. Five."]
    assert udf.sentence_spans(texts, max_spans=5) == udf.sentence_spans(texts)
    with pytest.raises(TooManySentences):
        udf.sentence_spans(texts, max_spans=4)
    with pytest.raises(TooManySentences):
        udf.sentence_spans(["Ab. " * 100000], max_spans=10)

    class Plpy:
        def execute(self, sql):
            return []

        def error(self, message, hint=None, sqlstate=None):
            raise RuntimeError(sqlstate, message)

    with pytest.raises(RuntimeError) as e:
        udf.sentence_spans(["Ab. " * 1000], Plpy(), 10)
    assert e.value.args[0] == "54000"


def test_vectors_of_more_sentences_than_one_call_embeds_are_none():
    """rag.ask embeds the sentences of chunks stored without them on every call: past max_sentences
    (MAX_LIVE_SENTENCES) it splits no further, embeds nothing and returns None, and the caller scores those
    spans lexically."""
    passages = [{"chunk_id": 1, "content": "One. Two. Three."}, {"chunk_id": 2, "content": "Four. Five."}]
    assert udf.sentence_vectors(None, {}, json.dumps(passages), max_sentences=4) is None
    many = [{"chunk_id": 3, "content": "Zork. " * (udf.MAX_LIVE_SENTENCES + 1)}]
    assert udf.sentence_vectors(None, {}, json.dumps(many)) is None
