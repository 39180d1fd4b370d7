"""Which question words are ordinary English words, for spelling correction.

The model's WordPiece vocabulary (tokenizer.json) lists about 22,500 whole English words. A question word
that the tenant's corpus does not contain but that is one of them ("spill", "sentence", "stay") is a real
word, not a typo, and must not be "corrected" into a corpus word a couple of edits away ("still",
"sequence", "star"). Misspellings ("vacum", "indx", "bakup") and names ("pg_basebakup") are not whole
entries of the vocabulary, so they stay candidates for correction.
"""

from __future__ import annotations

from collections.abc import Iterable


def whole_words(vocab: Iterable[str]) -> frozenset[str]:
    """The whole alphabetic words of a WordPiece vocabulary (continuations `##x` excluded)."""
    return frozenset(w for w in vocab if w.isascii() and w.isalpha() and len(w) > 1)


def load_vocabulary(tokenizer_json_path: str) -> frozenset[str]:
    """whole_words of a tokenizer.json."""
    from tokenizers import Tokenizer

    return whole_words(Tokenizer.from_file(tokenizer_json_path).get_vocab())


def common_words(vocabulary: frozenset[str], words: Iterable[str | None]) -> list[str]:
    """The words (lower-cased) that are whole English words of the vocabulary, in input order, once each."""
    seen: set[str] = set()
    out: list[str] = []
    for w in words:
        if w is None:
            continue
        lw = w.lower()
        if lw in vocabulary and lw not in seen:
            seen.add(lw)
            out.append(lw)
    return out
