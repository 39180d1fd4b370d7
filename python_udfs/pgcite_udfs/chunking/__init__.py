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

Limits. Every entry point takes time linear in its input, whatever its shape (one long word, long runs
of markup characters, deep nesting, many tiny paragraphs), and uses no recursion that the input can make
deep. ``parse``, ``chunk_html``, ``chunk_markdown`` and ``chunk_text`` refuse a body over ``max_bytes``
bytes of UTF-8 (default MAX_DOCUMENT_BYTES, 20 MiB, as the setting pgcite.max_document_bytes) with
InputError 54000; ``detect_format`` reads at most its first 200,000 characters. HTML may be nested 2048
levels deep (libxml2's limit; deeper is InputError 54000, never text silently dropped). An anchor is at
most 256 characters, a section_path 1024 (outer titles dropped first), a title a quarter of the window
and 8 characters a token of that. ``checkpoint`` (optional, no arguments) is called every few hundred
elements, lines or token counts: what it raises stops the work (PostgreSQL's cancel and timeout).
"""

from __future__ import annotations

from .detect import detect_format
from .document import parse
from .errors import MAX_DOCUMENT_BYTES, InputError
from .html import chunk_html
from .markdown import chunk_markdown
from .result import Chunk, ParseResult
from .text import chunk_text
from .tokens import estimate_tokens, load_token_counter

# Bump when the chunks produced for the same input change: rag.ingest folds it into a document's hash,
# so re-ingesting after an upgrade re-chunks (reusing the embeddings of unchanged chunk texts) instead of
# reporting "unchanged". 2: HTML comments dropped from Markdown.
CHUNKER_VERSION = 2

__all__ = [
    "Chunk",
    "InputError",
    "MAX_DOCUMENT_BYTES",
    "ParseResult",
    "chunk_html",
    "chunk_markdown",
    "chunk_text",
    "detect_format",
    "estimate_tokens",
    "load_token_counter",
    "parse",
]
