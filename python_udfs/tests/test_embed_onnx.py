"""The onnxruntime backend of embed.py against sentence-transformers, and its independence from torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pgcite_udfs import embed, onnx_export

PY_UDFS = Path(__file__).resolve().parents[1]
LONG = " ".join(
    [
        "VACUUM reclaims storage occupied by dead tuples; in normal operation, tuples that are deleted or",
        "obsoleted by an update are not physically removed from their table until a VACUUM is done.",
        "Therefore it's necessary to do VACUUM periodically, especially on frequently-updated tables.",
    ]
    * 12
)
TEXTS = [
    "How do I prevent transaction ID wraparound failures?",
    "vacuum",
    "a",
    "",
    "   leading and trailing spaces   ",
    "GIN indexes are inverted indexes.",
    "é ü ß — Ünïcödé, 日本語のテキスト, emoji 🙂🐘, Ελληνικά, русский",
    "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE n_dead_tup > 1000 ORDER BY 2 DESC;",
    "def f(x):\n    return {k: v for k, v in x.items() if v is not None}  # comprehension",
    LONG,  # > 256 word pieces: truncation decides the vector
    "word " * 600,
    "\t\n",
    "ALTER TABLE t SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);",
]
MIN_COSINE = 0.9999


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory) -> str:
    """The installed export when current (make setup made it), else a fresh one in a temporary directory."""
    if embed.onnx_export_current():
        return embed.onnx_dir()
    return onnx_export.run(str(tmp_path_factory.mktemp("onnx") / "minilm-onnx"))


@pytest.fixture(scope="session")
def onnx_model(onnx_dir):
    return embed.load_onnx(onnx_dir, threads=1)


@pytest.fixture(scope="session")
def st_model():
    return embed.load_torch(threads=1)


def st_encode(st_model, texts):
    return st_model.encode(list(texts), convert_to_numpy=True, show_progress_bar=False)


def test_long_text_is_longer_than_max_seq_length(onnx_model):
    assert onnx_model.max_seq_length == 256
    raw = onnx_model.tokenizer.encode(LONG, add_special_tokens=True)
    assert len(raw.ids) == 256 and len(raw.overflowing) > 0  # truncated: more than 256 word pieces


def test_onnx_matches_sentence_transformers_per_text(onnx_model, st_model):
    ours = embed.encode(onnx_model, TEXTS)
    ref = st_encode(st_model, TEXTS)
    assert ours.shape == ref.shape == (len(TEXTS), embed.DIM) and ours.dtype == np.float32
    cos = np.sum(ours * ref, axis=1)
    assert cos.min() >= MIN_COSINE, dict(zip(TEXTS, cos.tolist(), strict=True))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_each_text_alone_matches_too(onnx_model, st_model):
    for text in TEXTS:
        ours = embed.encode(onnx_model, [text])[0]
        ref = st_encode(st_model, [text])[0]
        assert float(ours @ ref) >= MIN_COSINE, text


def test_batching_and_length_sort_keep_the_input_order(onnx_model):
    whole = embed.encode(onnx_model, TEXTS)
    small = embed.encode(onnx_model, TEXTS, batch_size=3)
    alone = np.stack([embed.encode(onnx_model, [t])[0] for t in TEXTS])
    assert np.allclose(whole, alone, atol=1e-5) and np.allclose(small, alone, atol=1e-5)
    rev = embed.encode(onnx_model, TEXTS[::-1])
    assert np.allclose(rev[::-1], whole, atol=1e-5)
    # more long texts than one run of MAX_BATCH_TOKENS holds, between short ones
    mixed = [f"{i} {LONG}" if i % 2 else f"question {i}?" for i in range(24)]
    ours = embed.encode(onnx_model, mixed)
    alone = np.stack([embed.encode(onnx_model, [t])[0] for t in mixed])
    assert np.allclose(ours, alone, atol=1e-5)


def test_no_texts_is_an_empty_array(onnx_model):
    assert embed.encode(onnx_model, []).shape == (0, embed.DIM)


def test_threads_reach_the_session(onnx_dir):
    m = embed.load_onnx(onnx_dir, threads=2)
    opts = m.session.get_session_options()
    assert opts.intra_op_num_threads == 2 and opts.inter_op_num_threads == 1


def test_export_is_current_and_not_redone(onnx_dir):
    assert onnx_export.up_to_date(onnx_dir, embed.model_path())
    manifest = embed.read_manifest(onnx_dir)
    assert manifest["max_seq_length"] == 256 and manifest["source"]["version"] == embed.model_version()


def test_stale_or_missing_export_is_not_used(onnx_dir, tmp_path, monkeypatch):
    stale = tmp_path / "stale"
    stale.mkdir()
    for f in (embed.ONNX_FILE, embed.TOKENIZER_FILE):
        (stale / f).symlink_to(Path(onnx_dir) / f)
    manifest = embed.read_manifest(onnx_dir)
    manifest["source"]["version"] = "0.0.0-other"
    (stale / embed.MANIFEST_FILE).write_text(json.dumps(manifest))
    assert not embed.onnx_export_current(str(stale))
    assert not embed.onnx_export_current(str(tmp_path / "nothing"))
    monkeypatch.setenv("PGCITE_ONNX_DIR", str(stale))
    monkeypatch.setenv("PGCITE_EMBED_BACKEND", "onnx")
    with pytest.raises(FileNotFoundError, match="onnx_export"):
        embed.load_model({}, threads=1)


def test_auto_falls_back_to_sentence_transformers_without_an_export(tmp_path, monkeypatch, st_model):
    monkeypatch.setenv("PGCITE_ONNX_DIR", str(tmp_path / "nothing"))
    monkeypatch.delenv("PGCITE_EMBED_BACKEND", raising=False)
    m = embed.load_model({}, threads=1)
    assert embed.backend(m) == "torch"
    assert np.allclose(embed.encode(m, TEXTS[:3]), st_encode(st_model, TEXTS[:3]), atol=1e-6)


def test_bad_backend_name_is_refused(monkeypatch):
    monkeypatch.setenv("PGCITE_EMBED_BACKEND", "gpu")
    with pytest.raises(ValueError, match="PGCITE_EMBED_BACKEND"):
        embed.load_model({}, threads=1)


NO_TORCH = r"""
import json, sys
from pgcite_udfs import embed, udf

