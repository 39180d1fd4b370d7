"""Test fixtures: a real private PostgreSQL cluster with the real extensions and the real model.

- `pg`: the cluster for the whole session (PGCITE_TEST_DSN points at an existing server instead).
- `db`: a session database with pgcite and pgcite_python installed and the tiny manual corpus ingested
  into tenant `tiny` (routine-vacuuming.html, indexes-types.html).
- `conn`: a connection to `db` inside a transaction that is rolled back after the test. The connection lives
  for the whole session, so the embedding model is loaded once.
- `fresh_db`: a new empty database (for install tests), dropped afterwards.
- `managed_db`: a database set up like a managed cloud's (Amazon RDS, Cloud SQL, Azure, ...): owned by a LOGIN
  role that is not a superuser but has CREATEROLE (like RDS's admin user), with vector, pg_trgm and
  fuzzystrmatch created by the superuser, and no PL/Python (plpython3u is untrusted: the owner cannot create
  it). Nothing of pgcite is installed: run `pgcite install` (or CREATE EXTENSION pgcite) as the owner.
  Yields a `Managed`: `.dsn` connects as the owner, `.admin()` as the superuser, `.name`, `.owner`.

The cluster this starts has PGCITE_TEST_API_KEY in its environment (a generator's API key lives in the
server's environment, never in the database: tests/test_generation.py). With PGCITE_TEST_DSN, start that
server with the same PGCITE_TEST_API_KEY as the tests to run the API key checks (they skip otherwise).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from pgcite.cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]
# The PostgreSQL manual shipped by Debian (postgresql-doc-15 on Debian 12, -17 on Debian 13).
MANUAL = next(iter(sorted(Path("/usr/share/doc").glob("postgresql-doc-*/html"))), Path("/nonexistent"))
TINY_FILES = ["routine-vacuuming.html", "indexes-types.html"]


class PG:
    def __init__(self, dsn_for):
        self.dsn_for = dsn_for

    def dsn(self, dbname: str) -> str:
        return self.dsn_for(dbname)

    def admin(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.dsn(dbname), autocommit=True)


@pytest.fixture(scope="session")
def pg(tmp_path_factory) -> Iterator[PG]:
    dsn = os.environ.get("PGCITE_TEST_DSN")
    if dsn:
        base = psycopg.conninfo.conninfo_to_dict(dsn)

        def dsn_for(dbname: str) -> str:
            return psycopg.conninfo.make_conninfo(**{**base, "dbname": dbname})

        yield PG(dsn_for)
        return
    home = Path("/var/tmp") / f"pgcite-test-{os.getpid()}"
    os.environ.setdefault(
        "PGCITE_TEST_API_KEY", f"sk-pgcite-test-{uuid.uuid4().hex}"
    )  # inherited by the server
    cluster = Cluster(home)
    cluster.init()
    cluster.start()
    try:
        yield PG(cluster.dsn)
    finally:
        cluster.destroy()


def use_db_venv(conn) -> None:
    """After CREATE EXTENSION pgcite_python: python_path set to PGCITE_DB_VENV when that names another
    venv than the default (a DB-side venv holding this checkout's pgcite_udfs; as src/pgcite/cluster.py)."""
    venv = os.environ.get("PGCITE_DB_VENV")
    if venv and venv.rstrip("/") != "/opt/pgcite/venv":
        conn.execute("SELECT rag.set_config('python_path', %s)", (venv,))


def create_database(pg: PG, name: str, python: bool = True) -> None:
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{name}"')
    with pg.admin(name) as c:
        c.execute("CREATE EXTENSION pgcite CASCADE")
        if python:
            c.execute("CREATE EXTENSION pgcite_python CASCADE")
            use_db_venv(c)


def drop_database(pg: PG, name: str) -> None:
    with pg.admin() as a:
        a.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_database_and_roles(pg: PG, name: str, roles) -> None:
    """A module fixture's teardown: its database, then its roles (names)."""
    drop_database(pg, name)
    with pg.admin() as a:
        for role in roles:
            a.execute(f"DROP ROLE IF EXISTS {role}")


def store_items(conn, tenant: str, key: str, items: list[dict]) -> None:
    """rag.store_document of pre-chunked items ({title, content, embedding, ...}), sent as JSON."""
    conn.execute("SELECT * FROM rag.store_document(%s, %s, %s::jsonb)", (tenant, key, json.dumps(items)))


def create_icu_database(pg: PG, name: str, icu_locale: str) -> None:
    """Database `name` made afresh (template0) with ICU collation `icu_locale` as its default; skips the test
    on a server built without ICU."""
    drop_database(pg, name)
    with pg.admin() as a:
        try:
            a.execute(
                f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu'
                f" ICU_LOCALE '{icu_locale}' LOCALE 'C.UTF-8'"
            )
        except psycopg.Error as e:  # a server built without ICU
            pytest.skip(f"no ICU database collation: {e}")


@contextmanager
def updated_from(
    pg: PG,
    name: str,
    version: str = "0.8.0",
    before_update: Callable[[psycopg.Connection], None] | None = None,
) -> Iterator[psycopg.Connection]:
    """A superuser's connection to database `name`, made afresh with pgcite `version` (then before_update(c),
    e.g. storing data under that version) and updated by ALTER EXTENSION pgcite UPDATE (to 0.9.0, asserted);
    the database is dropped afterwards."""
    drop_database(pg, name)
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{name}"')
    try:
        with pg.admin(name) as c:
            c.execute(f"CREATE EXTENSION pgcite VERSION '{version}' CASCADE")
            if before_update is not None:
                before_update(c)
            c.execute("ALTER EXTENSION pgcite UPDATE")
            assert c.execute("SELECT extversion FROM pg_extension WHERE extname = 'pgcite'").fetchone() == (
                "0.9.0",
            )
            yield c
    finally:
        drop_database(pg, name)


# Two tenants for the attack tests: alpha (a reader and a writer of its own) and bravo (a writer of its own),
# an admin and a role with no pgcite right; `roles` maps reader, writer, admin, bravo, nobody to role names.
ALPHA_DOC = (
    "# Alpha handbook\n\nThe alpha team vacuums its tables every night at two.\n\n"
    "## Indexes\n\nA B-tree index handles equality and range queries on sortable data.\n"
)
BRAVO_DOC = "# Bravo secrets\n\nThe launch code of tenant bravo is pelican-orange-42.\n"


def two_tenant_database(
    pg: PG, name: str, roles: dict[str, str], settings: dict[str, str] | None = None
) -> Iterator[str]:
    """For a module fixture: `yield from two_tenant_database(pg, name, R)`; the database and roles are dropped
    after the module. settings: pgcite settings an admin sets there first (rag.set_config)."""
    drop_database(pg, name)
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{name}"')
    with pg.admin(name) as c:
        c.execute("CREATE EXTENSION pgcite_python CASCADE")
        use_db_venv(c)
        for key, value in (settings or {}).items():
            c.execute("SELECT rag.set_config(%s, %s)", (key, value))
        c.execute(f"CREATE ROLE {roles['reader']} LOGIN IN ROLE pgcite_reader")
        c.execute(f"CREATE ROLE {roles['writer']} LOGIN IN ROLE pgcite_writer")
        c.execute(f"CREATE ROLE {roles['admin']} LOGIN IN ROLE pgcite_admin")
        c.execute(f"CREATE ROLE {roles['bravo']} LOGIN IN ROLE pgcite_writer")
        c.execute(f"CREATE ROLE {roles['nobody']} LOGIN")
        for tenant in ("alpha", "bravo"):
            c.execute("SELECT rag.create_tenant(%s)", (tenant,))
        for role in ("reader", "writer"):
            c.execute("SELECT rag.grant_tenant('alpha', %s)", (roles[role],))
        c.execute("SELECT rag.grant_tenant('bravo', %s)", (roles["bravo"],))
        c.execute("SELECT * FROM rag.ingest('alpha', 'a.md', %s)", (ALPHA_DOC,))
        c.execute("SELECT * FROM rag.ingest('bravo', 'b.md', %s)", (BRAVO_DOC,))
    yield name
    drop_database_and_roles(pg, name, roles.values())


def reader_database(pg: PG, name: str, tenant: str, reader: str, doc_name: str, doc: str) -> Iterator[str]:
    """For a module fixture: `yield from reader_database(...)`: a database with one tenant holding one
    markdown document and a reader role of it; the database and the role are dropped after the module."""
    drop_database(pg, name)
    create_database(pg, name)
    with pg.admin(name) as c:
        c.execute(f"CREATE ROLE {reader} LOGIN IN ROLE pgcite_reader")
        c.execute("SELECT rag.create_tenant(%s)", (tenant,))
        c.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, reader))
        c.execute("SELECT * FROM rag.ingest(%s, %s, %s, 'markdown')", (tenant, doc_name, doc))
    try:
        yield name
    finally:
        drop_database(pg, name)
        with pg.admin() as a:
            a.execute(f"DROP ROLE IF EXISTS {reader}")


