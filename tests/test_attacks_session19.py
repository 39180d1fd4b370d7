"""Security review of session 19: the embedding model's weights on transparent huge pages (setting
embedding_huge_pages, pgcite_udfs/hugepages.py), rag.python_info's new keys, and rag._tenant_term_weights (a
tenant's vocabulary statistics by tenant name), attacked as tenant roles.

1. rag._tenant_term_weights (and the internals around it) is pgcite_owner's only, after an install and
   after an update from 0.8.0: no tenant role reads another tenant's term weights by naming it, directly or
   through an entry point.
2. No tenant role chooses whether its backend's model goes on huge pages: rag.set_config, ALTER ROLE, a
   connection's options and set_config() are refused with 42501 when the model loads (never silently
   applied), and the refusal leaves the backend able to embed once the value is reset.
3. rag.python_info shows each role the same fixed keys and no address of the backend's memory.
4. hugepages.py advises only the process's own private anonymous memory (never shared memory, which is
   PostgreSQL's), and a failure to read /proc/self/maps or an madvise error raises nothing."""

from __future__ import annotations

import ctypes
import mmap
import re
import uuid

import psycopg
import pytest
from conftest import connect, fails, sqlstate_of, two_tenant_database, updated_from
from pgcite_udfs import hugepages

SFX = uuid.uuid4().hex[:6]
R = {k: f"s19_{k}_{SFX}" for k in ("reader", "writer", "admin", "bravo", "nobody")}
Q = "When does the alpha team vacuum its tables?"
SECRET_Q = "What is the launch code of tenant bravo pelican?"
PYTHON_INFO_KEYS = {
    "python",
    "executable",
    "site_packages",
    "model",
    "model_loaded",
    "embedding_backend",
    "model_huge_pages_mb",
    "embedded_texts",
}
OWNER_ONLY = (
    "rag._tenant_term_weights(text,text,regconfig)",
    "rag._question_term_weights(text,bigint)",
    "rag._term_weights(text,regconfig,text,double precision)",
)
GRANTEES = ("public", "pgcite_reader", "pgcite_writer", "pgcite_admin", "pg_database_owner")


@pytest.fixture(scope="module")
def sdb(pg):
    yield from two_tenant_database(pg, f"pgcite_s19sec_{SFX}", R)


def _granted(conn, signatures) -> list[tuple[str, str]]:
    """(role, function) pairs among GRANTEES (and PUBLIC) that may execute one of the functions."""
    return conn.execute(
        "SELECT r.name, f.sig FROM unnest(%s::text[]) AS r (name), unnest(%s::text[]) AS f (sig)"
        " WHERE has_function_privilege(r.name, f.sig::regprocedure, 'EXECUTE')",
        (list(GRANTEES), list(signatures)),
    ).fetchall()


# ---------------------------------------------------------------- 1. a tenant's term weights by its name
def test_no_tenant_role_reads_a_tenants_term_weights(pg, sdb):
    with pg.admin(sdb) as a:
        # what is protected: bravo's statistics name its secret's words
        weights = a.execute(
            "SELECT rag._tenant_term_weights(%s, 'bravo', 'english')", (SECRET_Q,)
        ).fetchone()[0]
        assert "pelican" in weights
        bravo_chunk = a.execute("SELECT min(chunk_id) FROM rag.chunk WHERE tenant = 'bravo'").fetchone()[0]
        assert _granted(a, OWNER_ONLY) == []
        owner = a.execute(
            "SELECT bool_and(has_function_privilege('pgcite_owner', f::regprocedure, 'EXECUTE'))"
            " FROM unnest(%s::text[]) AS f",
            (list(OWNER_ONLY),),
        ).fetchone()[0]
        assert owner is True
    calls = [
        ("SELECT rag._tenant_term_weights(%s, 'bravo', 'english')", (SECRET_Q,)),
        ("SELECT rag._tenant_term_weights(%s, 'alpha', 'english')", (Q,)),
        ("SELECT rag._tenant_term_weights(%s, 'bravo', 'simple')", (SECRET_Q,)),
        ("SELECT rag._question_term_weights(%s, %s)", (SECRET_Q, bravo_chunk)),
        ("SELECT * FROM rag._term_weights('bravo', 'english', %s, 0.75)", (SECRET_Q,)),
        ("SELECT count(*) FROM rag.tenant_lexeme", None),
    ]
    for role in ("reader", "writer", "admin", "bravo", "nobody"):
        with connect(pg, sdb, R[role]) as c:
            for sql, params in calls:
                assert fails(c, sql, params) == "42501", (role, sql)
    # through the entry points that take a tenant's name: 42501 for a tenant the role is no member of
    for role in ("reader", "writer"):
        with connect(pg, sdb, R[role]) as c:
            for sql in (
                "SELECT * FROM rag.ask(%s, 'bravo')",
                "SELECT * FROM rag.explain(%s, 'bravo')",
                "SELECT * FROM rag.retrieve(%s, 'bravo')",
            ):
                assert fails(c, sql, (SECRET_Q,)) == "42501", (role, sql)


