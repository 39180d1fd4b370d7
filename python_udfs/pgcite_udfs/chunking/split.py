"""Splitting content that is over its token budget into parts, and packing small pieces back together.

Blocks (paragraphs, fenced code, tables, lists, quotes) first, then sentences, then words, then characters
as a last resort. A fenced code block is never split inside without repeating its fences; a split table
repeats its header.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator

from ..sentences import split_sentences
from .checkpoint import Ticker
from .tokens import Counter

WORD_RE = re.compile(r"\S+")
PLAIN_FIRST_RE = re.compile(r"^(?:[-*+] |\d+[.)] |>|\||```|~~~)")
_FENCE_OPEN_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# possessive quantifiers (*+, ++): a line that is not a separator fails in linear time, not quadratic; but
# not on the group, CPython 3.11 gets that wrong ("^-(?:\|-+)*+\|?$" matches "-||")
_TABLE_SEP_RE = re.compile(r"^[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*\|?[ \t]*+$")
# Fence lines and table headers are repeated in every part of a split block only up to this size.
_MAX_REPEATED_CHARS = 1024
# split_chars searches a rest of a word of up to this many budgets (or characters) whole, as it always did.
_WHOLE_SEARCH_BUDGETS = 8
_WHOLE_SEARCH_CHARS = 1024
_LIST_ITEM_RE = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+")


def fence_closes(line: str, marker: str) -> bool:
    s = line.strip()
    return s.startswith(marker) and not s.strip(marker[0])


def _split_blocks(text: str, tick: Ticker) -> list[str]:
    """Split on blank lines; fenced code blocks are kept whole and always form their own block."""
    blocks: list[str] = []
    cur: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        tick()
        if fence is not None:
            cur.append(line)
            if fence_closes(line, fence):
                fence = None
                blocks.append("\n".join(cur))
                cur = []
            continue
        m = _FENCE_OPEN_RE.match(line)
        if m:
            if cur:
                blocks.append("\n".join(cur))
            cur = [line]
            fence = m.group(1)
            continue
        if not line.strip():
            if cur:
                blocks.append("\n".join(cur))
                cur = []
            continue
        cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    return [b.strip("\n") for b in blocks if b.strip()]


def _line_spans(text: str, tick: Ticker) -> list[tuple[int, int]]:
    spans = []
    pos = 0
    for line in text.split("\n"):
        tick()
        if line.strip():
            spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def split_chars(word: str, budget: int, count: Counter) -> list[str]:
    """Pieces of at most budget tokens, each the longest that fits (at least one character)."""
    out = []
    start = 0
    while start < len(word):
        end = _longest_fit(word, start, budget, count)
        out.append(word[start:end])
        start = end
    return out


def _longest_fit(word: str, start: int, budget: int, count: Counter) -> int:
    """The end of the longest piece of word from start that fits the budget (start + 1 if none does).

    A short rest of the word is searched as it always was: the whole rest, then halving. A real tokenizer
    is not monotonic in the prefix ("nul" can take more word pieces than "null"), so another search could
    cut elsewhere. A longer rest is searched by doubling from one budget of characters and then halving:
    the work is proportional to the piece, not to the rest, so splitting a word takes linear time.
    """
    end = len(word)
    if end - start <= max(_WHOLE_SEARCH_BUDGETS * budget, _WHOLE_SEARCH_CHARS):
        return (
            end if count(word[start:]) <= budget else _bisect_fit(word, start, start + 1, end, budget, count)
        )
    fits, probe = start + 1, start + budget
    while probe < end and count(word[start:probe]) <= budget:
        fits, probe = probe, start + 2 * (probe - start)
    if probe >= end:
        if count(word[start:]) <= budget:
            return end
        probe = end
    return _bisect_fit(word, start, fits, probe - 1, budget, count)


def _bisect_fit(word: str, start: int, lo: int, hi: int, budget: int, count: Counter) -> int:
    """The largest end in lo..hi whose piece from start fits (lo if none does), by halving."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(word[start:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _pack_spans(
    src: str,
    spans: Iterable[tuple[int, int]],
    budget: int,
    count: Counter,
    split_oversize: Callable[[str, int], list[str]],
) -> list[str]:
    """Greedily group consecutive spans of src into pieces of at most budget tokens.

    A group is emitted as the original text from its first span's start to its last span's end.
    """
    out: list[str] = []
    group: list[tuple[int, int]] = []
    cost = 0

    def flush() -> None:
        if not group:
            return
        piece = src[group[0][0] : group[-1][1]]
        if len(group) > 1 and count(piece) > budget:  # counter not additive: emit one by one
            out.extend(src[s:e] for s, e in group)
        else:
            out.append(piece)
        group.clear()

    for s, e in spans:
        span = src[s:e]
        if not _fits(span, budget, count):
            flush()
            cost = 0
            out.extend(split_oversize(span, budget))
            continue
        c = count(span)
        if group and cost + c > budget:
            flush()
            cost = 0
        group.append((s, e))
        cost += c
    flush()
    return out


def split_words(text: str, budget: int, count: Counter) -> list[str]:
    spans = (m.span() for m in WORD_RE.finditer(text))
    return _pack_spans(text, spans, budget, count, lambda w, b: split_chars(w, b, count))