def ingest_files(conn: psycopg.Connection, tenant: str, files: list[str]) -> None:
    for name in files:
        body = (MANUAL / name).read_text(encoding="utf-8")
        conn.execute(
            "SELECT * FROM rag.ingest(%s, %s, %s, 'html', source_url => %s)",
            (tenant, name, body, f"https://www.postgresql.org/docs/15/{name}"),
        )


@pytest.fixture(scope="session")
def db(pg) -> Iterator[str]:
    name = "pgcite_test"
    drop_database(pg, name)
    create_database(pg, name)
    with pg.admin(name) as c:
        c.execute("SELECT rag.create_tenant('tiny')")
        ingest_files(c, "tiny", TINY_FILES)
    yield name
    drop_database(pg, name)


# The four chapters of the manual the dev question set is about (eval/README.md), ingested by rag.ingest into
# tenant pgdocs4 of `db` once per session (tests/test_manual.py, tests/test_client_side.py).
CHAPTERS_TENANT = "pgdocs4"


def chapter_files() -> list[str]:
    return (ROOT / "eval" / "pgdocs-corpus.txt").read_text().split()


@pytest.fixture(scope="session")
def chapters(pg, db) -> dict[str, int]:
    """rag.ingest of the four chapters into tenant pgdocs4 (format html, no title or URL): status -> count."""
    with psycopg.connect(pg.dsn(db), autocommit=True) as c:
        c.execute("SELECT rag.create_tenant(%s)", (CHAPTERS_TENANT,))
        statuses: dict[str, int] = {}
        for name in chapter_files():
            row = c.execute(
                "SELECT status FROM rag.ingest(%s, %s, %s, 'html')",
                (CHAPTERS_TENANT, name, (MANUAL / name).read_text()),
            ).fetchone()
            statuses[row[0]] = statuses.get(row[0], 0) + 1
    return statuses


