"""The docker/ image, built and run through testcontainers where a Docker engine is reachable."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def docker_engine_reason() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:  # no engine: the CLI alone is not enough
        return f"no Docker engine reachable ({type(e).__name__}); the image is checked where one exists"
    return None


@pytest.mark.docker
def test_image_answers_from_a_container():
    reason = docker_engine_reason()
    if reason:
        pytest.skip(reason)
    import psycopg
    from testcontainers.core.image import DockerImage
    from testcontainers.postgres import PostgresContainer

    with DockerImage(path=str(ROOT), dockerfile_path="docker/Dockerfile", tag="pgcite:test") as image:
        with PostgresContainer(str(image), dbname="pgcite", driver=None) as pg:
            with psycopg.connect(pg.get_connection_url(), autocommit=True) as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS pgcite_python CASCADE")
                c.execute("SELECT rag.create_tenant('d')")
                body = (
                    "# Wraparound\n\nVACUUM freezes old rows to prevent transaction ID wraparound failures."
                )
                c.execute("SELECT * FROM rag.ingest('d', 'a.md', %s)", (body,))
                row = c.execute("SELECT status FROM rag.ask('How is wraparound prevented?', 'd')").fetchone()
                assert row[0] in ("answered", "abstained")
                assert c.execute("SELECT vector_dims(rag.embed('x'))").fetchone()[0] == 384


def test_dockerfile_installs_what_the_extension_needs():
    """Read-only check of the Dockerfile where it cannot be built: the same packages and files setup uses."""
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "FROM pgvector/pgvector:pg17" in text
    for needed in (
        "postgresql-plpython3-17",
        "python3-torch",
        "--system-site-packages",
        "requirements-db.txt",
        "python_udfs",
    ):
        assert needed in text, needed
    for path in ("extension", "sql", "migrations", "python_udfs", "requirements-db.txt"):
        assert (ROOT / path).exists()
