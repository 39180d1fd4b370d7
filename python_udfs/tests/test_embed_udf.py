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
    """Just enough of PL/Python's plpy: settings lookups and plpy.error."""

    def __init__(self, settings=None):
        self.settings = settings or {}

    def execute(self, sql):
        name = sql.split("current_setting('")[1].split("'")[0]
        return [{"v": self.settings.get(name)}]

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
        udf.model(FakePlpy({"pgcite.torch_threads": "zero"}), {})
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


def test_parse_limit_is_the_setting_max_document_bytes():
    gd = {}
    small = FakePlpy({"pgcite.max_document_bytes": "16"})
    over = json.loads(udf.parse(small, gd, "seventeen bytes!!", "text", 256, 32))
    assert over["error"]["sqlstate"] == "54000"
    assert "17 bytes" in over["error"]["message"] and "16 bytes" in over["error"]["message"]
    assert "pgcite.max_document_bytes" in over["error"]["hint"]
    assert json.loads(udf.parse(small, gd, "sixteen bytes!!!", "text", 256, 32))["chunks"]
    with pytest.raises(PlpyError) as e:
        udf.parse(FakePlpy({"pgcite.max_document_bytes": "lots"}), gd, "text", "text", 256, 32)
    assert e.value.kw["sqlstate"] == "22023"