@pytest.fixture(scope="session")
def _session_conn(pg, db) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg.dsn(db)) as c:
        yield c


@pytest.fixture
def conn(_session_conn) -> Iterator[psycopg.Connection]:
    c = _session_conn
    c.rollback()
    try:
        yield c
    finally:
        c.rollback()


@pytest.fixture
def fresh_db(pg) -> Iterator[str]:
    name = f"pgcite_{uuid.uuid4().hex[:10]}"
    with pg.admin() as a:
        a.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        drop_database(pg, name)


@dataclass
class Managed:
    pg: PG
    name: str  # the database
    owner: str  # its owner: LOGIN CREATEROLE, not a superuser
    password: str

    @property
    def dsn(self) -> str:
        """Connects as the owner."""
        base = psycopg.conninfo.conninfo_to_dict(self.pg.dsn(self.name))
        return psycopg.conninfo.make_conninfo(**{**base, "user": self.owner, "password": self.password})

    def dsn_as(self, role: str, password: str) -> str:
        base = psycopg.conninfo.conninfo_to_dict(self.pg.dsn(self.name))
        return psycopg.conninfo.make_conninfo(**{**base, "user": role, "password": password})

    def admin(self) -> psycopg.Connection:
        """A superuser connection to the database (what the cloud provider does for you)."""
        return self.pg.admin(self.name)


def create_managed(pg: PG, createrole: bool = True) -> Managed:
    tag = uuid.uuid4().hex[:10]
    m = Managed(pg, f"managed_{tag}", f"managed_owner_{tag}", uuid.uuid4().hex)
    with pg.admin() as a:
        attrs = "LOGIN NOSUPERUSER" + (" CREATEROLE" if createrole else "")
        a.execute(f"CREATE ROLE {m.owner} {attrs} PASSWORD '{m.password}'")
        a.execute(f"CREATE DATABASE {m.name} OWNER {m.owner}")
    with m.admin() as c:
        for ext in ("vector", "pg_trgm", "fuzzystrmatch"):
            c.execute(f"CREATE EXTENSION {ext}")
    return m


