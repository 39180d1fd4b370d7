"""HTML documents: DocBook section divs (the PostgreSQL manual) or, elsewhere, h1..h6 headings."""

from __future__ import annotations

from collections.abc import Callable

from .checkpoint import Ticker
from .errors import MAX_DOCUMENT_BYTES, InputError, check_size
from .html_render import HEADINGS, Heading, classes, render
from .result import ParseResult
from .sections import MAX_ANCHOR_CHARS, Section, Slugger, build_chunks, extend_path, norm
from .tokens import Counter

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


_PARSE_PIECE = 1 << 18  # bytes fed to the HTML parser at a time


def _parse_html_doc(html: str, tick: Ticker):
    """The root element, or None for a document without one. The parser is fed a piece at a time (the same
    tree as at once), so that a long parse can be stopped between pieces."""
    import lxml.etree
    import lxml.html

    # huge_tree: libxml2 otherwise stops at 256 levels of nesting (and 10 MB text nodes) and drops the rest.
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, huge_tree=True)
    data = html.encode("utf-8", "replace")
    if not data:
        return None
    try:
        for start in range(0, len(data), _PARSE_PIECE):
            tick(_PARSE_PIECE >> 10)
            parser.feed(data[start : start + _PARSE_PIECE])
        root = parser.close()
    except (lxml.etree.ParserError, ValueError):
        return None
    if root is None:
        return None
    for err in parser.feed_error_log:
        if err.type_name == "ERR_RESOURCE_LIMIT":
            # Even with huge_tree libxml2 drops what is nested deeper than 2048 elements: refuse instead.
            raise InputError(
                "HTML document is nested too deeply",
                sqlstate="54000",
                hint="Elements may be nested at most 2048 levels deep (the limit of libxml2); "
                "simplify the markup.",
                detail=err.message,
            )
    return root


def _docbook_sections(root, tick: Ticker) -> dict:
    """The section divs of a DocBook document in document order, each with the nearest section div it is
    in (or None): one walk over the divs, not a walk up from every section."""
    import lxml.etree

    enclosing: dict = {}
    open_secs: list = []
    index_parents: dict = {}  # element -> whether it has the class "index"
    for event, el in lxml.etree.iterwalk(root, events=("start", "end"), tag="div"):
        tick()
        if event == "end":
            if open_secs and open_secs[-1] is el:
                open_secs.pop()
            continue
        cls = classes(el)
        if not cls & _SECTION_CLASSES:
            continue
        if "index" in cls:  # the inner div.index of an index page is a container, not a section
            parent = el.getparent()
            if parent is not None:
                if parent not in index_parents:
                    index_parents[parent] = "index" in classes(parent)
                if index_parents[parent]:
                    continue
        enclosing[el] = open_secs[-1] if open_secs else None
        open_secs.append(el)
    return enclosing


def _docbook_heading(sec):
    """Return (heading element or None, title text) of a DocBook section div."""
    for child in sec:
        if child.tag == "div" and "titlepage" in classes(child):
            for h in child.iter("h1", "h2", "h3", "h4", "h5", "h6"):
                return h, norm(h.text_content())
            break
    for child in sec:
        if isinstance(child.tag, str) and child.tag in HEADINGS:
            return child, norm(child.text_content())
    if "refentry" in classes(sec):
        for child in sec:
            if child.tag == "div" and "refnamediv" in classes(child):
                for h in child.iter("h1", "h2", "h3", "h4", "h5", "h6"):
                    return h, norm(h.text_content())
    return None, ""


def _docbook_anchor(sec, heading) -> str | None:
    anchor = sec.get("id")
    if anchor:
        return anchor
    places = [c for c in sec if c.tag == "div" and "titlepage" in classes(c)]
    if heading is not None:
        places.append(heading)
    for place in places:
        for el in place.iter():
            if not isinstance(el.tag, str) or "indexterm" in classes(el):
                continue
            a = el.get("id") or (el.get("name") if el.tag == "a" else None)
            if a:
                return a
    return None


def _html_sections_docbook(enclosing: dict, tick: Ticker) -> list[Section]:
    paths: dict = {}  # section -> its path with its own title
    out: list[Section] = []
    for sec, parent in enclosing.items():
        heading, title = _docbook_heading(sec)
        anchor = _docbook_anchor(sec, heading)
        path = paths[parent] if parent is not None else ""
        paths[sec] = extend_path(path or None, title) if title else path
        rendered = render(sec, tick, sections=enclosing, skip=(heading,) if heading is not None else ())
        blocks = [b for b in rendered if isinstance(b, str)]
        out.append(Section(anchor and anchor[:MAX_ANCHOR_CHARS], title, path, "\n\n".join(blocks)))
    return out


def _html_sections_generic(body, doc_title: str | None, tick: Ticker) -> list[Section]:
    blocks = render(body, tick, headings=True)
    slug = Slugger()
    sections: list[Section] = []
    cur = Section(None, doc_title or "", "", "")
    cur_blocks: list[str] = []
    stack: list[tuple[int, str]] = []  # (level, path with the heading's own title)
    preamble = True

    def close() -> None:
        cur.content = "\n\n".join(cur_blocks)
        if not preamble or cur.content.strip():
            sections.append(cur)

    for b in blocks:
        tick()
        if isinstance(b, Heading):
            close()
            preamble = False
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            path = stack[-1][1] if stack else ""
            anchor = b.anchor and b.anchor[:MAX_ANCHOR_CHARS]
            cur = Section(anchor or slug(b.text), b.text, path, "")
            if anchor:
                slug.taken.add(anchor)
            cur_blocks = []
            stack.append((b.level, extend_path(path if stack else None, b.text)))
        else:
            cur_blocks.append(b)
    close()
    return sections


def chunk_html(
    html: str,
    max_tokens: int = 256,
    count_tokens=None,
    *,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    checkpoint: Callable[[], object] | None = None,
) -> ParseResult:
    """Chunk an HTML document: one chunk (or several parts) per section.

    At most ``max_bytes`` bytes of UTF-8 (InputError 54000 beyond). ``checkpoint`` is called now and then
    (every few hundred elements or token counts); what it raises stops the work.
    """
    check_size(html, max_bytes)
    tick = Ticker(checkpoint)
    count = Counter(count_tokens, tick)
    result = ParseResult(format="html")
    root = _parse_html_doc(html, tick)
    if root is None:
        return result
    doc_title = None
    t = root.find(".//title")
    if t is not None:
        doc_title = norm(t.text_content()) or None
    if doc_title is None:
        h1 = next(root.iter("h1"), None)
        if h1 is not None:
            doc_title = norm(h1.text_content()) or None
    result.title = doc_title

    body = root.find("body")
    if body is None:
        body = root
    enclosing = _docbook_sections(root, tick)
    if enclosing:
        sections = _html_sections_docbook(enclosing, tick)
        # Text outside every section div (other than navigation) must not be lost silently.
        outside = "\n\n".join(b for b in render(body, tick, sections=enclosing) if isinstance(b, str))
        if outside.strip():
            sections.insert(0, Section(None, doc_title or "", "", outside))
    else:
        sections = _html_sections_generic(body, doc_title, tick)
    result.sections_found = len(sections)
    result.chunks, result.empty_sections = build_chunks(sections, max_tokens, count)
    return result
