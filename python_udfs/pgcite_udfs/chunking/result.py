"""What the chunker returns: the chunks of a document and what was found on the way."""

from __future__ import annotations

from dataclasses import dataclass, field


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
