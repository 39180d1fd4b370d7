"""Ingest files and directories: one rag.ingest call (one transaction) per document, streamed.

Without pgcite_python in the database (or with Client(client_side=True)), each document is parsed, chunked and
embedded in this process by the database's own chunker and model (pgcite.local) and stored with
rag.store_parsed, in one transaction too.

Paths are walked lazily and each file is read just before it is sent, so memory holds one document at a
time. doc_key is the file's path relative to the root it was found under (the directory given, the
directory part of a glob before its first wildcard, or the file's own directory), with "/" separators:
re-running on the same tree gives the same keys, so unchanged files come back `unchanged`.
A file that cannot be read or that the database refuses is recorded in `failed` and skipped.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from .client import Client
from .errors import ConnectionFailed, LocalModelUnavailable, PgciteError
from .types import IngestResult

FORMATS = ("auto", "html", "markdown", "text")
EXTENSION_FORMATS = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}
# Files a directory walk picks up; files named explicitly (or matched by a glob) are taken whatever they are.
DOCUMENT_SUFFIXES = frozenset({*EXTENSION_FORMATS, ".txt", ".text", ".rst"})
_GLOB_CHARS = set("*?[")


def detect_format(path: str | Path, forced: str = "auto") -> str:
    """html for .html/.htm, markdown for .md/.markdown, text otherwise; `forced` (not auto) wins."""
    if forced not in FORMATS:
        raise ValueError(f"unknown format {forced!r}; use one of {', '.join(FORMATS)}")
    if forced != "auto":
        return forced
    return EXTENSION_FORMATS.get(Path(path).suffix.lower(), "text")


@dataclass(frozen=True)
class SourceFile:
    path: Path
    doc_key: str


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _walk_dir(root: Path) -> Iterator[Path]:
    """Document files under root in a stable order (sorted; hidden files and directories, and files that are
    not documents by their suffix — stylesheets, images — skipped)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
        for name in sorted(filenames):
            if not _hidden(name) and Path(name).suffix.lower() in DOCUMENT_SUFFIXES:
                yield Path(dirpath) / name


def _glob_root(pattern: str) -> Path:
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts:
        if _GLOB_CHARS & set(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _key(path: Path, root: Path) -> str:
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        rel = Path(path.name)
    return rel.as_posix()


def iter_sources(paths: Iterable[str | Path], root: str | Path | None = None) -> Iterator[SourceFile]:
    """Files named by `paths` (files, directories walked recursively, globs), each with its doc_key.

    With `root`, every doc_key is relative to it instead. A path that matches nothing yields a SourceFile
    whose file does not exist, so the caller reports it as failed. A file reached twice is yielded once.
    """
    seen: set[Path] = set()
    fixed_root = Path(root) if root is not None else None

    def emit(path: Path, base: Path) -> Iterator[SourceFile]:
        real = path.resolve()
        if real in seen:
            return
        seen.add(real)
        yield SourceFile(path, _key(path, fixed_root or base))

    for raw in paths:
        text = str(raw)
        p = Path(text)
        if p.is_dir():
            for f in _walk_dir(p):
                yield from emit(f, p)
        elif p.exists():
            yield from emit(p, p.parent)
        elif _GLOB_CHARS & set(text):
            base = _glob_root(text)
            for match in sorted(glob.iglob(text, recursive=True)):
                m = Path(match)
                if m.is_dir():
                    for f in _walk_dir(m):
                        yield from emit(f, base)
                elif m.is_file():
                    yield from emit(m, base)
        else:
            yield SourceFile(p, p.name)  # missing: reported as failed


def read_document(path: Path) -> str:
    """The file as text; ValueError for binary or non-UTF-8 content."""
    data = path.read_bytes()
    if b"\x00" in data:
        raise ValueError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


@dataclass
class IngestSummary:
    """Counts of one ingest run; `errors` lists every file that failed, and why."""

    documents: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    empty: int = 0  # documents whose sections were all empty (a table of contents): recorded, no chunks
    chunks: int = 0
    empty_sections: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)

    def add(self, source: SourceFile, result: IngestResult) -> None:
        self.documents += 1
        if result.status in ("inserted", "updated", "unchanged", "empty"):
            setattr(self, result.status, getattr(self, result.status) + 1)
        self.chunks += result.chunks
        self.empty_sections += result.empty_sections
        self.results.append({"path": str(source.path), **result.to_dict()})

    def fail(
        self, source: SourceFile, error: str, sqlstate: str | None = None, hint: str | None = None
    ) -> None:
        self.documents += 1
        self.failed += 1
        self.errors.append(
            {
                "path": str(source.path),
                "doc_key": source.doc_key,
                "sqlstate": sqlstate,
                "error": error,
                "hint": hint,
            }
        )

    def to_dict(self, with_results: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "documents": self.documents,
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "empty": self.empty,
            "chunks": self.chunks,
            "empty_sections": self.empty_sections,
            "failed": self.failed,
            "errors": list(self.errors),
        }
        if with_results:
            out["results"] = list(self.results)
        return out


def ingest_paths(
    client: Client,
    tenant: str,
    paths: Iterable[str | Path],
    *,
    format: str = "auto",
    root: str | Path | None = None,
    source_url_prefix: str | None = None,
    progress: bool | None = None,
    progress_file: TextIO | None = None,
    on_result: Callable[[SourceFile, IngestResult | None, PgciteError | ValueError | OSError | None], None]
    | None = None,
) -> IngestSummary:
    """Ingests every file under `paths` into `tenant`, one transaction per document.

    format: auto (by extension) or html|markdown|text for every file. source_url_prefix + doc_key becomes the
    document's source_url. progress: True/False, or None for a bar only when stderr is a terminal.
    A connection failure stops the run (raised); any other error is recorded and the next file goes on.
    Where the client parses and embeds (Client(client_side=True), or a server without pgcite_python), a
    missing local extra (PC003) or a model other than the database's (55000) stops it before any file is read.
    """
    detect_format("x", format)  # validates the forced format before anything is read
    client.check_client_side()
    paths = list(paths)
    total = sum(1 for _ in iter_sources(paths, root))  # paths only: cheap, and gives the bar a total
    summary = IngestSummary()
    bar = tqdm(
        total=total,
        unit="doc",
        desc=f"ingest {tenant}",
        file=progress_file or sys.stderr,
        disable=None if progress is None else not progress,
        dynamic_ncols=True,
    )
    try:
        for source in iter_sources(paths, root):
            result: IngestResult | None = None
            error: PgciteError | ValueError | OSError | None = None
            try:
                body = read_document(source.path)
                url = f"{source_url_prefix}{source.doc_key}" if source_url_prefix else None
                result = client.ingest(
                    tenant, source.doc_key, body, detect_format(source.path, format), source_url=url
                )
                del body
            except (ConnectionFailed, LocalModelUnavailable):
                raise
            except PgciteError as exc:
                error = exc
                summary.fail(source, exc.message, exc.sqlstate, exc.hint)
            except (OSError, ValueError) as exc:
                error = exc
                message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                summary.fail(source, message)
            if result is not None:
                summary.add(source, result)
            if on_result is not None:
                on_result(source, result, error)
            bar.update(1)
            bar.set_postfix(chunks=summary.chunks, failed=summary.failed, refresh=False)
    finally:
        bar.close()
    return summary
