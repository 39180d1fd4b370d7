"""Markdown documents: sections on ATX and setext headings, never inside code fences."""

from __future__ import annotations

import re
from collections.abc import Callable

from .checkpoint import Ticker
from .errors import MAX_DOCUMENT_BYTES, check_size
from .result import ParseResult
from .sections import Section, Slugger, build_chunks, extend_path, norm
from .split import fence_closes
from .tokens import Counter

_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]++(.*))?$")  # the text's trailing blanks are stripped after
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_CONTAINER_RE = re.compile(r"^[ \t]*(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|\|)")
MD_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# the value without the blanks around it (or the last blank of an all-blank value), without backtracking
_TITLE_RE = re.compile(r"title:\s*(\S(?:.*\S)?|\s)\s*$")


# Inline markup in a heading (one line). Each pattern is the construct (its text in group 1) or, after
# "|", the stretch that the construct failing at this place proves cannot hold a match either: skipped as
# it is instead of scanned again from every later position, which took quadratic time on "[[[[...",
# "<<<<..." or "*a *a *a ...".
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\([^)]*\)|!\[[^\]]*+(?:\]\([^)]*+)?")
_LINK_RE = re.compile(r"\[([^\]]*)\]\([^)]*\)|\[[^\]]*+(?:\]\([^)]*+)?")
_REF_LINK_RE = re.compile(r"\[([^\]]*)\]\[[^\]]*\]|\[[^\]]*+(?:\]\[[^\]]*+)?")
_TAG_RE = re.compile(r"<([^>\n]+)>|<[^>\n]*+")
_BOLD_RE = re.compile(r"(\*\*|__)(.+?)\1")
_STAR_RE = re.compile(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])|(?<![\w*])\*\S.*")
_UNDERSCORE_RE = re.compile(r"(?<!\w)_(\S(?:.*?\S)?)_(?!\w)|(?<!\w)_\S.*")


def _text_of(m: re.Match) -> str:
    return m.group() if m.group(1) is None else m.group(1)


def _md_plain(text: str) -> str:
    """Inline Markdown to plain text (for heading titles and slugs), in time linear in the text."""
    s = _IMAGE_RE.sub(_text_of, text)
    s = _LINK_RE.sub(_text_of, s)
    s = _REF_LINK_RE.sub(_text_of, s)
    s = _TAG_RE.sub(lambda m: m.group() if m.group(1) is None else "", s)
    s = s.replace("`", "")
    s = _BOLD_RE.sub(r"\2", s)
    s = _STAR_RE.sub(_text_of, s)
    s = _UNDERSCORE_RE.sub(_text_of, s)
    return norm(s)


def _strip_closing_hashes(text: str) -> str:
    """An ATX heading's closing sequence removed: "Title ##" -> "Title", "###" -> "", "C#" stays."""
    body = text.rstrip("#")
    if not body:
        return ""
    if len(body) < len(text) and body[-1] in " \t":
        return body.rstrip(" \t")
    return text


def _front_matter(lines: list[str]) -> tuple[int, str | None]:
    """YAML front matter: return (number of lines it spans, its title)."""
    if not lines or lines[0].strip() != "---":
        return 0, None
    for i in range(1, min(len(lines), 200)):
        if lines[i].strip() in ("---", "..."):
            title = None
            for ln in lines[1:i]:
                m = _TITLE_RE.match(ln)
                if m:
                    title = m.group(1).strip("\"'") or None
            if all(re.match(r"^([\w-]+:|\s|-\s|#)", ln) or not ln.strip() for ln in lines[1:i]):
                return i + 1, title
            return 0, None
    return 0, None