def drop_managed(m: Managed) -> None:
    drop_database(m.pg, m.name)
    with m.pg.admin() as a:
        # roles the owner created (CREATEROLE) for its users go with it
        for (role,) in a.execute(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE %s AND rolname <> %s",
            (m.owner + "%", m.owner),
        ).fetchall():
            a.execute(f'DROP ROLE "{role}"')
        a.execute(f"DROP ROLE IF EXISTS {m.owner}")


@contextmanager
def managed_from(
    pg: PG, version: str = "0.8.0", before_update: Callable[[psycopg.Connection], None] | None = None
) -> Iterator[Managed]:
    """A managed database (no extension mechanism, a non-superuser owner) given pgcite `version` by `pgcite
    install --version`, then before_update(its owner's connection), then updated by `pgcite install`; dropped
    afterwards."""
    import io

    from pgcite.cli import main

    m = create_managed(pg)
    try:
        for argv in (["--version", version], []):
            out, err = io.StringIO(), io.StringIO()
            assert main(["install", "--dsn", m.dsn, *argv], out=out, err=err) == 0, (argv, err.getvalue())
            if argv and before_update is not None:
                with m.admin() as c:
                    before_update(c)
        yield m
    finally:
        drop_managed(m)


@pytest.fixture
def managed_db(pg) -> Iterator[Managed]:
    m = create_managed(pg)
    try:
        yield m
    finally:
        drop_managed(m)


def sqlstate_of(excinfo) -> str | None:
    return getattr(excinfo.value, "sqlstate", None) or getattr(
        getattr(excinfo.value, "diag", None), "sqlstate", None
    )


# ---------------------------------------------------------------- attacks as tenant roles
def connect(pg, db, role, **kw):
    """An autocommit connection to database db as role (the attack tests' hostile roles)."""
    dsn = psycopg.conninfo.make_conninfo(pg.dsn(db), user=role)
    return psycopg.connect(dsn, autocommit=True, **kw)


def tenant_reader(pg, db: str, tenant: str, prefix: str) -> Iterator[str]:
    """A login role of pgcite_reader granted `tenant` in db, for a fixture to yield; revoked and dropped
    afterwards."""
    role = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with pg.admin(db) as a:
        a.execute(f"CREATE ROLE {role} LOGIN IN ROLE pgcite_reader")
        a.execute("SELECT rag.grant_tenant(%s, %s)", (tenant, role))
    yield role
    with pg.admin(db) as a:
        a.execute("SELECT rag.revoke_tenant(%s, %s)", (tenant, role))
        a.execute(f"DROP OWNED BY {role}")
        a.execute(f"DROP ROLE {role}")


def fails(conn, sql, params=None) -> str | None:
    """Runs sql, which must fail; returns its SQLSTATE."""
    with pytest.raises(psycopg.Error) as e:
        conn.execute(sql, params)
    if not conn.autocommit:
        conn.rollback()
    return sqlstate_of(e)


# ---------------------------------------------------------------- what a call costs, what it returns
_TCK = os.sysconf("SC_CLK_TCK")


def _backend_cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / _TCK


def _backend_hwm_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024
    return 0


def backend_cost(c: psycopg.Connection, sql: str, params=None) -> tuple[float, int, list]:
    """(CPU seconds of the backend, its peak resident MB, the rows) of one statement on connection c (skips
    where the server's backends are not on this machine)."""
    pid = c.info.backend_pid
    if not os.access(f"/proc/{pid}/stat", os.R_OK):
        pytest.skip("the server's backends are not on this machine")
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass
    c0 = _backend_cpu(pid)
    rows = c.execute(sql, params).fetchall()
    return _backend_cpu(pid) - c0, _backend_hwm_mb(pid), rows


def git_show(commit: str, path: str) -> str | None:
    """A file of this checkout's history (`git show COMMIT:PATH`), or None without git history (an exported
    tree) or where the commit is missing."""
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:{path}"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def _backend_status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def backend_peak(c: psycopg.Connection, sql: str, params=None) -> tuple[float, float, list]:
    """(MB the backend's resident memory peaked above what it held before, seconds, rows) of one statement on
    connection c (its peak reset through /proc/<pid>/clear_refs first; skips where that is not possible)."""
    pid = c.info.backend_pid
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pytest.skip("the server's backends are not this machine's to measure")
    rss0 = _backend_status_kb(pid, "VmRSS")
    t0 = time.perf_counter()
    rows = c.execute(sql, params).fetchall()
    return (_backend_status_kb(pid, "VmHWM") - rss0) / 1024, time.perf_counter() - t0, rows