def test_an_update_from_0_8_0_grants_the_new_internal_to_no_tenant_role(pg):
    with updated_from(pg, f"pgcite_s19upd_{SFX}") as c:
        assert _granted(c, OWNER_ONLY) == []
        row = c.execute(
            "SELECT value, source FROM rag.settings WHERE name = 'embedding_huge_pages'"
        ).fetchone()
        assert row == ("1", "default")


# ---------------------------------------------------------------- 2. huge pages chosen by a session
def _info(c) -> dict:
    return c.execute("SELECT rag.python_info()").fetchone()[0]


def test_no_tenant_role_chooses_huge_pages(pg, sdb):
    for role in ("reader", "writer", "bravo"):
        with connect(pg, sdb, R[role]) as c:
            assert fails(c, "SELECT rag.set_config('embedding_huge_pages', '0')") == "42501", role
            for caller in ("current_user", "'postgres'"):
                sql = f"SELECT rag._set_config({caller}, 'embedding_huge_pages', '0')"
                assert fails(c, sql) == "42501", (role, caller)
            # a role's own defaults: a placeholder parameter is a superuser's (PostgreSQL 15)
            sql = f"ALTER ROLE {R[role]} SET pgcite.embedding_huge_pages = '0'"
            assert fails(c, sql) == "42501", role
            assert fails(c, "INSERT INTO rag.config VALUES ('embedding_huge_pages', '0')") == "42501"
    with connect(pg, sdb, R["nobody"]) as c:
        assert fails(c, "SELECT rag.set_config('embedding_huge_pages', '0')") == "42501"
    with connect(pg, sdb, R["admin"]) as c:
        for bad in ("2", "-1", "NaN", "on", "1e400"):
            assert fails(c, "SELECT rag.set_config('embedding_huge_pages', %s)", (bad,)) == "22023", bad
    with pg.admin(sdb) as a:
        assert a.execute(
            "SELECT count(*) FROM rag.config WHERE name = 'embedding_huge_pages'"
        ).fetchone() == (0,)
        mine = a.execute(
            "SELECT count(*) FROM pg_db_role_setting AS s INNER JOIN pg_roles AS r ON r.oid = s.setrole"
            " WHERE r.rolname = ANY (%s)",
            (list(R.values()),),
        ).fetchone()
        assert mine == (0,)


