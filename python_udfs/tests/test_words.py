"""words.py against the real tokenizer.json of the shipped model."""

from __future__ import annotations

import pytest
from pgcite_udfs import embed
from pgcite_udfs.words import common_words, load_vocabulary


@pytest.fixture(scope="module")
def vocabulary():
    return load_vocabulary(embed.tokenizer_path())


def test_vocabulary_is_whole_english_words(vocabulary):
    assert 20_000 < len(vocabulary) < 30_000
    assert {"spill", "sentence", "index", "vacuum"} <= vocabulary
    assert not any(w.startswith("##") or not w.isalpha() for w in vocabulary)


def test_real_words_are_told_from_typos_and_names(vocabulary):
    words = ["Spill", "sentence", "vacum", "indx", "bakup", "pg_basebakup", "wraparund", "stay", None]
    words.append("spill")
    assert common_words(vocabulary, words) == ["spill", "sentence", "stay"]
    assert common_words(vocabulary, []) == []
