"""Shared fixtures for the pgcite_udfs tests.

The package under test is imported from this source tree (python_udfs/), not from a copy that may be
installed in the venv's site-packages.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PY_UDFS = Path(__file__).resolve().parents[1]
if str(PY_UDFS) not in sys.path:
    sys.path.insert(0, str(PY_UDFS))
for _name in [m for m in sys.modules if m == "pgcite_udfs" or m.startswith("pgcite_udfs.")]:
    if not str(getattr(sys.modules[_name], "__file__", "") or "").startswith(str(PY_UDFS)):
        del sys.modules[_name]

MANUAL_DIR = next(iter(sorted(Path("/usr/share/doc").glob("postgresql-doc-*/html"))), Path("/nonexistent"))
try:  # the model package of the venv these tests run in (python3.11 on Debian 12, 3.13 on 13)
    from pgcite_udfs.embed import tokenizer_path

    TOKENIZER_JSON = Path(tokenizer_path())
except ImportError:
    TOKENIZER_JSON = Path("/nonexistent/tokenizer.json")


@pytest.fixture(scope="session")
def manual_dir() -> Path:
    if not (MANUAL_DIR / "routine-vacuuming.html").is_file():
        pytest.skip("PostgreSQL manual (postgresql-doc-15) not installed")
    return MANUAL_DIR


@pytest.fixture(scope="session")
def token_counter():
    if not TOKENIZER_JSON.is_file():
        pytest.skip("MiniLM tokenizer.json not installed")
    from pgcite_udfs.chunking import load_token_counter

    return load_token_counter(str(TOKENIZER_JSON))