def test_a_sessions_value_is_refused_when_the_model_loads_and_the_backend_recovers(pg, sdb):
    with connect(pg, sdb, R["admin"]) as c:
        clean = c.execute("SELECT rag.embed(%s)::text", (Q,)).fetchone()[0]
    with pg.admin(sdb) as a:
        asks = a.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0]
    # a connection's options (PGOPTIONS), on every path that loads the model
    with connect(pg, sdb, R["reader"], options="-c pgcite.embedding_huge_pages=0") as c:
        assert fails(c, "SELECT rag.embed(%s)", (Q,)) == "42501"
        assert fails(c, "SELECT * FROM rag.ask(%s, 'alpha')", (Q,)) == "42501"
        assert fails(c, "SELECT * FROM rag.explain(%s, 'alpha')", (Q,)) == "42501"
        assert _info(c)["model_loaded"] is False
        # the refusal left nothing half-loaded: cleared, the backend embeds as any other (RESET would restore
        # the connection's value)
        c.execute("SET pgcite.embedding_huge_pages = ''")
        assert c.execute("SELECT rag.embed(%s)::text", (Q,)).fetchone()[0] == clean
        loaded = _info(c)
        assert loaded["model_loaded"] is True
        if loaded["embedding_backend"] == "onnx":
            assert isinstance(loaded["model_huge_pages_mb"], int)
        # a value set once the model is loaded chooses nothing either: the model is not loaded again
        c.execute("SET pgcite.embedding_huge_pages = '0'")
        try:
            assert c.execute("SELECT rag.embed(%s)::text", (Q,)).fetchone()[0] == clean
        except psycopg.Error as e:
            assert e.sqlstate == "42501"
        c.execute("SET pgcite.embedding_huge_pages = ''")
        after = _info(c)
        assert after["model_huge_pages_mb"] == loaded["model_huge_pages_mb"]
        assert c.execute("SELECT status FROM rag.ask(%s, 'alpha')", (Q,)).fetchone()[0] == "answered"
    with pg.admin(sdb) as a:
        # the refused asks logged nothing; the last one logged itself
        assert a.execute("SELECT count(*) FROM rag.ask_log").fetchone()[0] == asks + 1
    # set_config() in a transaction, garbage and out-of-range values: a writer's ingest is refused and stores
    # nothing
    with connect(pg, sdb, R["writer"]) as c:
        for value in ("0", "garbage", "7", " 0 "):
            with c.transaction():
                c.execute("SELECT set_config('pgcite.embedding_huge_pages', %s, true)", (value,))
                with pytest.raises(psycopg.Error) as e:
                    c.execute(
                        "SELECT * FROM rag.ingest('alpha', 's19.md', %s)",
                        ("# Huge\n\nThe alpha team tunes huge pages on Fridays.\n",),
                    )
                assert sqlstate_of(e) == "42501", value
                assert "pgcite.embedding_huge_pages" in str(e.value), value
                raise psycopg.Rollback()
        # the same value as in force is no choice: accepted
        c.execute("SET pgcite.embedding_huge_pages = ' 1.0 '")
        assert c.execute("SELECT rag.embed(%s)::text", (Q,)).fetchone()[0] == clean
    with pg.admin(sdb) as a:
        assert a.execute("SELECT count(*) FROM rag.document_key WHERE doc_key = 's19.md'").fetchone() == (0,)
    # a role's defaults, set by a superuser (a role cannot set them itself: above)
    with pg.admin(sdb) as a:
        a.execute(f"ALTER ROLE {R['bravo']} SET pgcite.embedding_huge_pages = '0'")
    try:
        with connect(pg, sdb, R["bravo"]) as c:
            assert fails(c, "SELECT rag.embed(%s)", (Q,)) == "42501"
            assert fails(c, "SELECT * FROM rag.ask(%s, 'bravo')", (SECRET_Q,)) == "42501"
    finally:
        with pg.admin() as a:
            a.execute(f"ALTER ROLE {R['bravo']} RESET ALL")


# ---------------------------------------------------------------- 3. rag.python_info
# an x86-64 or arm64 user-space address, as /proc/self/maps or a pointer's repr writes it
ADDRESS = re.compile(r"0x[0-9a-f]{8,}|\b[0-9a-f]{12,16}\b", re.I)


