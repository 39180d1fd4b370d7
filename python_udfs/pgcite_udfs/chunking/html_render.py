"""HTML elements to Markdown-ish text blocks: paragraphs, fenced code, tables, lists, quotes."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from .checkpoint import Ticker
from .sections import norm
from .split import PLAIN_FIRST_RE

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
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
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
_BR = object()
# Lists, quotes, tables and definition lists render their content apart and then re-format it (indent it,
# quote it): nested deeper than this, they render as plain blocks, so that no text is re-formatted more
# than this many times and no line gets a longer prefix (the work stays linear in the input).
_MAX_NESTING = 16
_NESTING_TAGS = frozenset({"table", "ul", "ol", "dl", "blockquote"})
_QUOTE_CLASSES = frozenset({*_ADMONITIONS, "blockquote"})
_BACKTICKS_RE = re.compile(r"`+")
_DIGITS_RE = re.compile(r"\d*")
# Short rows of a table are padded with empty cells up to the longest, unless that would add more cells
# than the table has, and more than this: a row of 10,000 cells above 10,000 rows of one stays ragged.
_MAX_TABLE_PADDING = 10_000


def classes(el) -> set[str]:
    c = el.get("class")
    return set(c.split()) if c else set()


@dataclass
class Heading:
    level: int
    text: str
    anchor: str | None


def render(el, tick: Ticker, *, sections: Collection | None = None, skip=(), headings: bool = False) -> list:
    """The text blocks of el's content (and Heading markers with ``headings``); ``tick`` for every step.

    ``sections``: the section divs of a DocBook document, skipped (each is a chunk of its own) with the
    titlepage divs that hold their headings; None for other HTML. The walk keeps its own stack instead of
    recursing, so any depth of nesting is rendered.
    """
    r = Renderer(sections=sections, skip=skip, headings=headings)
    stack: list[Iterator] = [r.walk(el)]
    while stack:
        tick()
        task = next(stack[-1], None)
        if task is None:
            stack.pop()
        else:
            stack.append(task)
    return r.finish()


def _line_start(line: str) -> tuple[bool, str | None]:
    """Whether line starts like Markdown structure (PLAIN_FIRST_RE), and the line itself while text added
    to its end could still change that ("1", "1.", "-", "``"), else None."""
    unsettled = len(line) < _DIGITS_RE.match(line).end() + 3  # the regex looks no further than that
    return bool(PLAIN_FIRST_RE.match(line)), (line if unsettled else None)


def _join_item_blocks(blocks: list[str]) -> str:
    """A list item's blocks as one text: a plain one-line block continues the line before it (unless that
    line starts like Markdown structure), any other block starts a line of its own. What matters about the
    last line is kept as it goes, so the work is linear in the item."""
    parts = [blocks[0]]
    plain_last, unsettled = _line_start(blocks[0].rsplit("\n", 1)[-1])
    for b in blocks[1:]:
        if not PLAIN_FIRST_RE.match(b) and "\n" not in b and not plain_last:
            parts.append(" " + b)
            if unsettled is not None:
                plain_last, unsettled = _line_start(unsettled + " " + b)
        else:
            parts.append("\n" + b)
            plain_last, unsettled = _line_start(b.rsplit("\n", 1)[-1])
    return "".join(parts)


def _cell_text(blocks: list) -> str:
    parts = []
    for b in blocks:
        if isinstance(b, Heading):
            b = b.text
        parts.append(norm(b.replace("\n", " ")))
    return "<br>".join(p for p in parts if p).replace("|", "\\|")


class Renderer:
    """Turn an lxml subtree into Markdown-ish text blocks.

    The traversal methods are generators that yield the walks they need done first (a child element, a
    list item in a renderer of its own) instead of calling them: ``render`` runs them from a stack.
    """

    def __init__(
        self,
        *,
        sections: Collection | None,
        skip=(),
        headings: bool = False,
        in_cell: bool = False,
        nesting: int = 0,
    ):
        self.sections = sections
        self.skip = skip
        self.headings = headings  # emit Heading markers (generic HTML sectioning)
        self.in_cell = in_cell
        self.nesting = nesting  # how many renderers of enclosing lists, quotes, cells this one is inside
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
                lines.append(norm("".join(cur)))
                cur = []
            else:
                cur.append(piece)
        lines.append(norm("".join(cur)))
        self._inline = []
        text = "\n".join(ln for ln in lines if ln)
        if text:
            self.blocks.append(text)

    def _sub(self, **kw) -> Renderer:
        opts = {
            "sections": self.sections,
            "skip": self.skip,
            "in_cell": self.in_cell,
            "nesting": self.nesting + 1,
        }
        opts.update(kw)
        return Renderer(**opts)

    # -- traversal ----------------------------------------------------------------------------
    def walk(self, el) -> Iterator:
        if el.text:
            self._inline.append(el.text)
        for child in el:
            yield self.node(child)
            if child.tail:
                self._inline.append(child.tail)

    def finish(self) -> list:
        self._flush()
        return self.blocks

    def node(self, el) -> Iterator:
        tag = el.tag
        if not isinstance(tag, str):
            return  # comment / processing instruction
        tag = tag.lower()
        if el in self.skip or tag in _DROP_TAGS:
            return
        cls = classes(el)
        if cls & _DROP_CLASSES:
            return
        if self.sections is not None and tag == "div" and ("titlepage" in cls or el in self.sections):
            return  # the heading wrapper, or a nested section (a chunk of its own)
        if tag == "br":
            self._inline.append(_BR)
        elif tag == "pre":
            self._pre(el)
        elif self.nesting >= _MAX_NESTING and (
            tag in _NESTING_TAGS or (tag == "div" and cls & _QUOTE_CLASSES)
        ):
            self._flush()
            yield self.walk(el)
            self._flush()
        elif tag == "table":
            yield self._table(el)
        elif tag in ("ul", "ol"):
            yield self._list(el, ordered=tag == "ol")
        elif tag == "div" and cls & _ADMONITIONS.keys():
            label = next(_ADMONITIONS[c] for c in _ADMONITION_ORDER if c in cls)
            yield self._quote(el, label)
        elif tag == "blockquote" or (tag == "div" and "blockquote" in cls):
            yield self._quote(el, None)
        elif tag == "dl" and not self.in_cell:
            yield self._dl(el)
        elif tag == "sup" and not cls & {"footnote", "para", "footnoteref"}:
            text = norm(el.text_content())
            if text:
                self._inline.append("^" + text)
        elif tag in HEADINGS and self.headings:
            self._flush()
            anchor = el.get("id")
            if not anchor:
                for a in el.iter():
                    if isinstance(a.tag, str) and (a.get("id") or a.get("name")):
                        anchor = a.get("id") or a.get("name")
                        break
            text = norm(el.text_content())
            if text:
                self.blocks.append(Heading(int(tag[1]), text, anchor))
        elif tag in _BLOCK_TAGS:
            self._flush()
            yield self.walk(el)
            self._flush()
        else:
            yield self.walk(el)

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
            for c in classes(e):
                if c.startswith("language-") and len(c) > 9:
                    lang = c[9:]
        fence = "`" * max(3, 1 + max((len(run) for run in _BACKTICKS_RE.findall(code)), default=0))
        self.blocks.append(f"{fence}{lang}\n{code}\n{fence}")

    def _table(self, table) -> Iterator:
        if self.in_cell:
            self._inline.append(" " + norm(table.text_content()) + " ")
            return
        self._flush()
        rows = []
        header_rows = 0
        caption = None
        for child in table:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "caption":
                caption = norm(child.text_content())
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
                r = self._sub(in_cell=True, headings=False)
                yield r.walk(cell)
                cells.append(_cell_text(r.finish()))
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
        cells = sum(len(r) for r in matrix)
        if ncols * len(matrix) - cells <= cells + _MAX_TABLE_PADDING:
            matrix = [r + [""] * (ncols - len(r)) for r in matrix]
        # Several header rows are merged into one (Markdown has a single header row).
        nhead = max(1, min(header_rows, len(matrix)))
        if nhead > 1:
            columns: list[list[str]] = [[] for _ in range(max(len(r) for r in matrix[:nhead]))]
            for row in matrix[:nhead]:
                for col, c in zip(columns, row, strict=False):
                    col.append(c)
            head = [" ".join(c for c in col if c) for col in columns]
        else:
            head = matrix[0]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * ncols]
        lines.extend("| " + " | ".join(r) + " |" for r in matrix[nhead:])
        self.blocks.append("\n".join(lines))

    def _list(self, el, ordered: bool) -> Iterator:
        if self.in_cell:
            r = self._sub()
            yield r.walk(el)
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
            yield r.walk(li) if li.tag == "li" else r.node(li)
            blocks = [b.text if isinstance(b, Heading) else b for b in r.finish()]
            if not blocks:
                continue
            marker = f"{num}. " if ordered else "- "
            num += 1
            indent = " " * len(marker)
            item_lines = _join_item_blocks(blocks).split("\n")
            out.append(marker + item_lines[0])
            out.extend((indent + ln) if ln.strip() else "" for ln in item_lines[1:])
        if out:
            self.blocks.append("\n".join(out))

    def _dl(self, el) -> Iterator:
        """Definition lists: each term stays in the same block as the start of its definition."""
        self._flush()
        terms: list[str] = []
        for child in el:
            if not isinstance(child.tag, str) or child.tag in _DROP_TAGS:
                continue
            if child.tag == "dt":
                r = self._sub(headings=False)
                yield r.walk(child)
                term = " ".join(b for b in r.finish() if isinstance(b, str))
                if term:
                    terms.append(term)
                continue
            r = self._sub(headings=False)
            yield r.walk(child) if child.tag == "dd" else r.node(child)
            blocks = [b.text if isinstance(b, Heading) else b for b in r.finish()]
            if terms:
                head = "\n".join(terms)
                terms = []
                if blocks and not PLAIN_FIRST_RE.match(blocks[0]):
                    blocks[0] = head + "\n" + blocks[0]
                else:
                    blocks.insert(0, head)
            self.blocks.extend(blocks)
        if terms:
            self.blocks.append("\n".join(terms))

    def _quote(self, el, label: str | None) -> Iterator:
        if self.in_cell:
            self._inline.append(" " + norm(el.text_content()) + " ")
            return
        self._flush()
        skip = self.skip
        extra_title = None
        if label:
            for child in el:
                if isinstance(child.tag, str) and child.tag in HEADINGS:
                    t = norm(child.text_content())
                    if t.lower() != label.lower():
                        extra_title = t
                    skip = (*skip, child)
                    break
        r = self._sub(skip=skip, headings=False)
        yield r.walk(el)
        blocks = [b.text if isinstance(b, Heading) else b for b in r.finish()]
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
