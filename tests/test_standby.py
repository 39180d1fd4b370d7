"""A real hot standby: rag.ask answers there and says it could not log."""

from __future__ import annotations

import os
import pwd
import shutil
import time
from pathlib import Path

import psycopg
import pytest

from pgcite.cluster import _run, free_port, pg_bindir

WRAP_Q = "How do I prevent transaction ID wraparound failures?"


@pytest.fixture
def standby(pg, db):
    if os.environ.get("PGCITE_TEST_DSN"):
        pytest.skip("needs the private test cluster (PGCITE_TEST_DSN points at another server)")
    primary = psycopg.conninfo.conninfo_to_dict(pg.dsn(db))
    base = Path("/var/tmp") / f"pgcite-standby-{os.getpid()}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
    data, port = base / "data", free_port()
    _run(
        [
            str(pg_bindir() / "pg_basebackup"),
            "-h",
            str(primary["host"]),
            "-p",
            str(primary["port"]),
            "-U",
            "postgres",
            "-D",
            str(data),
            "-R",
            "-X",
            "stream",
            "--no-sync",
            "--checkpoint=fast",
        ]
    )
    opts = f"-p {port} -c unix_socket_directories={base} -c hot_standby=on"
    _run([str(pg_bindir() / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-o", opts, "-w", "start"])
    try:
        dsn = psycopg.conninfo.make_conninfo(pg.dsn(db), port=port)
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(dsn, autocommit=True) as c:
                    assert c.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        yield dsn
    finally:
        _run([str(pg_bindir() / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_ask_on_a_hot_standby_answers_without_logging(standby, pg, db):
    with psycopg.connect(standby, autocommit=True) as c:
        ask_id, status, citations, evidence = c.execute(
            "SELECT ask_id, status, citations, evidence FROM rag.ask(%s, 'tiny')", (WRAP_Q,)
        ).fetchone()
        assert status == "answered" and citations[0]["anchor"] == "VACUUM-FOR-WRAPAROUND"
        assert ask_id is None and evidence["logged"] is False and evidence["log_skipped"] == "read_only"
    with psycopg.connect(pg.dsn(db), autocommit=True) as p:
        primary = p.execute(
            "SELECT evidence ->> 'fingerprint' FROM rag.ask(%s, 'tiny')", (WRAP_Q,)
        ).fetchone()
    assert primary[0] == evidence["fingerprint"]  # same corpus, same answer on both servers
