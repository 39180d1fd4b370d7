"""The embedding model's weights on transparent huge pages in a backend (setting embedding_huge_pages,
pgcite_udfs/hugepages.py): on by default, off with the setting 0, the same vectors either way, and no tenant
role can change it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import connect, fails, tenant_reader
from pgcite_udfs import hugepages

QUESTION = "How do I prevent transaction ID wraparound failures?"


def anon_huge_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except PermissionError:
        pytest.skip("this test runs as another OS user than the server and cannot read its memory map")
    raise AssertionError("no AnonHugePages line")


def kernel_collapses() -> bool:
    major, minor = (int("".join(c for c in x if c.isdigit()) or 0) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 1)


@pytest.fixture(scope="module")
def reader(pg, db):
    yield from tenant_reader(pg, db, "tiny", "hp_reader")


def embedded(pg, db, role) -> tuple[int, str, str, dict]:
    """A new connection of role: its backend's AnonHugePages (kB) after its first embedding, that vector, the
    status of an ask and rag.python_info()."""
    with connect(pg, db, role) as c:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        info = c.execute("SELECT rag.python_info()").fetchone()[0]
        assert info["model_loaded"] is False and info["model_huge_pages_mb"] is None
        vec = c.execute("SELECT rag.embed(%s)::text", (QUESTION,)).fetchone()[0]
        status = c.execute("SELECT status FROM rag.ask(%s, 'tiny', 5)", (QUESTION,)).fetchone()[0]
        # python_info waits for the collapse, which runs on a thread of its own after the model loads
        info = c.execute("SELECT rag.python_info()").fetchone()[0]
        return anon_huge_kb(pid), vec, status, info


def test_the_models_weights_are_on_huge_pages_unless_the_setting_is_0(pg, db, reader):
    if hugepages.policy() not in ("always", "madvise") or not kernel_collapses():
        pytest.skip(f"transparent huge pages {hugepages.policy()}, kernel {os.uname().release}")
    on_kb, on_vec, on_status, on_info = embedded(pg, db, reader)
    with pg.admin(db) as a:
        a.execute("SELECT rag.set_config('embedding_huge_pages', '0')")
    try:
        off_kb, off_vec, off_status, off_info = embedded(pg, db, reader)
    finally:
        with pg.admin(db) as a:
            a.execute("SELECT rag.set_config('embedding_huge_pages', NULL)")
    assert on_kb >= 64 * 1024, f"only {on_kb} kB of the backend on huge pages"
    assert on_info["embedding_backend"] == off_info["embedding_backend"] == "onnx"
    assert on_info["model_huge_pages_mb"] >= 64 and off_info["model_huge_pages_mb"] == 0
    if hugepages.policy() == "madvise":  # with "always" the kernel may use them for any memory
        assert off_kb == 0
    assert on_vec == off_vec and on_status == off_status


def test_no_tenant_role_chooses_it(pg, db, reader):
    with connect(pg, db, reader) as c:
        assert fails(c, "SELECT rag.set_config('embedding_huge_pages', '0')") == "42501"
    with connect(pg, db, reader) as c:
        c.execute("SET pgcite.embedding_huge_pages = '0'")
        # a session's own value is refused, not silently ignored, before the model loads
        assert fails(c, "SELECT rag.embed(%s)", (QUESTION,)) == "42501"
    with pg.admin(db) as a:
        row = a.execute("SELECT value FROM rag.settings WHERE name = 'embedding_huge_pages'").fetchone()
        assert row[0] == "1"


def test_backends_that_exit_while_the_collapse_runs_leave_the_server_up(pg, db, reader):
    """The collapse runs on a thread of the backend for its first few embeddings: backends that load the model
    and exit at once (closed, or terminated) end cleanly, and the server goes on."""
    with pg.admin(db) as watcher:
        data = Path(watcher.execute("SELECT current_setting('data_directory')").fetchone()[0])
        log = data.parent / "postgresql.log"
        start = log.stat().st_size if log.is_file() else 0
        for i in range(8):
            c = connect(pg, db, reader)
            c.execute("SELECT rag.embed(%s)", (QUESTION,))
            if i % 2:
                c.close()
            else:
                pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
                watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
                c.close()
        assert watcher.execute("SELECT 1").fetchone() == (1,)
        with connect(pg, db, reader) as c:
            assert c.execute("SELECT rag.embed(%s)::text", (QUESTION,)).fetchone()[0].startswith("[")
    if log.is_file():
        tail = log.read_bytes()[start:].decode("utf-8", "replace")
        for bad in ("terminated by signal", "terminating connection because of crash", "onnxruntime"):
            assert bad not in tail
