"""Sentence spans for extractive answers.

``split_sentences(text)`` returns ``(start, end)`` character offsets into ``text``; ``text[start:end]``
is one sentence (or one structural unit) with surrounding whitespace stripped.  Spans are in order and
never overlap.

Structural units are never merged with their neighbours:

* a fenced code block (```` ``` ```` / ``~~~``) is one unit and is never split inside;
* a Markdown table row is one unit (separator rows such as ``|---|---|`` are skipped);
* an ATX heading line is one unit;
* a list item (with its continuation lines) and a blockquote line are units of their own, but may
  contain several sentences, which are split;
* paragraphs end at blank lines.

Inside a paragraph a sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by
whitespace and an uppercase letter, a digit, a quote or an opening bracket, except after common
abbreviations (``e.g.``, ``i.e.``, ``etc.``, ``vs.``, ``cf.``, ``Fig.``, ``No. 5``, ``approx.`` ...),
single-letter initials, dotted initialisms (``U.S.``), or a leading number such as a list or section
number (``25.1.5. Preventing ...``).  Decimal numbers and version strings (``9.6``, ``15.2.1``) never
split because their dots are not followed by whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["split_sentences"]

# Abbreviations (lowercase, without the final dot) after which a dot does not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "e.g",
        "i.e",
        "etc",
        "vs",
        "cf",
        "fig",
        "figs",
        "approx",
        "ca",
        "viz",
        "esp",
        "incl",
        "resp",
        "ref",
        "refs",
        "eq",
        "eqs",
        "sec",
        "sect",
        "ch",
        "chap",
        "vol",
        "vols",
        "pp",
        "al",
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "inc",
        "ltd",
        "corp",
        "dept",
        "ed",
        "eds",
        "ibid",
        "op",
        "var",
        "ver",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    }
)
# Abbreviations that only count as such when a number follows ("No. 5", "p. 12").
_NUMBER_ABBREVIATIONS = frozenset({"no", "nos", "p", "art"})

_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_TABLE_RE = re.compile(r"[ \t]*\|")
# possessive quantifiers (*+, ++): a line that is not a separator fails in linear time, not quadratic; but
# not on the group, CPython 3.11 gets that wrong ("^-(?:\|-+)*+\|?$" matches "-||")
_TABLE_SEP_RE = re.compile(r"[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*\|?[ \t]*+$")
_HEADING_RE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_LIST_RE = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_QUOTE_RE = re.compile(r"[ \t]*>")
_NUMERIC_RE = re.compile(r"\(?\d+(?:\.\d+)*\)?")

# Candidate sentence end: terminal punctuation, optional closers, whitespace, then the next char. Or, after
# "|", the rest of a run of punctuation that is no candidate: every later start in the run would fail the
# same way, and trying them all took quadratic time on a long run of dots.
_END_RE = re.compile(r"([.!?]++)([\"'\u201d\u2019)\]*_`]*+)(\s+)(\S)|[.!?]++")
_OPENERS = frozenset("\"'\u201c\u2018\u00ab([{`*")
_LEADING_JUNK = "\"'\u201c\u2018\u00ab([{*_`"


def _strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _line_kind(line: str) -> str:
    stripped = line.strip()
    if not stripped or stripped.strip(">").strip() == "":
        return "blank"  # also an empty blockquote line (">"), which separates quoted paragraphs
    if _FENCE_RE.match(line):
        return "fence"
    if _TABLE_RE.match(line):
        return "table"
    if _HEADING_RE.match(line):
        return "heading"
    if _QUOTE_RE.match(line):
        return "quote"
    if _LIST_RE.match(line):
        return "list"
    return "text"


def _no_tick() -> None:
    pass


def _units(text: str, tick: Callable[[], None]) -> list[tuple[int, int, bool]]:
    """Split text into structural units: (start, end, splittable)."""
    lines: list[tuple[int, int]] = []
    pos = 0
    n = len(text)
    while pos <= n:
        nl = text.find("\n", pos)
        if nl < 0:
            lines.append((pos, n))
            break
        lines.append((pos, nl))
        pos = nl + 1

    units: list[tuple[int, int, bool]] = []
    i = 0
    count = len(lines)
    para_start: int | None = None
    para_end = 0

    def close_para() -> None:
        nonlocal para_start
        if para_start is not None:
            units.append((para_start, para_end, True))
            para_start = None

    while i < count:
        tick()
        ls, le = lines[i]
        line = text[ls:le]
        kind = _line_kind(line)
        if kind == "blank":
            close_para()
            i += 1
        elif kind == "fence":
            close_para()
            m = _FENCE_RE.match(line)
            marker = m.group(1)
            j = i + 1
            end = le
            while j < count:
                tick()
                js, je = lines[j]
                stripped = text[js:je].strip()
                end = je
                if stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0]):
                    break
                j += 1
            units.append((ls, end, False))
            i = j + 1
        elif kind == "table":
            close_para()
            if not _TABLE_SEP_RE.match(line):
                units.append((ls, le, False))
            i += 1
        elif kind == "heading":
            close_para()
            units.append((ls, le, False))
            i += 1
        elif kind == "quote":
            close_para()
            units.append((ls, le, True))
            i += 1
        elif kind == "list":
            close_para()
            end = le
            j = i + 1
            while j < count:
                tick()
                js, je = lines[j]
                if _line_kind(text[js:je]) != "text":
                    break
                end = je
                j += 1
            units.append((ls, end, True))
            i = j
        else:
            if para_start is None:
                para_start = ls
            para_end = le
            i += 1
    close_para()
    return units


def _is_boundary(text: str, unit_start: int, sent_start: int, punct_pos: int, punct: str, nxt: str) -> bool:
    if not (nxt.isupper() or nxt.isdigit() or nxt in _OPENERS):
        return False
    if punct != ".":
        return True  # "!", "?", "?!", "..." and the like
    # The word right before the dot.
    ws = punct_pos
    while ws > unit_start and not text[ws - 1].isspace():
        ws -= 1
    word = text[ws:punct_pos].lstrip(_LEADING_JUNK)
    if not word:
        return True
    lower = word.lower()
    if lower in _ABBREVIATIONS:
        return False
    if lower in _NUMBER_ABBREVIATIONS and nxt.isdigit():
        return False
    if len(word) == 1 and word.isalpha():
        return False  # single-letter initial: "J. Smith"
    if "." in word:
        parts = word.split(".")
        if all(len(p) <= 2 and p.isalpha() for p in parts):
            return False  # dotted initialism: "U.S.", "e.g.", "a.m."
    # a leading list/section number ("1. Foo", "25.1.5. Preventing") does not end a sentence
    return not (_NUMERIC_RE.fullmatch(word) and not text[sent_start:ws].strip(" \t\n-*+>#"))


class TooManySentences(ValueError):
    """More sentences than the caller's max_spans."""


