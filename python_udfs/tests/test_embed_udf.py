"""embed.py and udf.py: the real model in plain Python, and the PL/Python entry points with a fake plpy."""

from __future__ import annotations

import itertools
import json
import math
import time
from array import array

import pytest
from pgcite_udfs import embed, udf


class PlpyError(Exception):
    def __init__(self, message, **kw):
        super().__init__(message)
        self.kw = kw


class QueryCanceled(Exception):
    """What plpy.execute raises when PostgreSQL processes a statement_timeout or pg_cancel_backend."""


class FakePlpy:
    """Just enough of PL/Python's plpy: settings lookups, `SELECT 1` (timed; the cancel_at-th one raises
    QueryCanceled) and plpy.error."""

    def __init__(self, settings=None, cancel_at=None):
        self.settings = settings or {}
        self.cancel_at = cancel_at
        self.selects: list[float] = []

    def prepare(self, sql, types):
        assert sql == "SELECT rag._config_text($1) AS v" and types == ["text"]
        return sql

    def execute(self, plan, args=None):
        if plan == "SELECT 1":  # where the backend processes a cancel
            self.selects.append(getattr(self, "clock", time.monotonic)())
            if len(self.selects) == self.cancel_at:
                raise QueryCanceled("canceling statement due to statement timeout")
            return [{"?column?": 1}]
        if args is None:  # is rag._config_text there (an updated database)?
            assert "to_regprocedure('rag._config_text(text)')" in plan
            return [{"ok": True}]
        return [{"v": self.settings.get(args[0])}]

    def error(self, message, detail=None, hint=None, sqlstate=None):
        raise PlpyError(message, detail=detail, hint=hint, sqlstate=sqlstate)


def test_vector_literal_round_trips_float32_exactly():
    vals = array("f", [0.1, -2.5e-8, 3.0, 1 / 3]).tolist()
    lit = embed.to_vector_literal(vals)
    assert lit.startswith("[") and lit.endswith("]")
    assert array("f", embed.parse_vector_literal(lit)).tolist() == vals


def test_model_loads_once_and_gives_normalised_384_dims():
    cache = {}
    m = embed.load_model(cache, threads=1)
    assert embed.load_model(cache, threads=1) is m
    v = embed.encode(m, ["hello world", "vacuum"])
    assert v.shape == (2, embed.DIM)
    assert math.isclose(float((v[0] ** 2).sum()), 1.0, rel_tol=1e-5)


def test_embed_texts_keeps_nulls_and_counts_work():
    gd = {}
    out = udf.embed_texts(FakePlpy(), gd, ["a", None, "b"])
    assert out[1] is None and len(embed.parse_vector_literal(out[0])) == 384
    assert gd["embedded_texts"] == 2


def test_bad_thread_setting_is_22023():
    with pytest.raises(PlpyError) as e:
        udf.model(FakePlpy({"torch_threads": "zero"}), {})
    assert e.value.kw["sqlstate"] == "22023"


def test_missing_packages_are_pc001_with_a_hint(monkeypatch):
    def broken(cache, threads, huge_pages=True):
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(embed, "load_model", broken)
    with pytest.raises(PlpyError) as e:
        udf.model(FakePlpy(), {})
    assert e.value.kw["sqlstate"] == udf.ENV_MISSING and "make setup" in e.value.kw["hint"]


def test_the_setting_embedding_huge_pages_reaches_the_loader(monkeypatch):
    seen = []

    def loader(cache, threads, huge_pages=True):
        seen.append(huge_pages)
        return object()

    monkeypatch.setattr(embed, "load_model", loader)
    cases = [({}, True), ({"embedding_huge_pages": "1"}, True), ({"embedding_huge_pages": "0"}, False)]
    for settings, want in cases:
        udf.model(FakePlpy(settings), {})
        assert seen[-1] is want


def test_unloadable_model_is_pc002(monkeypatch):
    def broken(cache, threads, huge_pages=True):
        raise OSError("model.safetensors: no such file")

    monkeypatch.setattr(embed, "load_model", broken)
    with pytest.raises(PlpyError) as e:
        udf.model(FakePlpy(), {})
    assert e.value.kw["sqlstate"] == udf.MODEL_UNAVAILABLE


def test_parse_returns_errors_instead_of_raising():
    gd = {}
    bad = json.loads(udf.parse(FakePlpy(), gd, "plain words and nothing else", "html", 256, 32))
    assert bad["error"]["sqlstate"] == "22023" and bad["error"]["hint"]
    good = json.loads(udf.parse(FakePlpy(), gd, "# Title\n\nSome text.\n", "auto", 256, 32))
    assert good["format"] == "markdown" and good["chunks"][0]["anchor"] == "title"
    toc = json.loads(
        udf.parse(FakePlpy(), gd, "<html><body><div class='toc'>x</div></body></html>", "html", 256, 32)
    )
    assert toc["chunks"] == [] and "error" not in toc