def test_python_info_shows_the_same_keys_to_every_role_and_no_address(pg, sdb):
    seen = {}
    for role in ("reader", "writer", "admin", "bravo"):
        with connect(pg, sdb, R[role]) as c:
            before = _info(c)
            c.execute("SELECT rag.embed(%s)", (Q,))
            after = _info(c)
        for info in (before, after):
            assert set(info) == PYTHON_INFO_KEYS, role
            for key, value in info.items():
                assert not (isinstance(value, str) and ADDRESS.search(value)), (key, value)
                assert not (isinstance(value, int) and value >= 2**32), (key, value)
        assert after["embedding_backend"] in ("onnx", "torch")
        mb = after["model_huge_pages_mb"]
        assert mb is None or (isinstance(mb, int) and 0 <= mb < 4096)
        seen[role] = {k: after[k] for k in ("executable", "site_packages", "embedding_backend")}
    assert len({tuple(sorted(v.items())) for v in seen.values()}) == 1
    with connect(pg, sdb, R["nobody"]) as c:
        assert fails(c, "SELECT rag.python_info()") == "42501"


# ---------------------------------------------------------------- 4. what hugepages.py touches
def _address(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def test_huge_pages_never_advise_shared_memory(monkeypatch):
    """Memory that appears while the model loads but is shared (as PostgreSQL's shared buffers and dynamic
    shared memory are) or file-backed is never advised; private anonymous memory of the same size is."""
    monkeypatch.setattr(hugepages, "policy", lambda path=hugepages.THP_ENABLED: "madvise")
    advised: list[list[tuple[int, int]]] = []
    monkeypatch.setattr(hugepages, "advise", lambda ranges: advised.append(list(ranges)) or 0)
    size = 16 * hugepages.HUGE_PAGE
    with hugepages.backed_by_huge_pages() as outcome:
        shared = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        private = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
        shared.write(b"x" * size)
        private.write(b"y" * size)
    try:
        assert outcome.wait(10)
        s_lo, p_lo = _address(shared), _address(private)
        assert advised == [outcome.ranges]
        assert not any(lo < s_lo + size and hi > s_lo for lo, hi in outcome.ranges), "shared memory advised"
        assert any(lo < p_lo + size and hi > p_lo for lo, hi in outcome.ranges)
    finally:
        shared.close()
        private.close()


def test_huge_pages_raise_nothing_when_maps_or_madvise_fail(monkeypatch):
    monkeypatch.setattr(hugepages, "policy", lambda path=hugepages.THP_ENABLED: "madvise")
    calls = {"n": 0}
    real = hugepages._read_maps

    def second_read_fails() -> str:
        calls["n"] += 1
        if calls["n"] > 1:
            raise PermissionError("/proc/self/maps")
        return real()

    for reader in (second_read_fails, lambda: (_ for _ in ()).throw(OSError("no /proc"))):
        calls["n"] = 0
        monkeypatch.setattr(hugepages, "_read_maps", reader)
        with hugepages.backed_by_huge_pages() as outcome:
            block = bytearray(8 * hugepages.HUGE_PAGE)
        assert outcome.ranges == [] and outcome.collapsed == 0
        del block
    # madvise of memory the process does not have (ENOMEM) or not aligned (EINVAL): 0 bytes, no exception
    unmapped = mmap.mmap(-1, 4 * hugepages.HUGE_PAGE, flags=mmap.MAP_PRIVATE)
    lo = (_address(unmapped) + hugepages.HUGE_PAGE - 1) & ~(hugepages.HUGE_PAGE - 1)
    unmapped.close()
    assert hugepages.advise([(lo, lo + hugepages.HUGE_PAGE), (lo + 1, lo + 1 + hugepages.HUGE_PAGE)]) == 0


def test_huge_pages_leave_memory_the_process_had_before_alone():
    h = hugepages.HUGE_PAGE
    old = 0x7F0000000000
    # a region of 8 huge pages the backend had; the model's session mapped 4 more just below it, merged
    before = {old: old + 8 * h}
    after = {old - 4 * h: old + 8 * h}
    assert hugepages.grown(before, after) == [(old - 4 * h, old)]