def _segments(text: str, starts: list[int]) -> Iterator[tuple[int, int]]:
    """Segments run from one sentence start to the next, so nothing but whitespace is ever dropped."""
    bounds = [0, *starts[1:], len(text)]
    for a, b in itertools.pairwise(bounds):
        seg = text[a:b]
        lead = len(seg) - len(seg.lstrip())
        trail = len(seg.rstrip())
        if trail > lead:
            yield (a + lead, a + trail)


def _split_paragraph(text: str, budget: int, count: Counter) -> list[str]:
    starts = [s for s, _ in split_sentences(text, count.tick)]
    if len(starts) <= 1:
        return split_words(text, budget, count)
    return _pack_spans(text, _segments(text, starts), budget, count, lambda t, b: split_words(t, b, count))


def _split_block(block: str, budget: int, count: Counter) -> list[str]:
    lines = block.split("\n")
    first = lines[0]
    m = _FENCE_OPEN_RE.match(first)
    if m and len(lines) >= 2:
        marker = m.group(1)
        closed = fence_closes(lines[-1], marker)
        closing = lines[-1] if closed else marker
        if len(first) + len(closing) <= _MAX_REPEATED_CHARS:
            body = "\n".join(lines[1:-1] if closed else lines[1:])
            inner = max(budget - count(first) - count(closing), 1)
            parts = _pack_spans(
                body, _line_spans(body, count.tick), inner, count, lambda t, b: split_words(t, b, count)
            )
            return [f"{first}\n{p}\n{closing}" for p in parts]
        # fence lines too long to repeat in every part: the block is split as lines
        return _pack_spans(
            block, _line_spans(block, count.tick), budget, count, lambda t, b: split_words(t, b, count)
        )
    if all(ln.lstrip().startswith("|") for ln in lines):
        header = lines[:2] if len(lines) > 2 and _TABLE_SEP_RE.match(lines[1]) else []
        head = "\n".join(header)
        hcost = count(head)
        if hcost > budget // 2 or len(head) > _MAX_REPEATED_CHARS:
            header, head, hcost = [], "", 0
        body = "\n".join(lines[len(header) :])
        inner = max(budget - hcost, 1)
        parts = _pack_spans(
            body, _line_spans(body, count.tick), inner, count, lambda t, b: _split_paragraph(t, b, count)
        )
        return [f"{head}\n{p}" if head else p for p in parts]
    lm = _LIST_ITEM_RE.match(first)
    if lm:
        indent = len(lm.group(1))
        spans: list[tuple[int, int]] = []
        pos = 0
        for line in lines:
            count.tick()
            im = _LIST_ITEM_RE.match(line)
            if (im and len(im.group(1)) <= indent) or not spans:
                spans.append((pos, pos + len(line)))
            else:
                spans[-1] = (spans[-1][0], pos + len(line))
            pos += len(line) + 1
        return _pack_spans(block, spans, budget, count, lambda t, b: _split_paragraph(t, b, count))
    if first.lstrip().startswith(">"):
        qcost = count(">")

        def split_quote_line(line: str, b: int) -> list[str]:
            inner = line.lstrip()[1:].lstrip()
            return ["> " + p for p in _split_paragraph(inner, max(b - qcost, 1), count)]

        return _pack_spans(block, _line_spans(block, count.tick), budget, count, split_quote_line)
    return _split_paragraph(block, budget, count)


def _is_lead_in(piece: str) -> bool:
    """A short one-line paragraph introducing what follows: "Table 8.2. Numeric Types", "Example:"."""
    if "\n" in piece or len(piece) > 200 or PLAIN_FIRST_RE.match(piece):
        return False
    tail = piece.rstrip()
    return tail.endswith(":") or not tail.endswith((".", "!", "?", ";", ")", "\u201d", '"'))


def _pack_strings(pieces: list[str], budget: int, count: Counter, sep: str = "\n\n") -> list[str]:
    out: list[str] = []
    group: list[str] = []
    cost = 0

    def flush() -> None:
        if not group:
            return
        joined = sep.join(group)
        if len(group) > 1 and count(joined) > budget:
            out.extend(group)
        else:
            out.append(joined)
        group.clear()

    for p in pieces:
        c = count(p)
        if group and cost + c > budget:
            carry = None
            if len(group) > 1 and _is_lead_in(group[-1]) and count(group[-1]) + c <= budget:
                carry = group.pop()  # keep a caption / lead-in with what it introduces
            flush()
            cost = 0
            if carry is not None:
                group.append(carry)
                cost = count(carry)
        group.append(p)
        cost += c
    flush()
    return out


def _fits(text: str, budget: int, count: Counter) -> bool:
    # Every whitespace-separated word is at least one word piece: a cheap way to reject long texts
    # without tokenizing them (tokenizing is what dominates the run time).
    if len(text) > budget and len(text.split()) > budget:
        return False
    return count(text) <= budget


def split_content(content: str, budget: int, count: Counter) -> list[str]:
    if _fits(content, budget, count):
        return [content]
    pieces: list[str] = []
    for block in _split_blocks(content, count.tick):
        if _fits(block, budget, count):
            pieces.append(block)
            continue
        lead = None
        if pieces and _is_lead_in(pieces[-1]) and count(pieces[-1]) <= budget // 4:
            lead = pieces.pop()  # the caption goes with the first part of the split block
        parts = _split_block(block, budget - count(lead) if lead else budget, count)
        if lead is not None:
            parts[0] = lead + "\n\n" + parts[0]
        pieces.extend(parts)
    return _pack_strings(pieces, budget, count)
