"""Golden check of the chunker: one hash of everything it makes of real documents.

    /opt/pgcite/venv/bin/python python_udfs/tests/golden_chunks.py [--per-file DIR] [--manual-only]

Chunks every page of the PostgreSQL manual (postgresql-doc-15, ~1,200 HTML files) with the MiniLM
tokenizer and prints a SHA-256 of all (anchor, section_path, title, content, token_count), file by file in
name order; then the same for other configurations and corpora (a small window; every Markdown and text
file under /usr/share/doc), and the format detect_format gives each file. A refactoring must leave every
figure unchanged; a change of the figures for ordinary documents means CHUNKER_VERSION must be bumped.
--per-file writes one digest per file into DIR, to diff two runs and find the files that changed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pgcite_udfs.chunking import InputError, detect_format, load_token_counter, parse  # noqa: E402
from pgcite_udfs.embed import tokenizer_path  # noqa: E402

MANUAL = Path("/usr/share/doc/postgresql-doc-15/html")
DOCS = Path("/usr/share/doc")


def digest(body: str, fmt: str, max_tokens: int, overlap: int, counter) -> tuple[str, int]:
    """SHA-256 of the chunks of one document (or of its InputError) and the number of chunks."""
    h = hashlib.sha256()
    try:
        res = parse(body, fmt, max_tokens=max_tokens, overlap=overlap, count_tokens=counter, allow_empty=True)
    except InputError as e:
        h.update(repr(("error", e.sqlstate, e.message)).encode())
        return h.hexdigest(), 0
    for c in res.chunks:
        h.update(repr((c.anchor, c.section_path, c.title, c.content, c.token_count)).encode())
    return h.hexdigest(), len(res.chunks)


def run(name: str, files: list[Path], fmt: str, max_tokens: int, overlap: int, counter, out: Path | None):
    started = time.perf_counter()
    total = hashlib.sha256()
    chunks = 0
    lines = []
    for f in files:
        d, n = digest(f.read_text(encoding="utf-8", errors="replace"), fmt, max_tokens, overlap, counter)
        total.update(f"{f}\0{d}\n".encode())
        chunks += n
        lines.append(f"{d} {n} {f}")
    if out is not None:
        (out / f"{name}.txt").write_text("\n".join(lines) + "\n")
    secs = time.perf_counter() - started
    print(f"{name}: {len(files)} files, {chunks} chunks, {secs:.1f}s  sha256={total.hexdigest()}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-file", type=Path, help="directory for one digest per file")
    ap.add_argument("--manual-only", action="store_true", help="only the manual with the default window")
    args = ap.parse_args()
    if args.per_file:
        args.per_file.mkdir(parents=True, exist_ok=True)
    counter = load_token_counter(tokenizer_path())
    manual = sorted(MANUAL.glob("*.html"))
    if not manual:
        sys.exit(f"no manual at {MANUAL} (install postgresql-doc-15)")
    run("manual-html-256", manual, "auto", 256, 32, counter, args.per_file)
    if args.manual_only:
        return
    run("manual-html-64", manual, "auto", 64, 8, counter, args.per_file)
    markdown, text = sorted(DOCS.rglob("*.md")), sorted(DOCS.rglob("*.txt"))
    run("doc-markdown-256", markdown, "markdown", 256, 32, counter, args.per_file)
    run("doc-markdown-64", markdown, "markdown", 64, 8, counter, args.per_file)
    run("doc-text-128", text, "text", 128, 16, counter, args.per_file)
    detected = hashlib.sha256()
    for f in [*manual, *markdown, *text]:
        detected.update(f"{f}\0{detect_format(f.read_text(encoding='utf-8', errors='replace'))}\n".encode())
    print(f"detect_format: {len(manual) + len(markdown) + len(text)} files  sha256={detected.hexdigest()}")


if __name__ == "__main__":
    main()
