"""Guessing the format of a document: HTML, Markdown or plain text."""

from __future__ import annotations

import re

from .markdown import MD_FENCE_RE
from .split import fence_closes

_HTML_DOC_RE = re.compile(r"<!doctype\s+html|<html[\s>]|<body[\s>]|<head[\s>]", re.IGNORECASE)
_HTML_TAG_RE = re.compile(
    r"</?(p|div|span|a|br|hr|h[1-6]|table|tr|td|th|thead|tbody|ul|ol|li|pre|code|em|strong|b|i|"
    r"img|section|article|nav|main|header|footer|dl|dt|dd|blockquote|title|meta|link|script|style|"
    r"form|input|label|sup|sub|small|tt|font|center|iframe)(?:\s[^<>]*)?/?>",
    re.IGNORECASE,
)
ANY_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")
_MD_ATX_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_MD_FENCE_LINE = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)
_MD_LIST_LINE = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.MULTILINE)
# a line with text, then an underline; possessive, and \S is its first non-blank: no backtracking
_MD_SETEXT = re.compile(r"^[^\S\n]*+\S[^\n]*+\n {0,3}(?:=+|-{2,})[ \t]*+$", re.MULTILINE)
_MD_TABLE_LINE = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)
_LINK_LABEL_END = re.compile(r"[\]\n]")
_LINK_URL_END = re.compile(r"[)\s]")
_MD_EMPH = re.compile(r"\*\*[^*\n]+\*\*|`[^`\n]+`")
_MD_QUOTE = re.compile(r"^[ \t]*> ", re.MULTILINE)


def _strip_fenced(text: str) -> str:
    out = []
    fence = None
    for line in text.split("\n"):
        if fence is not None:
            if fence_closes(line, fence):
                fence = None
            continue
        m = MD_FENCE_RE.match(line)
        if m:
            fence = m.group(1)
            continue
        out.append(line)
    return "\n".join(out)


SAMPLE_CHARS = 200_000


def _count_links(text: str) -> int:
    """len(re.findall(r"\\[[^\\]\\n]+\\]\\([^)\\s]+\\)", text)) in linear time.

    The regex tries every "[" and scans to the "]" and on to the ")": on "[a](x[a](x[a](x..." every try
    scans to the end. Here every "[" up to the same "]" shares the first one's fate, and a URL scan that
    fails at a blank (or the end) fails the same way for every "](" before that blank.
    """
    links = 0
    dead = -1  # a URL starting at or before this position fails
    p = text.find("[")
    while p >= 0:
        m = _LINK_LABEL_END.search(text, p + 1)
        if m is None:
            break
        q = m.start()
        resume = q + 1
        if text[q] == "]" and q > p + 1 and text.startswith("(", q + 1) and q + 2 > dead:
            r = _LINK_URL_END.search(text, q + 2)
            if r is None:
                break
            if text[r.start()] == ")" and r.start() > q + 2:
                links += 1
                resume = r.start() + 1
            elif text[r.start()] != ")":
                dead = r.start()
        p = text.find("[", resume)
    return links


def detect_format(body: str) -> str:
    """Guess 'html', 'markdown' or 'text' from the first SAMPLE_CHARS characters (so any size of body)."""
    sample = body[:SAMPLE_CHARS]
    head = sample[:4096]
    if _HTML_DOC_RE.search(head):
        return "html"
    stripped = _strip_fenced(sample)
    tags = _HTML_TAG_RE.findall(stripped)
    md_headings = len(_MD_ATX_LINE.findall(stripped)) + len(_MD_SETEXT.findall(stripped))
    fences = len(_MD_FENCE_LINE.findall(sample)) // 2
    md_score = (
        3 * md_headings
        + 3 * fences
        + len(_MD_LIST_LINE.findall(stripped))
        + len(_MD_TABLE_LINE.findall(stripped))
        + _count_links(stripped)
        + 0.5 * len(_MD_EMPH.findall(stripped))
        + 0.5 * len(_MD_QUOTE.findall(stripped))
    )
    if len(tags) >= 3 and len({t.lower() for t in tags}) >= 2 and len(tags) > md_score:
        return "html"
    first_line = stripped.lstrip("\n").split("\n", 1)[0]
    if md_score >= 4 or (md_headings and _MD_ATX_LINE.match(first_line)) or fences:
        return "markdown"
    return "text"