def test_long_embedding_work_stops_at_a_cancel_between_slices():
    gd = {}
    plpy = FakePlpy(cancel_at=2)
    texts = [f"text number {i}" for i in range(udf.CANCEL_SLICE * 4)]
    with pytest.raises(QueryCanceled):
        udf.embed_texts(plpy, gd, texts)
    assert gd.get("embedded_texts", 0) == 0  # nothing is reported as embedded
    plpy = FakePlpy()
    out = udf.embed_texts(plpy, gd, texts)
    assert len(out) == len(texts) and len(plpy.selects) == 3


def test_too_much_text_to_embed_is_54000():
    with pytest.raises(PlpyError) as e:
        udf.embed_texts(FakePlpy({"max_document_bytes": "100"}), {}, ["x" * 60, "y" * 60])
    assert e.value.kw["sqlstate"] == "54000"


def test_more_texts_than_a_document_may_have_is_54000_before_any_work(monkeypatch):
    """NULLs and empty texts have no bytes, but each costs a result row: a call takes at most one text per
    64 bytes of max_document_bytes, checked before the model loads or any list is built."""
    monkeypatch.setattr(udf, "model", lambda plpy, GD: pytest.fail("the model must not load"))
    plpy = FakePlpy({"max_document_bytes": str(64 * 10)})
    for texts in ([None] * 11, [""] * 11):
        with pytest.raises(PlpyError) as e:
            udf.embed_texts(plpy, {}, texts)
        assert e.value.kw["sqlstate"] == "54000" and "11 texts" in str(e.value)
    assert udf.embed_texts(plpy, {}, [None] * 10) == [None] * 10


def test_parse_limit_is_the_setting_max_document_bytes():
    gd = {}
    small = FakePlpy({"max_document_bytes": "16"})
    over = json.loads(udf.parse(small, gd, "seventeen bytes!!", "text", 256, 32))
    assert over["error"]["sqlstate"] == "54000"
    assert "17 bytes" in over["error"]["message"] and "16 bytes" in over["error"]["message"]
    assert "max_document_bytes" in over["error"]["hint"]
    assert json.loads(udf.parse(small, gd, "sixteen bytes!!!", "text", 256, 32))["chunks"]
    with pytest.raises(PlpyError) as e:
        udf.parse(FakePlpy({"max_document_bytes": "lots"}), gd, "text", "text", 256, 32)
    assert e.value.kw["sqlstate"] == "22023"


# A long document for the checkpoint: ~0.8 MB of Markdown, of sentences all different (not counted twice).
LONG_MD = "".join(
    f"## Part {i}\n\n" + "".join(f"Words of part {i}, sentence {j} of it. " for j in range(40)) + "\n\n"
    for i in range(500)
)


GD: dict = {}  # the backend's cache, shared by the checkpoint tests (the tokenizer is loaded once)


class Clock:
    """A fake monotonic clock that advances by step at every reading."""

    def __init__(self, step: float):
        self.step = step
        self.now = 0.0
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.step
        return self.now


def test_parse_runs_a_query_at_most_every_50_ms(monkeypatch):
    # the times the checkpoint itself read: a time read after the query would add the test's own jitter
    readings: list[float] = []

    def clock() -> float:
        readings.append(time.monotonic())
        return readings[-1]

    monkeypatch.setattr(udf, "monotonic", clock)
    plpy = FakePlpy()
    plpy.clock = lambda: readings[-1]
    doc = json.loads(udf.parse(plpy, GD, LONG_MD, "markdown", 256, 32))
    assert len(doc["chunks"]) == 1000
    assert plpy.selects, "no checkpoint query in a long parse"
    gaps = [b - a for a, b in itertools.pairwise(plpy.selects)]
    assert all(g >= udf.CHECKPOINT_SECONDS for g in gaps)


def test_parse_checkpoint_follows_the_clock(monkeypatch):
    clock = Clock(0.02)  # 20 ms a call of the checkpoint: a query every third call
    monkeypatch.setattr(udf, "monotonic", clock)
    plpy = FakePlpy()
    udf.parse(plpy, GD, LONG_MD, "markdown", 256, 32)
    checkpoints = clock.readings - 1  # one reading when the checkpoint is made
    assert checkpoints > 30
    assert len(plpy.selects) == pytest.approx(checkpoints / 3, abs=1)
    monkeypatch.setattr(udf, "monotonic", Clock(0.0))  # time stands still: no query at all
    plpy = FakePlpy()
    udf.parse(plpy, GD, LONG_MD, "markdown", 256, 32)
    assert plpy.selects == []


def test_cancel_during_parse_propagates(monkeypatch):
    monkeypatch.setattr(udf, "monotonic", Clock(1.0))  # a query at every call of the checkpoint
    for body, fmt in [(LONG_MD, "markdown"), (LONG_MD, "text"), ("<p>Words and words.</p>\n" * 3000, "html")]:
        plpy = FakePlpy(cancel_at=3)
        with pytest.raises(QueryCanceled):
            udf.parse(plpy, GD, body, fmt, 256, 32)
        assert len(plpy.selects) == 3, fmt  # not swallowed: the work stopped at the cancel
