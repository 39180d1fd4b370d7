"""Sections (anchor, title, path, content) and how they become chunks within the window."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .result import Chunk
from .split import split_content, split_words
from .tokens import Counter

_WS_RE = re.compile(r"\s+")

# Every chunk repeats its section's anchor, title and path: they are bounded, so that the chunks of a
# document stay proportional to it (a heading of a megabyte above a thousand subsections would not be).
MAX_ANCHOR_CHARS = 256
MAX_PATH_CHARS = 1024
_TITLE_CHARS_PER_TOKEN = 8  # a title of a quarter of the window has at most 8 characters a token


def norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def content_budget(max_tokens: int, title: str, count: Counter) -> int:
    return max(max_tokens - 2 - count(title) - 2, 1)


def clip_title(title: str, max_tokens: int, count: Counter) -> str:
    """Titles may take at most a quarter of the window (a setext "heading" can be a whole paragraph), and
    _TITLE_CHARS_PER_TOKEN characters a token of that (a long word can be a single token)."""
    limit = max(max_tokens // 4, 2)
    if count(title) > limit:
        title = _clip_words(title, limit, count)
    max_chars = limit * _TITLE_CHARS_PER_TOKEN
    if len(title) > max_chars:
        clipped = title[: max_chars - 2] + " \u2026"
        title = clipped if count(clipped) <= limit else ""
    return title


def _clip_words(title: str, limit: int, count: Counter) -> str:
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


def extend_path(path: str | None, title: str) -> str:
    """The path of a section's subsections: its own path (None for a section at the top) and its title,
    the outer titles dropped ("\u2026 > inner > title") beyond MAX_PATH_CHARS."""
    if path is None:
        full = title[-MAX_PATH_CHARS:]
    else:
        full = f"{path[-MAX_PATH_CHARS:]} > {title[-MAX_PATH_CHARS:]}"
    if len(full) <= MAX_PATH_CHARS and len(title) <= MAX_PATH_CHARS:
        return full
    cut = full.find(" > ", len(full) - MAX_PATH_CHARS + 1)
    return "\u2026" + (full[cut:] if cut >= 0 else full[len(full) - MAX_PATH_CHARS + 1 :])


def _slugify(text: str) -> str:
    s = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return s.replace(" ", "-")


class Slugger:
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.taken: set[str] = set()

    def __call__(self, text: str) -> str:
        base = _slugify(text)[:MAX_ANCHOR_CHARS] or "section"
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