class Plpy:
    def prepare(self, sql, types):
        return sql
    def execute(self, sql, args=None):
        return [{"v": None, "ok": True}]
    def error(self, message, **kw):
        raise RuntimeError(message)

gd = {}
vecs = udf.embed_texts(Plpy(), gd, ["How do I vacuum a table?", None, ""])
chunks = json.loads(udf.parse(Plpy(), gd, "# Title\n\nSome text.\n", "auto", 256, 32))["chunks"]
HEAVY = ("torch", "sentence_transformers", "transformers")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
backend = embed.backend(gd["model"])
embed.encode(gd["model"], [("word " * 300) + str(i) for i in range(64)])  # 64 texts of 256 word pieces
peak = [int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
result = {"backend": backend, "heavy": heavy, "n": len(vecs), "chunks": len(chunks), "peak_mb": peak}
print(json.dumps(result))
"""


def test_the_onnx_path_never_imports_torch(onnx_dir):
    env = {k: v for k, v in os.environ.items() if k != "PGCITE_EMBED_BACKEND"}
    env.update(PYTHONPATH=str(PY_UDFS), PGCITE_ONNX_DIR=onnx_dir, HF_HUB_OFFLINE="1")
    out = subprocess.run(
        [sys.executable, "-c", NO_TORCH], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    peak = result.pop("peak_mb")
    assert result == {"backend": "onnx", "heavy": [], "n": 3, "chunks": 1}
    # the bound for a backend, after a batch of chunk-sized texts (~240 MB measured)
    assert peak <= 350, f"peak RSS {peak} MB"
