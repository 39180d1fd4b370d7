"""Sections (anchor, title, path, content) and how they become chunks within the window."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .result import Chunk
from .split import split_content, split_words
from .tokens import Counter

_WS_RE = re.compile(r"\s+")


def norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def content_budget(max_tokens: int, title: str, count: Counter) -> int:
    return max(max_tokens - 2 - count(title) - 2, 1)


def clip_title(title: str, max_tokens: int, count: Counter) -> str:
    """Titles may take at most a quarter of the window (a setext "heading" can be a whole paragraph)."""
    limit = max(max_tokens // 4, 2)
    if count(title) <= limit:
        return title
    words = title.split()
    kept: list[str] = []
    used = count("\u2026")
    for w in words:
        c = count(w)
        if used + c > limit:
            break
        kept.append(w)
        used += c
    clipped = " ".join(kept) + " \u2026" if kept else ""
    return clipped if count(clipped) <= limit else ""


@dataclass
class Section:
    anchor: str | None
    title: str
    path: str
    content: str


def build_chunks(sections: list[Section], max_tokens: int, count: Counter) -> tuple[list[Chunk], list[str]]:
    chunks: list[Chunk] = []
    empty: list[str] = []
    for sec in sections:
        count.tick()
        if not sec.content.strip():
            empty.append(sec.anchor if sec.anchor else sec.title)
            continue
        sec.title = clip_title(sec.title, max_tokens, count)
        budget = content_budget(max_tokens, sec.title, count)
        for part in split_content(sec.content, budget, count):
            part = part.strip()
            if not part:
                continue
            n = count(part)
            # re-split only happens with a counter that is not additive over words
            if n <= budget:
                subparts = [(part, n)]
            else:
                subparts = [(p, count(p)) for p in split_words(part, budget, count)]
            for text, tokens in subparts:
                chunks.append(Chunk(len(chunks), sec.anchor, sec.path, sec.title, text, tokens))
    return chunks, empty


def _slugify(text: str) -> str:
    s = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return s.replace(" ", "-")


class Slugger:
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.taken: set[str] = set()

    def __call__(self, text: str) -> str:
        base = _slugify(text) or "section"
        slug = base
        if base in self.counts or base in self.taken:
            n = self.counts.get(base, 0)
            while True:
                n += 1
                slug = f"{base}-{n}"
                if slug not in self.taken:
                    break
            self.counts[base] = n
        else:
            self.counts[base] = 0
        self.taken.add(slug)
        return slug