def _split_unit(
    text: str,
    start: int,
    end: int,
    out: list[tuple[int, int]],
    tick: Callable[[], None],
    max_spans: int | None = None,
) -> None:
    sent_start = start
    for m in _END_RE.finditer(text, start, end):
        tick()
        if m.group(1) is None:
            continue
        punct_pos = m.start(1)
        if _is_boundary(text, start, sent_start, punct_pos, m.group(1), m.group(4)):
            span = _strip_span(text, sent_start, m.end(2))
            if span:
                out.append(span)
                if max_spans is not None and len(out) > max_spans:
                    raise TooManySentences(f"more than {max_spans} sentences")
            sent_start = m.start(4)
    span = _strip_span(text, sent_start, end)
    if span:
        out.append(span)


def split_sentences(
    text: str, tick: Callable[[], None] = _no_tick, max_spans: int | None = None
) -> list[tuple[int, int]]:
    """Return (start, end) offsets of the sentences / structural units of ``text``, in order.

    ``tick`` is called for every line and every candidate sentence end (the chunker's cancellation).
    With ``max_spans``, TooManySentences is raised as soon as there are more spans than that.
    """
    if not text:
        return []
    spans: list[tuple[int, int]] = []
    for start, end, splittable in _units(text, tick):
        if splittable:
            _split_unit(text, start, end, spans, tick, max_spans)
        else:
            span = _strip_span(text, start, end)
            if span:
                spans.append(span)
        if max_spans is not None and len(spans) > max_spans:
            raise TooManySentences(f"more than {max_spans} sentences")
    return spans
