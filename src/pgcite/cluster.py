"""A private PostgreSQL cluster for pgcite: `pgcite up`, the demo and the test suite use it.

initdb and pg_ctl refuse to run as root, so as root every server command runs as the `postgres` OS user
(runuser), in a directory that user owns, with the socket in that directory. If the postgres user cannot
reach the requested directory (CI clones into folders under /root, for instance), the cluster lives in
/var/tmp/pgcite-<hash> and the requested directory records where.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DB_VENV = "/opt/pgcite/venv"
DB_NAME = "pgcite"


class ClusterError(RuntimeError):
    """A cluster could not be created, started or reached."""


def pg_bindir() -> Path:
    """bin directory of the PostgreSQL major chosen by scripts/pg_config.sh (PG_CONFIG wins)."""
    pg_config = os.environ.get("PG_CONFIG")
    if not pg_config:
        here = Path(__file__).resolve()
        for parent in here.parents:
            script = parent / "scripts" / "pg_config.sh"
            if script.exists():
                pg_config = subprocess.run(
                    [str(script)], capture_output=True, text=True, check=True
                ).stdout.strip()
                break
    if not pg_config:
        candidates = sorted(
            Path("/usr/lib/postgresql").glob("*/bin/pg_config"), key=lambda p: int(p.parts[-3])
        )
        if not candidates:
            raise ClusterError("no PostgreSQL server found; run `make setup`")
        pg_config = str(candidates[-1])
    out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    return Path(out)


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_root() -> bool:
    return os.geteuid() == 0


def _run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    if _as_root():
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and res.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


def _postgres_can_reach(path: Path) -> bool:
    if not _as_root():
        return True
    probe = path if path.exists() else path.parent
    return subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(probe)]).returncode == 0


@dataclass
class Cluster:
    home: Path  # where the user asked for it (./.pgcite or PGCITE_HOME)

    @property
    def base(self) -> Path:
        """Where the cluster really lives (home, or /var/tmp/pgcite-<hash> if postgres cannot reach home)."""
        pointer = self.home / "location.json"
        if pointer.exists():
            return Path(json.loads(pointer.read_text())["base"])
        return self.home

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def sockdir(self) -> Path:
        return self.base / "run"

    @property
    def logfile(self) -> Path:
        return self.base / "postgresql.log"

    def port(self) -> int:
        conf = self.datadir / "postgresql.pgcite.conf"
        for line in conf.read_text().splitlines():
            if line.startswith("port"):
                return int(line.split("=")[1].strip())
        raise ClusterError(f"no port in {conf}")

    def dsn(self, dbname: str = DB_NAME) -> str:
        return f"host=127.0.0.1 port={self.port()} dbname={dbname} user=postgres"

    def socket_dsn(self, dbname: str = DB_NAME) -> str:
        return f"host={self.sockdir} port={self.port()} dbname={dbname} user=postgres"

    def exists(self) -> bool:
        return (self.datadir / "PG_VERSION").exists()

    def running(self) -> bool:
        if not self.exists():
            return False
        return (
            _run([str(pg_bindir() / "pg_ctl"), "-D", str(self.datadir), "status"], check=False).returncode
            == 0
        )

    def init(self, port: int | None = None) -> None:
        """initdb (first time only) with pgcite's settings in postgresql.pgcite.conf."""
        if self.exists():
            return
        self.home.mkdir(parents=True, exist_ok=True)
        if not _postgres_can_reach(self.home):
            digest = hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:12]
            base = Path("/var/tmp") / f"pgcite-{digest}"
            (self.home / "location.json").write_text(json.dumps({"base": str(base)}))
        base = self.base
        base.mkdir(parents=True, exist_ok=True)
        self.sockdir.mkdir(exist_ok=True)
        if _as_root():
            pw = pwd.getpwnam("postgres")
            for p in (base, self.sockdir):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        _run(
            [
                str(pg_bindir() / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        )
        settings = {
            "port": str(port or free_port()),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.sockdir}'",
            "max_connections": "40",
            "shared_buffers": "256MB",
            "maintenance_work_mem": "256MB",
            "logging_collector": "off",
        }
        conf = "".join(f"{k} = {v}\n" for k, v in settings.items())
        _run(
            [
                "sh",
                "-c",
                f"cat > '{self.datadir}/postgresql.pgcite.conf' <<'EOF'\n{conf}EOF\n"
                f"echo \"include = 'postgresql.pgcite.conf'\" >> '{self.datadir}/postgresql.conf'",
            ]
        )

    def start(self, timeout: float = 60) -> None:
        if self.running():
            return
        _run(
            [
                str(pg_bindir() / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.logfile),
                "-w",
                "-t",
                str(int(timeout)),
                "start",
            ]
        )

    def stop(self) -> None:
        if self.running():
            _run([str(pg_bindir() / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"])

    def ensure_database(self, dbname: str = DB_NAME, python: bool = True) -> None:
        """Creates the database (if missing) with the extensions installed and updated to the installed
        version (the private cluster is pgcite's own: `pgcite up` after an upgrade updates it)."""
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{dbname}"')
        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch SCHEMA public")  # required since 0.2.0
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgcite CASCADE")
            conn.execute("ALTER EXTENSION pgcite UPDATE")
            if python:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pgcite_python CASCADE")
                conn.execute("ALTER EXTENSION pgcite_python UPDATE")
                # settings live in the database (rag.config), never in run-time parameters
                venv = os.environ.get("PGCITE_DB_VENV", DEFAULT_DB_VENV)
                if venv != DEFAULT_DB_VENV:
                    conn.execute("SELECT rag.set_config('python_path', %s)", (venv,))

    def destroy(self) -> None:
        self.stop()
        base = self.base
        shutil.rmtree(base, ignore_errors=True)
        if base != self.home:
            shutil.rmtree(self.home, ignore_errors=True)


def default_home() -> Path:
    return Path(os.environ.get("PGCITE_HOME", ".pgcite")).resolve()


def wait_ready(dsn: str, timeout: float = 30) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
