"""`pgcite install` / `pgcite uninstall`: the core schema `rag` without the extension mechanism.

For managed PostgreSQL (no custom extensions, nobody superuser). The SQL is the extension's own: the files of
migrations/ (run-once DDL) and sql/core/ (idempotent objects), in the order extension/Makefile concatenates
them, or a frozen release script of extension/released/. In a source tree they are read where they are; a
built package carries them under pgcite/sql/ (setup.py copies them at build time; the repository holds one
copy). Three statements only make sense in CREATE EXTENSION and are rewritten, nothing else
(`extension_free`): the `\\echo` guard of release scripts, `pg_extension_config_dump` (pg_dump keeps every
table of a schema that is not an extension anyway) and the `DELETE FROM pg_catalog.pg_statistic` (superuser
only; a database installed this way never had statistics on those columns: they are STATISTICS 0 from the
start).

What is installed is recorded in rag.install_migration (one row per migration file applied, with its
sha256) and rag.install_version (one row per install or upgrade, with a digest of every source it ran).
Running again applies the migrations not yet applied, then every idempotent file; with nothing new it does
nothing. Everything runs in one transaction, serialised by a transaction-scoped advisory lock and the lock of
rag.install_version. docs/managed.md is the user's guide, docs/security.md the reasoning.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql as pgsql

from .errors import NotReady, PermissionDenied, PgciteError, translate
from .install_sources import (
    Sources,
    _ident,
    _sha,
    _version_tuple,
    extension_free,
    find_sources,
    released_migrations,
)

# Run on every install and upgrade, like the extension's update scripts do (extension/Makefile
# MIGRATIONS_SINCE_PREVIOUS starts with it): it only checks prerequisites.
ALWAYS_RUN = "000-prerequisites.sql"
TRUST_CHECK = "095-trust.sql"  # sql/core: what stored expressions in rag may call (docs/security.md)
REQUIRED = {"vector": (0, 8), "pg_trgm": (1, 3), "fuzzystrmatch": (1, 1)}
# pgcite's roles as migrations/001-schema.sql and 003-privileges.sql create them (member -> granted role).
ROLES = {
    "pgcite_reader": "NOLOGIN",
    "pgcite_writer": "NOLOGIN",
    "pgcite_admin": "NOLOGIN",
    "pgcite_owner": "NOLOGIN NOINHERIT",
}
ROLE_GRANTS = [("pgcite_reader", "pgcite_writer"), ("pgcite_writer", "pgcite_admin")]
LOCK_KEY = "pgcite install"

Progress = Callable[[str], None]


class InstallRefused(PgciteError):
    """A refusal before anything changed (its sqlstate says which kind; the hint says what to do)."""


# ---------------------------------------------------------------------- state of a database
@dataclass
class State:
    role: str
    superuser: bool
    createrole: bool
    extension: str | None  # pgcite's extension version, if the extension is installed
    schema_exists: bool
    schema_owned: bool  # the role is (a member of) the owner of schema rag
    recorded: bool  # rag.install_version exists
    version: str | None
    applied: dict[str, str]  # migration -> sha256
    sources_sha: str | None
    roles: dict[str, bool]  # role -> exists
    owner_member: bool
    memberships: dict[tuple[str, str], bool]
    can_create_schema: bool
    database: str
    requirements: dict[str, str | None]


def read_state(conn: psycopg.Connection) -> State:
    q = conn.execute
    role, superuser, createrole, database, can_create = q(
        "SELECT current_user, r.rolsuper, r.rolcreaterole, current_database(),"
        " has_database_privilege(current_database(), 'CREATE')"
        " FROM pg_roles AS r WHERE r.rolname = current_user"
    ).fetchone()
    exts = dict(q("SELECT extname, extversion FROM pg_extension").fetchall())
    schema = q("SELECT pg_has_role(nspowner, 'USAGE') FROM pg_namespace WHERE nspname = 'rag'").fetchone()
    recorded = bool(q("SELECT to_regclass('rag.install_version') IS NOT NULL").fetchone()[0])
    version = sources_sha = None
    applied: dict[str, str] = {}
    if recorded:
        row = q("SELECT version, sources_sha256 FROM rag.install_version ORDER BY id DESC LIMIT 1").fetchone()
        if row:
            version, sources_sha = row
        applied = dict(q("SELECT name, body_sha256 FROM rag.install_migration").fetchall())
    roles = {
        r: bool(q("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", (r,)).fetchone()[0])
        for r in ROLES
    }
    owner_member = roles["pgcite_owner"] and bool(
        q("SELECT pg_has_role('pgcite_owner', 'MEMBER')").fetchone()[0]
    )
    memberships = {
        (granted, member): roles[granted]
        and roles[member]
        and bool(q("SELECT pg_has_role(%s, %s, 'MEMBER')", (member, granted)).fetchone()[0])
        for granted, member in ROLE_GRANTS
    }
    return State(
        role=role,
        superuser=superuser,
        createrole=createrole,
        extension=exts.get("pgcite"),
        schema_exists=schema is not None,
        schema_owned=bool(schema and schema[0]),
        recorded=recorded,
        version=version,
        applied=applied,
        sources_sha=sources_sha,
        roles=roles,
        owner_member=owner_member,
        memberships=memberships,
        can_create_schema=can_create,
        database=database,
        requirements={name: exts.get(name) for name in REQUIRED},
    )


def dba_statements(state: State) -> list[str]:
    """What a role with CREATEROLE (or a superuser) runs first when the installer may not create roles."""
    stmts = [f"CREATE ROLE {r} {attrs};" for r, attrs in ROLES.items() if not state.roles[r]]
    stmts += [f"GRANT {g} TO {m};" for (g, m), ok in state.memberships.items() if not ok]
    if not state.owner_member:
        stmts.append(f"GRANT pgcite_owner TO {_ident(state.role)};")
    return stmts


def check(state: State, target: str) -> None:
    """Refuse (InstallRefused, nothing changed) when the install cannot succeed; say what to do."""
    if state.extension is not None:
        raise InstallRefused(
            f"the extension pgcite {state.extension} is installed in database {state.database}",
            sqlstate="55000",
            hint="Upgrade it with ALTER EXTENSION pgcite UPDATE; `pgcite install` is for databases "
            "without it.",
        )
    missing = []
    for name, minimum in REQUIRED.items():
        have = state.requirements[name]
        if have is None or _version_tuple(have) < minimum:
            want = ".".join(str(x) for x in minimum)
            missing.append(f"{name} >= {want}" + (f" (found {have})" if have else " (not installed)"))
    if missing:
        raise InstallRefused(
            "pgcite needs these extensions in this database: " + ", ".join(missing),
            sqlstate="55000",
            hint="As a role allowed to (on a managed service: the admin user), run in this database: "
            "CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm; "
            "CREATE EXTENSION IF NOT EXISTS fuzzystrmatch; (ALTER EXTENSION vector UPDATE; for an old one). "
            "See docs/managed.md.",
        )
    if state.schema_exists and not state.recorded:
        raise InstallRefused(
            "schema rag exists but was not created by `pgcite install`",
            sqlstate="55000",
            hint="Rename or drop that schema (pgcite needs the name rag), or use the database it belongs to.",
        )
    if state.version and _version_tuple(state.version) > _version_tuple(target):
        raise InstallRefused(
            f"pgcite {state.version} is installed, newer than {target}",
            sqlstate="55000",
            hint="Use a pgcite client of that version or later; downgrades are not supported.",
        )
    if state.schema_exists and not (state.schema_owned or state.superuser):
        raise InstallRefused(
            f"role {state.role} does not own schema rag, so it cannot upgrade it",
            sqlstate="42501",
            hint="Run `pgcite install` as the role that installed it (the owner of schema rag).",
        )
    if not state.schema_exists and not state.can_create_schema:
        raise InstallRefused(
            f"role {state.role} may not create schemas in database {state.database}",
            sqlstate="42501",
            hint=f"GRANT CREATE ON DATABASE {_ident(state.database)} TO {_ident(state.role)}; "
            "(or install as the owner of the database)",
        )
    stmts = dba_statements(state)
    if stmts and not (state.superuser or state.createrole):
        raise InstallRefused(
            f"role {state.role} may not create or grant pgcite's roles (no CREATEROLE)",
            sqlstate="42501",
            detail="pgcite's roles are cluster-wide; pgcite_owner owns the tables and the installing role "
            "acts as it while installing.",
            hint="A role with CREATEROLE (or a superuser) runs first: " + " ".join(stmts),
        )


# ---------------------------------------------------------------------- install
_BOOKKEEPING = """
CREATE TABLE rag.install_version (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version text NOT NULL,
    sources_sha256 text NOT NULL,
    installed_by name NOT NULL DEFAULT current_user,
    installed_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE rag.install_version IS
'pgcite install: every install or upgrade of schema rag (the last row is the version in force). Not in an '
'extension install.';
CREATE TABLE rag.install_migration (
    name text PRIMARY KEY,
    body_sha256 text NOT NULL,
    applied_in_version text NOT NULL,
    applied_by name NOT NULL DEFAULT current_user,
    applied_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE rag.install_migration IS
'pgcite install: the run-once migrations (migrations/*.sql) applied to schema rag.';
"""


@dataclass
class Result:
    action: str  # installed, upgraded, refreshed, unchanged
    version: str
    previous: str | None
    migrations: list[str]
    roles_created: list[str]
    warnings: list[str] = field(default_factory=list)


def _plan(
    src: Sources, version: str | None, state: State
) -> tuple[str, list[tuple[str, str]], dict[str, str]]:
    """(version, [(label, sql)], {migration recorded as applied: its text})."""
    if version is not None and version != src.version:
        path = src.released.get(version)
        if path is None:
            known = ", ".join(sorted(src.released)) or "none"
            raise InstallRefused(
                f"no released script of pgcite {version} (released: {known}; current: {src.version})",
                sqlstate="22023",
            )
        if state.recorded:
            raise InstallRefused(
                f"pgcite {state.version} is already installed; --version installs a release into a "
                "database without pgcite",
                sqlstate="55000",
                hint="Run `pgcite install` without --version to upgrade to the current version.",
            )
        script = path.read_text(encoding="utf-8")
        # today's prerequisite checks first (an old release's own 000 lacks the later ones, e.g. the
        # installing role's default privileges), then the release as CREATE EXTENSION ran it (rag, public
        # first), then today's check of what it bound to
        prereq = next(p for p in src.migrations if p.name == ALWAYS_RUN)
        trust = next(p for p in src.core if p.name == TRUST_CHECK)
        files = [
            (f"migrations/{prereq.name}", extension_free(prereq.read_text(encoding="utf-8"))),
            (
                "SET search_path",
                "SET LOCAL search_path = rag, public; SET LOCAL standard_conforming_strings = on",
            ),
            (path.name, extension_free(script)),
            (f"sql/core/{trust.name}", trust.read_text(encoding="utf-8")),
        ]
        return version, files, released_migrations(script)
    files: list[tuple[str, str]] = []
    applied_now: dict[str, str] = {}
    for p in src.migrations:
        if p.name in state.applied and p.name != ALWAYS_RUN:
            continue
        text = p.read_text(encoding="utf-8")
        files.append((f"migrations/{p.name}", extension_free(text)))
        if p.name not in state.applied:
            applied_now[p.name] = text
    for p in src.core:
        files.append((f"sql/core/{p.name}", extension_free(p.read_text(encoding="utf-8"))))
    return src.version, files, applied_now


def _sources_digest(src: Sources, version: str) -> str | None:
    if version != src.version:
        path = src.released.get(version)
        return _sha(path.read_text(encoding="utf-8")) if path else None
    h = hashlib.sha256()
    for p in [*src.migrations, *src.core]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def install(
    dsn: str, version: str | None = None, progress: Progress | None = None, sources: Sources | None = None
) -> Result:
    """Install or upgrade schema rag in the database of `dsn` (docs/managed.md). Raises InstallRefused."""
    say = progress or (lambda _msg: None)
    src = sources or find_sources()
    try:
        with psycopg.connect(dsn) as conn:
            # a first look, to refuse before taking any lock or changing anything
            state = read_state(conn)
            target = version or src.version
            check(state, target)
            conn.rollback()
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(current_database()))",
                    (LOCK_KEY,),
                )
                if conn.execute("SELECT to_regclass('rag.install_version') IS NOT NULL").fetchone()[0]:
                    conn.execute("LOCK TABLE rag.install_version IN EXCLUSIVE MODE")
                state = read_state(conn)  # again: another installer may have finished meanwhile
                check(state, target)
                return _install_locked(conn, src, version, state, say)
    except psycopg.Error as exc:
        raise translate(exc) from exc


def _install_locked(
    conn: psycopg.Connection, src: Sources, version: str | None, state: State, say: Progress
) -> Result:
    target = version or src.version
    digest = _sources_digest(src, target)
    warnings = _kept_owner_warning(state)
    if state.recorded and state.version == target and state.sources_sha == digest:
        say(f"pgcite {target} is installed and up to date; nothing to do")
        return Result("unchanged", target, state.version, [], [], warnings)
    target, files, new_migrations = _plan(src, version, state)
    created: list[str] = []
    for role, attrs in ROLES.items():
        if not state.roles[role]:
            conn.execute(f"CREATE ROLE {role} {attrs}")
            created.append(role)
    for (granted, member), ok in state.memberships.items():
        if not ok:
            conn.execute(f"GRANT {granted} TO {member}")
    granted_owner = False
    if not conn.execute("SELECT pg_has_role('pgcite_owner', 'MEMBER')").fetchone()[0]:
        # the installing role hands tables and SECURITY DEFINER functions to pgcite_owner (ALTER ... OWNER
        # needs membership); given back at the end
        conn.execute(pgsql.SQL("GRANT pgcite_owner TO {}").format(pgsql.Identifier(state.role)))
        granted_owner = True
    if not state.schema_exists:
        conn.execute("CREATE SCHEMA rag")
        conn.execute(_BOOKKEEPING)
        say("created schema rag")
    # pgcite_owner must be allowed to own objects in the schema while they are handed over
    conn.execute("GRANT CREATE ON SCHEMA rag TO pgcite_owner")
    for label, sql in files:
        say(f"running {label}")
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            err = translate(exc)
            err.message = f"{label}: {err.message}"
            raise err from exc
    conn.execute("REVOKE CREATE ON SCHEMA rag FROM pgcite_owner")
    for name, body in new_migrations.items():
        conn.execute(
            "INSERT INTO rag.install_migration (name, body_sha256, applied_in_version) VALUES (%s, %s, %s)",
            (name, _sha(body), target),
        )
    conn.execute(
        "INSERT INTO rag.install_version (version, sources_sha256) VALUES (%s, %s)", (target, digest or "")
    )
    if granted_owner:
        conn.execute(pgsql.SQL("REVOKE pgcite_owner FROM {}").format(pgsql.Identifier(state.role)))
    if not state.recorded:
        action = "installed"
    elif state.version != target:
        action = "upgraded"
    else:
        action = "refreshed"
    return Result(action, target, state.version, list(new_migrations), created, warnings)


def _kept_owner_warning(state: State) -> list[str]:
    """A membership of pgcite_owner that the installing role had before (a DBA granted it) stays after the
    install: pgcite_owner owns pgcite's tables in every database of the cluster (docs/security.md)."""
    if not state.owner_member or state.superuser:
        return []
    return [
        f"role {state.role} is still a member of pgcite_owner, which owns pgcite's tables in every database "
        "of this cluster: it can read and rewrite their pgcite data (audit logs included) wherever it may "
        f"connect. A DBA revokes it after installing: REVOKE pgcite_owner FROM {_ident(state.role)};"
    ]


# ---------------------------------------------------------------------- uninstall
def uninstall(dsn: str, progress: Progress | None = None) -> bool:
    """Drop schema rag and everything in it (False: there was nothing to drop). Roles stay: they are
    cluster-wide and may serve other databases (docs/managed.md says how to drop them)."""
    say = progress or (lambda _msg: None)
    try:
        with psycopg.connect(dsn) as conn:
            state = read_state(conn)
            if state.extension is not None:
                raise InstallRefused(
                    f"schema rag belongs to the extension pgcite {state.extension}",
                    sqlstate="55000",
                    hint="Remove it with DROP EXTENSION pgcite_python, pgcite; (that drops every tenant's "
                    "data).",
                )
            if not state.schema_exists:
                say("pgcite is not installed in this database; nothing to do")
                return False
            if not state.recorded:
                raise InstallRefused(
                    "schema rag was not created by `pgcite install`; not dropping it",
                    sqlstate="55000",
                    hint="Drop it yourself if it is yours: DROP SCHEMA rag CASCADE;",
                )
            if not (state.schema_owned or state.superuser):
                raise InstallRefused(
                    f"role {state.role} does not own schema rag",
                    sqlstate="42501",
                    hint="Run `pgcite uninstall` as the role that installed it (the owner of schema rag).",
                )
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(current_database()))",
                    (LOCK_KEY,),
                )
                conn.execute("DROP SCHEMA rag CASCADE")
            say("dropped schema rag and everything in it; pgcite's cluster-wide roles are kept")
            return True
    except psycopg.Error as exc:
        raise translate(exc) from exc


__all__ = [
    "InstallRefused",
    "NotReady",
    "PermissionDenied",
    "Result",
    "Sources",
    "extension_free",
    "find_sources",
    "install",
    "released_migrations",
    "uninstall",
]
