"""The SQL sources of `pgcite install`: where its files are (a source tree or a built package's pgcite/sql/),
the frozen release scripts and their migrations, and the rewriting of what only works inside CREATE EXTENSION
(`extension_free`). Reads files only; pgcite.install runs them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import PgciteError


@dataclass
class Sources:
    root: Path
    migrations: list[Path]
    core: list[Path]
    version: str  # default_version of extension/pgcite.control: the version these sources make
    released: dict[str, Path] = field(default_factory=dict)


def find_sources(root: Path | None = None) -> Sources:
    """The SQL files: pgcite/sql/ of an installed package, else the source tree this module lives in."""
    here = Path(__file__).resolve().parent
    candidates = [root] if root else [here / "sql", here.parents[1]]
    for base in candidates:
        mig = base / "migrations"
        core = base / "sql" / "core" if (base / "sql" / "core").is_dir() else base / "core"
        if mig.is_dir() and core.is_dir():
            released_dir = base / "extension" / "released"
            if not released_dir.is_dir():
                released_dir = base / "released"
            released = {
                m.group(1): p
                for p in sorted(released_dir.glob("pgcite--*.sql"))
                if (m := re.fullmatch(r"pgcite--(\d+\.\d+\.\d+)\.sql", p.name))
            }
            control = base / "extension" / "pgcite.control"
            if not control.is_file():
                control = base / "pgcite.control"
            m = re.search(r"^default_version\s*=\s*'([^']+)'", control.read_text(encoding="utf-8"), re.M)
            if m is None:
                raise PgciteError(f"no default_version in {control}")
            return Sources(
                base,
                sorted(mig.glob("*.sql"), key=lambda p: p.name),
                sorted(core.glob("*.sql"), key=lambda p: p.name),
                m.group(1),
                released,
            )
    raise PgciteError(
        "pgcite's SQL files were not found (looked in " + ", ".join(str(c) for c in candidates) + ")",
        hint="Reinstall the client package (pip install pgcite) or run from a source checkout.",
    )


_ECHO = re.compile(r"^\\echo .*\\quit[ \t]*$", re.M)
_CONFIG_DUMP = re.compile(r"^SELECT pg_catalog\.pg_extension_config_dump\([^;]*\);[ \t]*$", re.M)
_STATISTIC = re.compile(r"^(\s*)(DELETE FROM pg_catalog\.pg_statistic\b[^;]*;)", re.M)


def extension_free(sql: str) -> str:
    """The SQL with the statements that only work inside CREATE EXTENSION turned into comments."""
    sql = _ECHO.sub(lambda m: "-- (pgcite install) " + m.group(0), sql)
    sql = _CONFIG_DUMP.sub(lambda m: "-- (pgcite install: not an extension) " + m.group(0), sql)
    sql = _STATISTIC.sub(lambda m: f"{m.group(1)}NULL; -- (pgcite install: superuser only) {m.group(2)}", sql)
    left = [
        line
        for line in sql.splitlines()
        if ("pg_extension_config_dump" in line or "pg_statistic" in line or line.startswith("\\"))
        and not line.lstrip().startswith("--")
        and "-- (pgcite install" not in line
    ]
    if left:  # a new kind of extension-only statement: teach this function, do not run it half-rewritten
        raise PgciteError(f"pgcite install cannot rewrite this statement for a plain schema: {left[0]!r}")
    return sql


def released_migrations(script: str) -> dict[str, str]:
    """The migration files a frozen release script was made of, with their text (extension/Makefile puts
    a line `-- ===== <path>` before each file)."""
    parts = re.split(r"^-- ===== (\S+)\n", script, flags=re.M)
    return {
        path.removeprefix("migrations/"): body.rstrip("\n").removesuffix("\n")
        for path, body in zip(parts[1::2], parts[2::2], strict=True)
        if path.startswith("migrations/")
    }


def _ident(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("-")[0])[:3])