def _drop_md_comments(lines: list[str], tick: Ticker) -> list[str]:
    """HTML comments (`<!-- ... -->`, possibly over several lines) removed outside code fences: they are
    not rendered, so they are not content (markdownlint directives, YAML history notes). Line count kept."""
    out: list[str] = []
    fence: str | None = None
    in_comment = False
    for line in lines:
        tick()
        if fence is not None:
            if fence_closes(line, fence):
                fence = None
            out.append(line)
            continue
        if not in_comment:
            m = MD_FENCE_RE.match(line)
            if m:
                fence = m.group(1)
                out.append(line)
                continue
        kept, pos = [], 0
        while pos < len(line):
            if in_comment:
                end = line.find("-->", pos)
                if end < 0:
                    pos = len(line)
                else:
                    pos, in_comment = end + 3, False
            else:
                start = line.find("<!--", pos)
                if start < 0:
                    kept.append(line[pos:])
                    pos = len(line)
                else:
                    kept.append(line[pos:start])
                    pos, in_comment = start + 4, True
        text = "".join(kept)
        out.append(text if text.strip() or not line.strip() else "")
    return out


def chunk_markdown(
    md: str,
    max_tokens: int = 256,
    count_tokens=None,
    *,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    checkpoint: Callable[[], object] | None = None,
) -> ParseResult:
    """Chunk Markdown on ATX and setext headings (never inside code fences); HTML comments are dropped.

    At most ``max_bytes`` bytes of UTF-8 (InputError 54000 beyond). ``checkpoint`` is called now and then
    (every few hundred lines or token counts); what it raises stops the work.
    """
    check_size(md, max_bytes)
    tick = Ticker(checkpoint)
    count = Counter(count_tokens, tick)
    result = ParseResult(format="markdown")
    lines = _drop_md_comments(md.replace("\r\n", "\n").replace("\r", "\n").split("\n"), tick)
    skip, fm_title = _front_matter(lines)

    # (first line, line after the heading, level, title)
    headings: list[tuple[int, int, int, str]] = []
    fence: str | None = None
    para_start: int | None = None
    in_container = False
    for i in range(skip, len(lines)):
        tick()
        line = lines[i]
        if fence is not None:
            if fence_closes(line, fence):
                fence = None
            continue
        m = MD_FENCE_RE.match(line)
        if m:
            fence = m.group(1)
            para_start = None
            continue
        if not line.strip():
            para_start = None
            in_container = False
            continue
        m = _ATX_RE.match(line)
        if m:
            text = _strip_closing_hashes((m.group(2) or "").rstrip(" \t"))
            headings.append((i, i + 1, len(m.group(1)), _md_plain(text)))
            para_start = None
            in_container = False
            continue
        m = _SETEXT_RE.match(line)
        if m and para_start is not None:
            text = " ".join(ln.strip() for ln in lines[para_start:i])
            headings.append((para_start, i + 1, 1 if m.group(1)[0] == "=" else 2, _md_plain(text)))
            para_start = None
            continue
        if _MD_CONTAINER_RE.match(line):
            in_container = True
            para_start = None
        elif para_start is None and not in_container and not line.startswith(("    ", "\t")):
            para_start = i

    doc_title = fm_title or next((h[3] for h in headings if h[3]), None)
    result.title = doc_title

    def body(a: int, b: int) -> str:
        while a < b and not lines[a].strip():
            a += 1
        return "\n".join(lines[a:b]).rstrip()

    sections: list[Section] = []
    first = headings[0][0] if headings else len(lines)
    pre = body(skip, first)
    if pre.strip():
        sections.append(Section(None, doc_title or "", "", pre))
    slug = Slugger()
    stack: list[tuple[int, str]] = []  # (level, path with the heading's own title)
    for k, (_start, after, level, title) in enumerate(headings):
        tick()
        end = headings[k + 1][0] if k + 1 < len(headings) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        path = stack[-1][1] if stack else ""
        stack.append((level, extend_path(path if stack else None, title)))
        sections.append(Section(slug(title), title, path, body(after, end)))
    result.sections_found = len(sections)
    result.chunks, result.empty_sections = build_chunks(sections, max_tokens, count)
    return result
