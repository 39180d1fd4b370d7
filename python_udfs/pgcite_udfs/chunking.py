"""Structure-aware parsing and chunking of HTML (DocBook and generic), Markdown and plain text.

Every chunk is meant to be embedded as ``title + "\\n\\n" + content`` by a model whose window is
``max_tokens`` word pieces including 2 special tokens, so a section's content budget is
``max_tokens - 2 - tokens(title) - 2``.  Sections longer than the budget are split into parts (on
paragraph/block boundaries first, then sentences, then words, then characters as a last resort); all
parts keep the section's anchor, title and section_path.  A title longer than a quarter of the window
(e.g. a setext "heading" that is a whole paragraph) is clipped with an ellipsis so chunks always fit.

Token counting: ``count_tokens`` is a callable ``str -> int``.  ``load_token_counter()`` builds the
real one from a HuggingFace ``tokenizer.json`` (word pieces without special tokens).  Without one, a
WordPiece-like estimate is used (``estimate_tokens``).  Both are additive over whitespace-separated
words, which the packer relies on for speed; every emitted chunk is re-counted and re-split if a
non-additive counter makes it overflow.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from .sentences import split_sentences

# Bump when the chunks produced for the same input change: rag.ingest folds it into a document's hash,
# so re-ingesting after an upgrade re-chunks (reusing the embeddings of unchanged chunk texts) instead of
# reporting "unchanged". 2: HTML comments dropped from Markdown.
CHUNKER_VERSION = 2

__all__ = [
    "Chunk",
    "InputError",
    "ParseResult",
    "chunk_html",
    "chunk_markdown",
    "chunk_text",
    "detect_format",
    "estimate_tokens",
    "load_token_counter",
    "parse",
]

FORMATS = ("html", "markdown", "text")


class InputError(ValueError):
    """Invalid input, carrying the SQLSTATE / HINT / DETAIL to raise in PostgreSQL."""

    def __init__(
        self,
        message: str,
        *,
        sqlstate: str = "22023",
        hint: str | None = None,
        detail: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.hint = hint
        self.detail = detail


@dataclass(frozen=True)
class Chunk:
    chunk_index: int
    anchor: str | None
    section_path: str
    title: str
    content: str
    token_count: int


@dataclass
class ParseResult:
    format: str
    chunks: list[Chunk] = field(default_factory=list)
    sections_found: int = 0
    empty_sections: list[str] = field(default_factory=list)
    title: str | None = None


# --------------------------------------------------------------------------------------------------
# Token counting
# --------------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"\S+")
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


class _Counter:
    """Memoising wrapper around a token counting callable (the same text is often counted twice)."""

    __slots__ = ("_cache", "_chars", "_fn")

    _MAX_CHARS = 8_000_000  # bound on the memory held by the cache

    def __init__(self, fn: Callable[[str], int] | None):
        self._fn = fn if fn is not None else estimate_tokens
        self._cache: dict[str, int] = {}
        self._chars = 0

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            n = int(self._fn(text))
            if self._chars + len(text) > self._MAX_CHARS:
                self._cache.clear()
                self._chars = 0
            self._cache[text] = n
            self._chars += len(text)
        return n


def _budget(max_tokens: int, title: str, count: _Counter) -> int:
    return max(max_tokens - 2 - count(title) - 2, 1)


def _clip_title(title: str, max_tokens: int, count: _Counter) -> str:
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


# --------------------------------------------------------------------------------------------------
# Splitting long content
# --------------------------------------------------------------------------------------------------

_FENCE_OPEN_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_TABLE_SEP_RE = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_LIST_ITEM_RE = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+")


def _fence_closes(line: str, marker: str) -> bool:
    s = line.strip()
    return s.startswith(marker) and not s.strip(marker[0])


def _split_blocks(text: str) -> list[str]:
    """Split on blank lines; fenced code blocks are kept whole and always form their own block."""
    blocks: list[str] = []
    cur: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            cur.append(line)
            if _fence_closes(line, fence):
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


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    pos = 0
    for line in text.split("\n"):
        if line.strip():
            spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def _split_chars(word: str, budget: int, count: _Counter) -> list[str]:
    out = []
    rest = word
    while rest:
        if count(rest) <= budget:
            out.append(rest)
            break
        lo, hi = 1, len(rest)  # find the longest prefix that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(rest[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        out.append(rest[:lo])
        rest = rest[lo:]
    return out


def _pack_spans(
    src: str,
    spans: list[tuple[int, int]],
    budget: int,
    count: _Counter,
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
        c = count(src[s:e])
        if c > budget:
            flush()
            cost = 0
            out.extend(split_oversize(src[s:e], budget))
            continue
        if group and cost + c > budget:
            flush()
            cost = 0
        group.append((s, e))
        cost += c
    flush()
    return out


def _split_words(text: str, budget: int, count: _Counter) -> list[str]:
    spans = [m.span() for m in _WORD_RE.finditer(text)]
    return _pack_spans(text, spans, budget, count, lambda w, b: _split_chars(w, b, count))


def _split_paragraph(text: str, budget: int, count: _Counter) -> list[str]:
    starts = [s for s, _ in split_sentences(text)]
    if len(starts) <= 1:
        return _split_words(text, budget, count)
    # Segments run from one sentence start to the next, so nothing but whitespace is ever dropped.
    bounds = [0, *starts[1:], len(text)]
    spans = []
    for a, b in itertools.pairwise(bounds):
        seg = text[a:b]
        lead = len(seg) - len(seg.lstrip())
        trail = len(seg.rstrip())
        if trail > lead:
            spans.append((a + lead, a + trail))
    return _pack_spans(text, spans, budget, count, lambda t, b: _split_words(t, b, count))


def _split_block(block: str, budget: int, count: _Counter) -> list[str]:
    lines = block.split("\n")
    first = lines[0]
    m = _FENCE_OPEN_RE.match(first)
    if m and len(lines) >= 2:
        marker = m.group(1)
        closed = _fence_closes(lines[-1], marker)
        closing = lines[-1] if closed else marker
        body = "\n".join(lines[1:-1] if closed else lines[1:])
        inner = max(budget - count(first) - count(closing), 1)
        parts = _pack_spans(body, _line_spans(body), inner, count, lambda t, b: _split_words(t, b, count))
        return [f"{first}\n{p}\n{closing}" for p in parts]
    if all(ln.lstrip().startswith("|") for ln in lines):
        header = lines[:2] if len(lines) > 2 and _TABLE_SEP_RE.match(lines[1]) else []
        head = "\n".join(header)
        hcost = count(head)
        if hcost > budget // 2:
            header, head, hcost = [], "", 0
        body = "\n".join(lines[len(header) :])
        inner = max(budget - hcost, 1)
        parts = _pack_spans(body, _line_spans(body), inner, count, lambda t, b: _split_paragraph(t, b, count))
        return [f"{head}\n{p}" if head else p for p in parts]
    lm = _LIST_ITEM_RE.match(first)
    if lm:
        indent = len(lm.group(1))
        spans: list[tuple[int, int]] = []
        pos = 0
        for line in lines:
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

        return _pack_spans(block, _line_spans(block), budget, count, split_quote_line)
    return _split_paragraph(block, budget, count)


def _is_lead_in(piece: str) -> bool:
    """A short one-line paragraph introducing what follows: "Table 8.2. Numeric Types", "Example:"."""
    if "\n" in piece or len(piece) > 200 or _PLAIN_FIRST_RE.match(piece):
        return False
    tail = piece.rstrip()
    return tail.endswith(":") or not tail.endswith((".", "!", "?", ";", ")", "\u201d", '"'))


def _pack_strings(pieces: list[str], budget: int, count: _Counter, sep: str = "\n\n") -> list[str]:
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


def _fits(text: str, budget: int, count: _Counter) -> bool:
    # Every whitespace-separated word is at least one word piece: a cheap way to reject long texts
    # without tokenizing them (tokenizing is what dominates the run time).
    if len(text) > budget and len(text.split()) > budget:
        return False
    return count(text) <= budget


def _split_content(content: str, budget: int, count: _Counter) -> list[str]:
    if _fits(content, budget, count):
        return [content]
    pieces: list[str] = []
    for block in _split_blocks(content):
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


@dataclass
class _Section:
    anchor: str | None
    title: str
    path: str
    content: str


def _build_chunks(
    sections: list[_Section], max_tokens: int, count: _Counter
) -> tuple[list[Chunk], list[str]]:
    chunks: list[Chunk] = []
    empty: list[str] = []
    for sec in sections:
        if not sec.content.strip():
            empty.append(sec.anchor if sec.anchor else sec.title)
            continue
        sec.title = _clip_title(sec.title, max_tokens, count)
        budget = _budget(max_tokens, sec.title, count)
        for part in _split_content(sec.content, budget, count):
            part = part.strip()
            if not part:
                continue
            n = count(part)
            # re-split only happens with a counter that is not additive over words
            if n <= budget:
                subparts = [(part, n)]
            else:
                subparts = [(p, count(p)) for p in _split_words(part, budget, count)]
            for text, tokens in subparts:
                chunks.append(Chunk(len(chunks), sec.anchor, sec.path, sec.title, text, tokens))
    return chunks, empty


# --------------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------------

_SECTION_CLASSES = frozenset(
    {
        "sect1",
        "sect2",
        "sect3",
        "sect4",
        "sect5",
        "section",
        "simplesect",
        "refsect1",
        "refsect2",
        "refsect3",
        "refentry",
        "chapter",
        "appendix",
        "preface",
        "part",
        "reference",
        "article",
        "book",
        "set",
        "bibliography",
        "bibliodiv",
        "glossary",
        "glossdiv",
        "index",
        "setindex",
        "colophon",
    }
)
# Dropped wherever they appear (navigation, tables of contents, index terms).
_DROP_CLASSES = frozenset(
    {
        "navheader",
        "navfooter",
        "toc",
        "list-of-tables",
        "list-of-figures",
        "list-of-examples",
        "list-of-procedures",
        "list-of-equations",
        "indexterm",
        "indexdiv",
        "indexdiv-quicklinks",
    }
)
_DROP_TAGS = frozenset(
    {
        "head",
        "title",
        "meta",
        "link",
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "footer",
        "svg",
        "canvas",
        "iframe",
        "object",
        "embed",
        "button",
        "select",
        "input",
        "textarea",
        "option",
        "img",
        "map",
        "area",
        "audio",
        "video",
        "source",
        "track",
    }
)
_ADMONITIONS = {
    "note": "Note",
    "tip": "Tip",
    "caution": "Caution",
    "warning": "Warning",
    "important": "Important",
}
_ADMONITION_ORDER = ("warning", "caution", "important", "tip", "note")
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "aside",
        "header",
        "address",
        "blockquote",
        "dl",
        "dt",
        "dd",
        "hr",
        "figure",
        "figcaption",
        "center",
        "form",
        "fieldset",
        "legend",
        "details",
        "summary",
        "caption",
        "li",
        "body",
        "html",
        "tr",
        "td",
        "th",
        "thead",
        "tbody",
        "tfoot",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "noframes",
        "frameset",
        "frame",
        "menu",
    }
)
_WS_RE = re.compile(r"\s+")
_BR = object()
_PLAIN_FIRST_RE = re.compile(r"^(?:[-*+] |\d+[.)] |>|\||```|~~~)")


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _classes(el) -> set[str]:
    c = el.get("class")
    return set(c.split()) if c else set()


def _is_section(el) -> bool:
    if el.tag != "div":
        return False
    cls = _classes(el)
    if not cls & _SECTION_CLASSES:
        return False
    if "index" in cls:  # the inner div.index of an index page is a container, not a section
        parent = el.getparent()
        if parent is not None and "index" in _classes(parent):
            return False
    return True


@dataclass
class _Heading:
    level: int
    text: str
    anchor: str | None


class _Renderer:
    """Turn an lxml subtree into Markdown-ish text blocks."""

    def __init__(self, *, docbook: bool, skip=(), headings: bool = False, in_cell: bool = False):
        self.docbook = docbook
        self.skip = skip
        self.headings = headings  # emit _Heading markers (generic HTML sectioning)
        self.in_cell = in_cell
        self.blocks: list = []
        self._inline: list = []

    # -- inline text --------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self._inline:
            return
        lines: list[str] = []
        cur: list[str] = []
        for piece in self._inline:
            if piece is _BR:
                lines.append(_norm("".join(cur)))
                cur = []
            else:
                cur.append(piece)
        lines.append(_norm("".join(cur)))
        self._inline = []
        text = "\n".join(ln for ln in lines if ln)
        if text:
            self.blocks.append(text)

    def _sub(self, **kw) -> _Renderer:
        opts = {"docbook": self.docbook, "skip": self.skip, "in_cell": self.in_cell}
        opts.update(kw)
        return _Renderer(**opts)

    # -- traversal ----------------------------------------------------------------------------
    def walk(self, el) -> None:
        if el.text:
            self._inline.append(el.text)
        for child in el:
            self.node(child)
            if child.tail:
                self._inline.append(child.tail)

    def finish(self) -> list:
        self._flush()
        return self.blocks

    def node(self, el) -> None:
        tag = el.tag
        if not isinstance(tag, str):
            return  # comment / processing instruction
        tag = tag.lower()
        if el in self.skip or tag in _DROP_TAGS:
            return
        cls = _classes(el)
        if cls & _DROP_CLASSES:
            return
        if self.docbook and tag == "div" and ("titlepage" in cls or _is_section(el)):
            return  # the heading wrapper, or a nested section (a chunk of its own)
        if tag == "br":
            self._inline.append(_BR)
        elif tag == "pre":
            self._pre(el)
        elif tag == "table":
            self._table(el)
        elif tag in ("ul", "ol"):
            self._list(el, ordered=tag == "ol")
        elif tag == "div" and cls & _ADMONITIONS.keys():
            label = next(_ADMONITIONS[c] for c in _ADMONITION_ORDER if c in cls)
            self._quote(el, label)
        elif tag == "blockquote" or (tag == "div" and "blockquote" in cls):
            self._quote(el, None)
        elif tag == "dl" and not self.in_cell:
            self._dl(el)
        elif tag == "sup" and not cls & {"footnote", "para", "footnoteref"}:
            text = _norm(el.text_content())
            if text:
                self._inline.append("^" + text)
        elif tag in _HEADINGS and self.headings:
            self._flush()
            anchor = el.get("id")
            if not anchor:
                for a in el.iter():
                    if isinstance(a.tag, str) and (a.get("id") or a.get("name")):
                        anchor = a.get("id") or a.get("name")
                        break
            text = _norm(el.text_content())
            if text:
                self.blocks.append(_Heading(int(tag[1]), text, anchor))
        elif tag in _BLOCK_TAGS:
            self._flush()
            self.walk(el)
            self._flush()
        else:
            self.walk(el)

    # -- block renderers ----------------------------------------------------------------------
    def _pre(self, el) -> None:
        code = el.text_content().replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
        if self.in_cell:
            self._inline.append(" " + code + " ")
            return
        self._flush()
        code = "\n".join(ln.rstrip() for ln in code.split("\n"))
        code = textwrap.dedent(code.strip("\n"))
        if not code.strip():
            return
        lang = ""
        for e in (el, *el.iterchildren("code")):
            for c in _classes(e):
                if c.startswith("language-") and len(c) > 9:
                    lang = c[9:]
        fence = "```"
        while fence in code:
            fence += "`"
        self.blocks.append(f"{fence}{lang}\n{code}\n{fence}")

    def _cell_text(self, cell) -> str:
        r = self._sub(in_cell=True, headings=False)
        r.walk(cell)
        parts = []
        for b in r.finish():
            if isinstance(b, _Heading):
                b = b.text
            parts.append(_norm(b.replace("\n", " ")))
        return "<br>".join(p for p in parts if p).replace("|", "\\|")

    def _table(self, table) -> None:
        if self.in_cell:
            self._inline.append(" " + _norm(table.text_content()) + " ")
            return
        self._flush()
        rows = []
        header_rows = 0
        caption = None
        for child in table:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "caption":
                caption = _norm(child.text_content())
            elif child.tag in ("thead", "tbody", "tfoot"):
                trs = [tr for tr in child if tr.tag == "tr"]
                if child.tag == "thead" and not rows:
                    header_rows = len(trs)
                rows.extend(trs)
            elif child.tag == "tr":
                rows.append(child)
        matrix: list[list[str]] = []
        for tr in rows:
            cells: list[str] = []
            for cell in tr:
                if not isinstance(cell.tag, str) or cell.tag not in ("td", "th"):
                    continue
                cells.append(self._cell_text(cell))
                try:
                    span = int(cell.get("colspan", "1"))
                except ValueError:
                    span = 1
                cells.extend([""] * max(0, min(span, 50) - 1))
            if any(cells):
                matrix.append(cells)
        if caption:
            self.blocks.append(caption)
        if not matrix:
            return
        ncols = max(len(r) for r in matrix)
        matrix = [r + [""] * (ncols - len(r)) for r in matrix]
        # Several header rows are merged into one (Markdown has a single header row).
        nhead = max(1, min(header_rows, len(matrix)))
        if nhead > 1:
            head = [" ".join(c for c in col if c) for col in zip(*matrix[:nhead], strict=True)]
        else:
            head = matrix[0]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * ncols]
        lines.extend("| " + " | ".join(r) + " |" for r in matrix[nhead:])
        self.blocks.append("\n".join(lines))

    def _list(self, el, ordered: bool) -> None:
        if self.in_cell:
            r = self._sub()
            r.walk(el)
            self._inline.append(" " + " ".join(b for b in r.finish() if isinstance(b, str)) + " ")
            return
        self._flush()
        num = 1
        if ordered:
            try:
                num = int(el.get("start", "1"))
            except ValueError:
                num = 1
        out: list[str] = []
        for li in el:
            if not isinstance(li.tag, str) or li.tag in _DROP_TAGS:
                continue
            r = self._sub(headings=False)
            if li.tag == "li":
                r.walk(li)
            else:
                r.node(li)
            blocks = [b.text if isinstance(b, _Heading) else b for b in r.finish()]
            if not blocks:
                continue
            marker = f"{num}. " if ordered else "- "
            num += 1
            indent = " " * len(marker)
            text = blocks[0]
            for b in blocks[1:]:
                prev_last = text.split("\n")[-1]
                if not _PLAIN_FIRST_RE.match(b) and "\n" not in b and not _PLAIN_FIRST_RE.match(prev_last):
                    text += " " + b
                else:
                    text += "\n" + b
            item_lines = text.split("\n")
            out.append(marker + item_lines[0])
            out.extend((indent + ln) if ln.strip() else "" for ln in item_lines[1:])
        if out:
            self.blocks.append("\n".join(out))

    def _dl(self, el) -> None:
        """Definition lists: each term stays in the same block as the start of its definition."""
        self._flush()
        terms: list[str] = []
        for child in el:
            if not isinstance(child.tag, str) or child.tag in _DROP_TAGS:
                continue
            if child.tag == "dt":
                r = self._sub(headings=False)
                r.walk(child)
                term = " ".join(b for b in r.finish() if isinstance(b, str))
                if term:
                    terms.append(term)
                continue
            r = self._sub(headings=False)
            if child.tag == "dd":
                r.walk(child)
            else:
                r.node(child)
            blocks = [b.text if isinstance(b, _Heading) else b for b in r.finish()]
            if terms:
                head = "\n".join(terms)
                terms = []
                if blocks and not _PLAIN_FIRST_RE.match(blocks[0]):
                    blocks[0] = head + "\n" + blocks[0]
                else:
                    blocks.insert(0, head)
            self.blocks.extend(blocks)
        if terms:
            self.blocks.append("\n".join(terms))

    def _quote(self, el, label: str | None) -> None:
        if self.in_cell:
            self._inline.append(" " + _norm(el.text_content()) + " ")
            return
        self._flush()
        skip = self.skip
        extra_title = None
        if label:
            for child in el:
                if isinstance(child.tag, str) and child.tag in _HEADINGS:
                    t = _norm(child.text_content())
                    if t.lower() != label.lower():
                        extra_title = t
                    skip = (*skip, child)
                    break
        r = self._sub(skip=skip, headings=False)
        r.walk(el)
        blocks = [b.text if isinstance(b, _Heading) else b for b in r.finish()]
        if extra_title:
            blocks.insert(0, extra_title)
        if not blocks:
            return
        lines: list[str] = []
        for i, b in enumerate(blocks):
            if i:
                lines.append(">")
            blines = b.split("\n")
            if i == 0 and label:
                lines.append(f"> **{label}:** {blines[0]}")
            else:
                lines.append(f"> {blines[0]}")
            lines.extend(f"> {ln}" if ln else ">" for ln in blines[1:])
        self.blocks.append("\n".join(lines))


def _parse_html_doc(html: str):
    import lxml.etree
    import lxml.html

    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    data = html.encode("utf-8", "replace")
    try:
        root = lxml.html.document_fromstring(data, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return None
    for err in parser.error_log:
        if err.type_name == "ERR_RESOURCE_LIMIT":
            # libxml2 silently drops everything nested deeper than 256 elements: refuse instead.
            raise InputError(
                "HTML document is nested too deeply",
                sqlstate="54000",
                hint="Elements may be nested at most 256 levels deep; simplify the markup.",
                detail=err.message,
            )
    return root


def _slugify(text: str) -> str:
    s = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return s.replace(" ", "-")


class _Slugger:
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


def _docbook_heading(sec):
    """Return (heading element or None, title text) of a DocBook section div."""
    for child in sec:
        if child.tag == "div" and "titlepage" in _classes(child):
            for h in child.iter("h1", "h2", "h3", "h4", "h5", "h6"):
                return h, _norm(h.text_content())
            break
    for child in sec:
        if isinstance(child.tag, str) and child.tag in _HEADINGS:
            return child, _norm(child.text_content())
    if "refentry" in _classes(sec):
        for child in sec:
            if child.tag == "div" and "refnamediv" in _classes(child):
                for h in child.iter("h1", "h2", "h3", "h4", "h5", "h6"):
                    return h, _norm(h.text_content())
    return None, ""


def _docbook_anchor(sec, heading) -> str | None:
    anchor = sec.get("id")
    if anchor:
        return anchor
    places = [c for c in sec if c.tag == "div" and "titlepage" in _classes(c)]
    if heading is not None:
        places.append(heading)
    for place in places:
        for el in place.iter():
            if not isinstance(el.tag, str) or "indexterm" in _classes(el):
                continue
            a = el.get("id") or (el.get("name") if el.tag == "a" else None)
            if a:
                return a
    return None


def _html_sections_docbook(secs) -> list[_Section]:
    titles: dict = {}
    out: list[_Section] = []
    secset = set(secs)
    for sec in secs:
        heading, title = _docbook_heading(sec)
        titles[sec] = title
        anchor = _docbook_anchor(sec, heading)
        path = [titles[a] for a in reversed(list(sec.iterancestors("div"))) if a in secset and titles.get(a)]
        r = _Renderer(docbook=True, skip=(heading,) if heading is not None else ())
        r.walk(sec)
        blocks = [b for b in r.finish() if isinstance(b, str)]
        out.append(_Section(anchor, title, " > ".join(path), "\n\n".join(blocks)))
    return out


def _html_sections_generic(body, doc_title: str | None) -> list[_Section]:
    r = _Renderer(docbook=False, headings=True)
    r.walk(body)
    blocks = r.finish()
    slug = _Slugger()
    sections: list[_Section] = []
    cur = _Section(None, doc_title or "", "", "")
    cur_blocks: list[str] = []
    stack: list[tuple[int, str]] = []
    preamble = True

    def close() -> None:
        cur.content = "\n\n".join(cur_blocks)
        if not preamble or cur.content.strip():
            sections.append(cur)

    for b in blocks:
        if isinstance(b, _Heading):
            close()
            preamble = False
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            path = " > ".join(t for _, t in stack)
            cur = _Section(b.anchor or slug(b.text), b.text, path, "")
            if b.anchor:
                slug.taken.add(b.anchor)
            cur_blocks = []
            stack.append((b.level, b.text))
        else:
            cur_blocks.append(b)
    close()
    return sections


def chunk_html(html: str, max_tokens: int = 256, count_tokens=None) -> ParseResult:
    """Chunk an HTML document: one chunk (or several parts) per section."""
    count = count_tokens if isinstance(count_tokens, _Counter) else _Counter(count_tokens)
    result = ParseResult(format="html")
    root = _parse_html_doc(html)
    if root is None:
        return result
    doc_title = None
    t = root.find(".//title")
    if t is not None:
        doc_title = _norm(t.text_content()) or None
    if doc_title is None:
        h1 = next(root.iter("h1"), None)
        if h1 is not None:
            doc_title = _norm(h1.text_content()) or None
    result.title = doc_title

    body = root.find("body")
    if body is None:
        body = root
    secs = [el for el in root.iter("div") if _is_section(el)]
    if secs:
        sections = _html_sections_docbook(secs)
        # Text outside every section div (other than navigation) must not be lost silently.
        r = _Renderer(docbook=True)
        r.walk(body)
        outside = "\n\n".join(b for b in r.finish() if isinstance(b, str))
        if outside.strip():
            sections.insert(0, _Section(None, doc_title or "", "", outside))
    else:
        sections = _html_sections_generic(body, doc_title)
    result.sections_found = len(sections)
    result.chunks, result.empty_sections = _build_chunks(sections, max_tokens, count)
    return result


# --------------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------------

_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_CONTAINER_RE = re.compile(r"^[ \t]*(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|\|)")
_MD_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


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
    return _norm(s)


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


def _drop_md_comments(lines: list[str]) -> list[str]:
    """HTML comments (`<!-- ... -->`, possibly over several lines) removed outside code fences: they are
    not rendered, so they are not content (markdownlint directives, YAML history notes). Line count kept."""
    out: list[str] = []
    fence: str | None = None
    in_comment = False
    for line in lines:
        if fence is not None:
            if _fence_closes(line, fence):
                fence = None
            out.append(line)
            continue
        if not in_comment:
            m = _MD_FENCE_RE.match(line)
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


def chunk_markdown(md: str, max_tokens: int = 256, count_tokens=None) -> ParseResult:
    """Chunk Markdown on ATX and setext headings (never inside code fences); HTML comments are dropped."""
    count = count_tokens if isinstance(count_tokens, _Counter) else _Counter(count_tokens)
    result = ParseResult(format="markdown")
    lines = _drop_md_comments(md.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    skip, fm_title = _front_matter(lines)

    # (first line, line after the heading, level, text)
    headings: list[tuple[int, int, int, str]] = []
    fence: str | None = None
    para_start: int | None = None
    in_container = False
    for i in range(skip, len(lines)):
        line = lines[i]
        if fence is not None:
            if _fence_closes(line, fence):
                fence = None
            continue
        m = _MD_FENCE_RE.match(line)
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
            headings.append((i, i + 1, len(m.group(1)), text))
            para_start = None
            in_container = False
            continue
        m = _SETEXT_RE.match(line)
        if m and para_start is not None:
            text = " ".join(ln.strip() for ln in lines[para_start:i])
            headings.append((para_start, i + 1, 1 if m.group(1)[0] == "=" else 2, text))
            para_start = None
            continue
        if _MD_CONTAINER_RE.match(line):
            in_container = True
            para_start = None
        elif para_start is None and not in_container and not line.startswith(("    ", "\t")):
            para_start = i

    titles = [_md_plain(h[3]) for h in headings]
    doc_title = fm_title or next((t for t in titles if t), None)
    result.title = doc_title

    def body(a: int, b: int) -> str:
        chunk = lines[a:b]
        while chunk and not chunk[0].strip():
            chunk.pop(0)
        return "\n".join(chunk).rstrip()

    sections: list[_Section] = []
    first = headings[0][0] if headings else len(lines)
    pre = body(skip, first)
    if pre.strip():
        sections.append(_Section(None, doc_title or "", "", pre))
    slug = _Slugger()
    stack: list[tuple[int, str]] = []
    for k, (_start, after, level, _raw) in enumerate(headings):
        title = titles[k]
        end = headings[k + 1][0] if k + 1 < len(headings) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        path = " > ".join(t for _, t in stack)
        stack.append((level, title))
        sections.append(_Section(slug(title), title, path, body(after, end)))
    result.sections_found = len(sections)
    result.chunks, result.empty_sections = _build_chunks(sections, max_tokens, count)
    return result


# --------------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------------


def chunk_text(text: str, max_tokens: int = 256, overlap: int = 32, count_tokens=None) -> ParseResult:
    """Token windows of the content budget with ``overlap`` tokens of overlap, broken at whitespace."""
    count = count_tokens if isinstance(count_tokens, _Counter) else _Counter(count_tokens)
    result = ParseResult(format="text")
    words = [m.span() for m in _WORD_RE.finditer(text)]
    if not words:
        return result
    result.sections_found = 1
    budget = _budget(max_tokens, "", count)
    overlap = max(0, min(overlap, budget // 2))
    costs = [count(text[s:e]) for s, e in words]
    contents: list[str] = []
    n = len(words)
    i = 0
    while i < n:
        if costs[i] > budget:
            contents.extend(_split_chars(text[words[i][0] : words[i][1]], budget, count))
            i += 1
            continue
        j = i
        cost = 0
        while j < n and cost + costs[j] <= budget:
            cost += costs[j]
            j += 1
        piece = text[words[i][0] : words[j - 1][1]]
        while j - 1 > i and count(piece) > budget:  # non-additive counter
            j -= 1
            piece = text[words[i][0] : words[j - 1][1]]
        contents.append(piece)
        if j >= n:
            break
        k = j
        ov = 0
        while k - 1 > i and ov + costs[k - 1] <= overlap:
            k -= 1
            ov += costs[k]
        i = k
    result.chunks = [Chunk(idx, None, "", "", c, count(c)) for idx, c in enumerate(contents)]
    return result


# --------------------------------------------------------------------------------------------------
# Detection and validation
# --------------------------------------------------------------------------------------------------

_HTML_DOC_RE = re.compile(r"<!doctype\s+html|<html[\s>]|<body[\s>]|<head[\s>]", re.IGNORECASE)
_HTML_TAG_RE = re.compile(
    r"</?(p|div|span|a|br|hr|h[1-6]|table|tr|td|th|thead|tbody|ul|ol|li|pre|code|em|strong|b|i|"
    r"img|section|article|nav|main|header|footer|dl|dt|dd|blockquote|title|meta|link|script|style|"
    r"form|input|label|sup|sub|small|tt|font|center|iframe)(?:\s[^<>]*)?/?>",
    re.IGNORECASE,
)
_ANY_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")
_MD_ATX_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_MD_FENCE_LINE = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)
_MD_LIST_LINE = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.MULTILINE)
_MD_SETEXT = re.compile(r"^[^\n]*\S[^\n]*\n {0,3}(?:=+|-{2,})[ \t]*$", re.MULTILINE)
_MD_TABLE_LINE = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)
_MD_LINK = re.compile(r"\[[^\]\n]+\]\([^)\s]+\)")
_MD_EMPH = re.compile(r"\*\*[^*\n]+\*\*|`[^`\n]+`")
_MD_QUOTE = re.compile(r"^[ \t]*> ", re.MULTILINE)


def _strip_fenced(text: str) -> str:
    out = []
    fence = None
    for line in text.split("\n"):
        if fence is not None:
            if _fence_closes(line, fence):
                fence = None
            continue
        m = _MD_FENCE_RE.match(line)
        if m:
            fence = m.group(1)
            continue
        out.append(line)
    return "\n".join(out)


def detect_format(body: str) -> str:
    """Guess 'html', 'markdown' or 'text'."""
    sample = body[:200_000]
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
        + len(_MD_LINK.findall(stripped))
        + 0.5 * len(_MD_EMPH.findall(stripped))
        + 0.5 * len(_MD_QUOTE.findall(stripped))
    )
    if len(tags) >= 3 and len({t.lower() for t in tags}) >= 2 and len(tags) > md_score:
        return "html"
    first_line = stripped.lstrip("\n").split("\n", 1)[0]
    if md_score >= 4 or (md_headings and _MD_ATX_LINE.match(first_line)) or fences:
        return "markdown"
    return "text"


_GARBAGE_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffd]")


def parse(
    body: str,
    fmt: str = "auto",
    max_tokens: int = 256,
    overlap: int = 32,
    count_tokens=None,
    allow_empty: bool = False,
) -> ParseResult:
    """Validate ``body`` and chunk it in format ``fmt`` ('auto' detects it).

    A document whose sections are all empty (a table of contents, navigation only) raises InputError, or
    with ``allow_empty`` comes back with no chunks and its sections listed in ``empty_sections``.
    """
    if body is None or not isinstance(body, str) or not body.strip():
        raise InputError(
            "document body is empty",
            hint="Pass the document text (HTML, Markdown or plain text).",
        )
    name = (fmt or "auto").strip().lower()
    if name not in ("auto", *FORMATS):
        raise InputError(
            f'unknown document format "{fmt}"',
            hint="Use one of: html, markdown, text, auto.",
        )
    if not isinstance(max_tokens, int) or max_tokens < 16:
        raise InputError(
            f"max_tokens must be at least 16 (got {max_tokens})",
            hint="The default, 256, is the window of the embedding model.",
        )
    if not isinstance(overlap, int) or overlap < 0 or overlap >= max_tokens // 2:
        raise InputError(
            f"overlap must be between 0 and {max_tokens // 2 - 1} (got {overlap})",
            hint="Use an overlap smaller than half of max_tokens, e.g. 32.",
        )
    bad = len(_GARBAGE_RE.findall(body))
    if bad and bad > 0.05 * len(body):
        raise InputError(
            "document looks like binary data, not text",
            sqlstate="22P02",
            hint="Convert the document to text (HTML, Markdown or plain text) before loading it.",
            detail=f"{bad} of {len(body)} characters are control or replacement characters.",
        )
    detected = detect_format(body)
    if name == "auto":
        name = detected
    elif name == "html" and detected != "html" and not _ANY_TAG_RE.search(body[:200_000]):
        raise InputError(
            "document declared as html contains no HTML markup",
            hint=f"Use format 'auto' or the right format (it looks like {detected}).",
        )
    count = _Counter(count_tokens)
    if name == "html":
        result = chunk_html(body, max_tokens, count)
    elif name == "markdown":
        result = chunk_markdown(body, max_tokens, count)
    else:
        result = chunk_text(body, max_tokens, overlap, count)
    if not result.chunks and not allow_empty:
        raise InputError(
            "document has no text content",
            hint="The document contains only markup, navigation or headings; check that the right "
            "document and format were given.",
            detail=f"format {result.format}: {result.sections_found} sections found, all empty.",
        )
    return result