def vector_values(text: str) -> list[float]:
    """A pgvector value's text ('[0.1,0.2,...]') as floats."""
    return [float(x) for x in text.strip("[]").split(",")]


def assert_quotes_verbatim(conn, a: dict) -> None:
    """Every citation of a rag.ask row is verified, its quote is the chunk's text at its offsets, and it
    stands in the answer with its marker."""
    for c in a["citations"]:
        assert c["verified"] is True
        content = conn.execute(
            "SELECT content FROM rag.chunk WHERE chunk_id = %s", (c["chunk_id"],)
        ).fetchone()[0]
        assert content[c["quote_start"] : c["quote_end"]] == c["quote"]
        assert f"{c['quote']} [{c['n']}]" in a["answer"]


def assert_verbatim(conn, a: dict) -> None:
    """An answered rag.ask row (a dict of status, answer, citations, evidence): every citation is verified,
    its quote is the chunk's text at its offsets and stands in the answer with its marker, and the answer
    passes rag.verify again unchanged."""
    assert a["status"] == "answered", a["evidence"]["gate"]
    assert_quotes_verbatim(conn, a)
    ids = [c["chunk_id"] for c in a["citations"]]
    cited = [{"n": c["n"], "chunk_id": c["chunk_id"], "quote": c["quote"]} for c in a["citations"]]
    again = conn.execute(
        "SELECT answer, citations FROM rag.verify(%s, %s, %s)", (a["answer"], json.dumps(cited), ids)
    )
    answer, citations = again.fetchone()
    assert answer == a["answer"] and [c["quote_start"] for c in citations] == [
        c["quote_start"] for c in a["citations"]
    ]


# ---------------------------------------------------------------- the full-text leg recomputed
def bm25_reference(
    conn, tenant: str, question: str, limit: int = 40, leg_query: bool = False
) -> list[tuple[int, float]]:
    """The full-text leg's ranking recomputed in Python from the tenant's live chunks' tsvectors: every chunk
    holding one of the question's lexemes (the leg's OR-ed query; with leg_query, only those the leg's own
    query, rag._fts_query, matches too: a negation, a phrase), scored by BM25 with k1 1.2 and b 0 (idf from
    the tenant's own live chunks, tf a lexeme's positions in the chunk, read by unnest), in the leg's total
    order (score descending, doc_key, chunk_index, chunk_id), the first `limit`: [(chunk_id, score)]."""
    lexemes = set(
        conn.execute(
            "SELECT tsvector_to_array(to_tsvector(t.ts_config, %s)) FROM rag.tenant AS t WHERE t.tenant = %s",
            (question, tenant),
        ).fetchone()[0]
    )
    match = "c.tsv @@ rag._fts_query(t.ts_config, %s)" if leg_query else "%s::text IS NOT NULL"
    chunks = conn.execute(
        f"SELECT c.chunk_id, c.doc_key, c.chunk_index, {match},"
        " (SELECT array_agg(u.lexeme) FROM unnest(c.tsv) AS u),"
        " (SELECT array_agg(coalesce(array_length(u.positions, 1), 1)) FROM unnest(c.tsv) AS u)"
        " FROM rag.chunk AS c JOIN rag.tenant AS t USING (tenant)"
        " WHERE c.tenant = %s AND c.retired_at IS NULL",
        (question, tenant),
    ).fetchall()
    tfs = {cid: dict(zip(lx or [], tf or [], strict=True)) for cid, _, _, _, lx, tf in chunks}
    n = len(chunks)
    df = {lex: sum(lex in tf for tf in tfs.values()) for lex in lexemes}
    idf = {lex: math.log(1 + (n - d + 0.5) / (d + 0.5)) for lex, d in df.items()}
    scored = []
    for cid, key, index, match, _, _ in chunks:
        found = [lex for lex in lexemes if lex in tfs[cid]]
        if match and found:
            s = sum(idf[lex] * 2.2 * tfs[cid][lex] / (tfs[cid][lex] + 1.2) for lex in found)
            scored.append((round(s, 6), key, index, cid))
    scored.sort(key=lambda x: (-x[0], x[1], x[2], x[3]))
    return [(cid, s) for s, _, _, cid in scored[:limit]]
