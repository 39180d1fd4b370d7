"""Markdown documents: sections on ATX and setext headings, never inside code fences."""

from __future__ import annotations

import re
from collections.abc import Callable

from .checkpoint import Ticker
from .errors import MAX_DOCUMENT_BYTES, check_size
from .result import ParseResult
from .sections import Section, Slugger, build_chunks, norm
from .split import fence_closes
from .tokens import Counter

_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_CONTAINER_RE = re.compile(r"^[ \t]*(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|\|)")
MD_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _md_plain(text: str) -> str:
    """Inline Markdown to plain text (for heading titles and slugs)."""
    s = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", s)
    s = re.sub(r"<[^>\n]+>", "", s)
    s = s.replace("`", "")
    s = re.sub(r"(\*\*|__)(.+?)\1", r"\2", s)
    s = re.sub(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])", r"\1", s)
    s = re.sub(r"(?<!\w)_(\S(?:.*?\S)?)_(?!\w)", r"\1", s)
    return norm(s)


def _front_matter(lines: list[str]) -> tuple[int, str | None]:
    """YAML front matter: return (number of lines it spans, its title)."""
    if not lines or lines[0].strip() != "---":
        return 0, None
    for i in range(1, min(len(lines), 200)):
        if lines[i].strip() in ("---", "..."):
            title = None
            for ln in lines[1:i]:
                m = re.match(r"^title:\s*(.+?)\s*$", ln)
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
        kept, rest = [], line
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                else:
                    rest, in_comment = rest[end + 3 :], False
            else:
                start = rest.find("<!--")
                if start < 0:
                    kept.append(rest)
                    rest = ""
                else:
                    kept.append(rest[:start])
                    rest, in_comment = rest[start + 4 :], True
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
            text = _ATX_CLOSE_RE.sub("", m.group(2) or "")
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
        chunk = lines[a:b]
        while chunk and not chunk[0].strip():
            chunk.pop(0)
        return "\n".join(chunk).rstrip()

    sections: list[Section] = []
    first = headings[0][0] if headings else len(lines)
    pre = body(skip, first)
    if pre.strip():
        sections.append(Section(None, doc_title or "", "", pre))
    slug = Slugger()
    stack: list[tuple[int, str]] = []
    for k, (_start, after, level, title) in enumerate(headings):
        tick()
        end = headings[k + 1][0] if k + 1 < len(headings) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        path = " > ".join(t for _, t in stack)
        stack.append((level, title))
        sections.append(Section(slug(title), title, path, body(after, end)))
    result.sections_found = len(sections)
    result.chunks, result.empty_sections = build_chunks(sections, max_tokens, count)
    return result
