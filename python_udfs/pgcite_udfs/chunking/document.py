"""parse(): a document validated and chunked in its format."""

from __future__ import annotations

import re
from collections.abc import Callable

from .detect import ANY_TAG_RE, SAMPLE_CHARS, detect_format
from .errors import MAX_DOCUMENT_BYTES, InputError, check_size
from .html import chunk_html
from .markdown import chunk_markdown
from .result import ParseResult
from .text import chunk_text

FORMATS = ("html", "markdown", "text")

_GARBAGE_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffd]")


def parse(
    body: str,
    fmt: str = "auto",
    max_tokens: int = 256,
    overlap: int = 32,
    count_tokens=None,
    allow_empty: bool = False,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    checkpoint: Callable[[], object] | None = None,
) -> ParseResult:
    """Validate ``body`` and chunk it in format ``fmt`` ('auto' detects it).

    A document whose sections are all empty (a table of contents, navigation only) raises InputError, or
    with ``allow_empty`` comes back with no chunks and its sections listed in ``empty_sections``. A body
    over ``max_bytes`` bytes of UTF-8 raises InputError 54000 (program_limit_exceeded).

    ``checkpoint`` (no arguments) is called now and then during the work, every few hundred elements,
    lines or token counts: it may raise to stop the work (in PostgreSQL: a pending cancel or timeout), and
    what it raises leaves parse unchanged.
    """
    if body is None or not isinstance(body, str) or not body.strip():
        raise InputError(
            "document body is empty",
            hint="Pass the document text (HTML, Markdown or plain text).",
        )
    check_size(body, max_bytes)
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
    elif name == "html" and detected != "html" and not ANY_TAG_RE.search(body[:SAMPLE_CHARS]):
        raise InputError(
            "document declared as html contains no HTML markup",
            hint=f"Use format 'auto' or the right format (it looks like {detected}).",
        )
    if name == "html":
        result = chunk_html(body, max_tokens, count_tokens, max_bytes=max_bytes, checkpoint=checkpoint)
    elif name == "markdown":
        result = chunk_markdown(body, max_tokens, count_tokens, max_bytes=max_bytes, checkpoint=checkpoint)
    else:
        result = chunk_text(
            body, max_tokens, overlap, count_tokens, max_bytes=max_bytes, checkpoint=checkpoint
        )
    if not result.chunks and not allow_empty:
        raise InputError(
            "document has no text content",
            hint="The document contains only markup, navigation or headings; check that the right "
            "document and format were given.",
            detail=f"format {result.format}: {result.sections_found} sections found, all empty.",
        )
    return result
