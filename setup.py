"""Build step of the client package: the SQL that `pgcite install` runs travels inside it (pgcite/sql/).

The repository keeps one copy of the SQL (migrations/, sql/core/, extension/released/,
extension/pgcite.control); building a wheel copies those files into the package. An editable install or a
source checkout reads them where they are (src/pgcite/install_sources.py, find_sources). The rest: pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# package subdirectory -> files of the repository
SQL_FILES = {
    "migrations": "migrations/*.sql",
    "core": "sql/core/*.sql",
    "released": "extension/released/pgcite--*.sql",
    ".": "extension/pgcite.control",
}


class BuildPyWithSql(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "pgcite" / "sql"
        for sub, pattern in SQL_FILES.items():
            files = sorted(ROOT.glob(pattern))
            if not files:
                raise SystemExit(f"setup.py: no files match {pattern} (build from a full source tree)")
            self.mkpath(str(target / sub))
            for f in files:
                self.copy_file(str(f), str(target / sub / f.name))


setup(cmdclass={"build_py": BuildPyWithSql})
