"""Token counting: the real tokenizer, a fallback estimate, and a memoising wrapper."""

from __future__ import annotations

import re
from collections.abc import Callable

from .checkpoint import Ticker

_ALNUM_RUN_RE = re.compile(r"[^\W_]+")


def _estimate_word(word: str) -> int:
    # WordPiece-like: every punctuation character is a token of its own, alphanumeric runs cost
    # one piece per ~6 characters.  Calibrated to ~1.3 tokens per English word.
    runs = _ALNUM_RUN_RE.findall(word)
    letters = sum(len(r) for r in runs)
    return (len(word) - letters) + sum(1 + (len(r) - 1) // 6 for r in runs)


def estimate_tokens(text: str) -> int:
    """Fallback token estimate (additive over whitespace-separated words)."""
    return sum(_estimate_word(w) for w in text.split())


def load_token_counter(tokenizer_json_path: str) -> Callable[[str], int]:
    """Return a callable counting word pieces (without special tokens) of a tokenizer.json."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_json_path)
    # tokenizer.json files often ship with truncation/padding enabled (MiniLM: 128): disable both,
    # otherwise long texts would be under-counted.
    tok.no_truncation()
    tok.no_padding()

    def count_tokens(text: str) -> int:
        if not text:
            return 0
        return len(tok.encode(text, add_special_tokens=False).ids)

    count_tokens.tokenizer = tok  # type: ignore[attr-defined]
    return count_tokens


class Counter:
    """Memoising wrapper around a token counting callable (the same text is often counted twice).

    Every count is work for ``tick`` (cancellation), and so may raise what the checkpoint raises. A call
    of the counting function cannot be interrupted: a text over _MAX_PIECE characters is counted in pieces
    cut at blanks (counters are additive over words; a word longer than that is cut where it must be).
    """

    __slots__ = ("_cache", "_chars", "_fn", "tick")

    _MAX_CHARS = 8_000_000  # bound on the memory held by the cache
    _MAX_PIECE = 1 << 18

    def __init__(self, fn: Callable[[str], int] | None, tick: Ticker | None = None):
        self._fn = fn if fn is not None else estimate_tokens
        self.tick = tick if tick is not None else Ticker(None)
        self._cache: dict[str, int] = {}
        self._chars = 0

    def __call__(self, text: str) -> int:
        self.tick()
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            n = self._count(text)
            if self._chars + len(text) > self._MAX_CHARS:
                self._cache.clear()
                self._chars = 0
            self._cache[text] = n
            self._chars += len(text)
        return n

    def _count(self, text: str) -> int:
        total = 0
        start = 0
        while start < len(text):
            end = start + self._MAX_PIECE
            if end < len(text):
                cut = max(text.rfind(" ", start + 1, end), text.rfind("\n", start + 1, end))
                if cut > start:
                    end = cut
            self.tick((end - start) >> 8)
            total += int(self._fn(text[start:end]))
            start = end
        return total
