"""embed.py and udf.py: the real model in plain Python, and the PL/Python entry points with a fake plpy."""

from __future__ import annotations

import json
import math
from array import array

import pytest
from pgcite_udfs import embed, udf


class PlpyError(Exception):
    def __init__(self, message, **kw):
        super().__init__(message)
        self.kw = kw


class FakePlpy:
    """Just enough of PL/Python's plpy: settings lookups (rag._config_text) and plpy.error."""

    def __init__(self, settings=None):
        self.settings = settings or {}

    def prepare(self, sql, types):
        assert sql == "SELECT rag._config_text($1) AS v" and types == ["text"]
        return sql

    def execute(self, plan, args=None):
        if plan == "SELECT 1":  # where the backend would process a cancel
            self.interrupt_points = getattr(self, "interrupt_points", 0) + 1
            if getattr(self, "cancel_at", None) == self.interrupt_points:
                raise PlpyError("canceling statement due to statement timeout", sqlstate="57014")
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
    def broken(cache, threads):
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(embed, "load_model", broken)
    with pytest.raises(PlpyError) as e:
        udf.model(FakePlpy(), {})
    assert e.value.kw["sqlstate"] == udf.ENV_MISSING and "make setup" in e.value.kw["hint"]


def test_unloadable_model_is_pc002(monkeypatch):
    def broken(cache, threads):
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
    plpy = FakePlpy()
    plpy.cancel_at = 2
    texts = [f"text number {i}" for i in range(udf.CANCEL_SLICE * 4)]
    with pytest.raises(PlpyError) as e:
        udf.embed_texts(plpy, gd, texts)
    assert e.value.kw["sqlstate"] == "57014"
    assert gd.get("embedded_texts", 0) == 0  # nothing is reported as embedded
    plpy = FakePlpy()
    out = udf.embed_texts(plpy, gd, texts)
    assert len(out) == len(texts) and plpy.interrupt_points == 3


def test_too_much_text_to_embed_is_54000():
    with pytest.raises(PlpyError) as e:
        udf.embed_texts(FakePlpy({"max_document_bytes": "100"}), {}, ["x" * 60, "y" * 60])
    assert e.value.kw["sqlstate"] == "54000"
