# pgcite — top-level Makefile.
#   make setup    install everything (Debian packages, pgvector, both venvs, the extensions); idempotent
#   make demo     setup + a private cluster + ingest the PostgreSQL manual + ask a question
#   make test     setup + lint + all tests against a real PostgreSQL
#   make lint     sqlfluff on sql/ and migrations/, ruff on Python
#   make bench    benchmarks that print figures (docs/BENCHMARKS.md); SIZE=1000000 DURATION=60 for the scale one
SHELL := /bin/bash
PG_CONFIG ?= $(shell scripts/pg_config.sh)
DB_VENV ?= /opt/pgcite/venv
VENV := .venv
PYTEST_ARGS ?=
SIZE ?= 100000
DURATION ?= 60

.PHONY: setup build install lint test test-sql test-udfs demo bench clean

setup:
	@bash scripts/setup.sh

build:
	@$(MAKE) -s -C extension PG_CONFIG=$(PG_CONFIG) all

# PGXS install of the SQL scripts; the Python that runs inside PostgreSQL goes into the DB-side venv.
install: build
	@$(MAKE) -s -C extension PG_CONFIG=$(PG_CONFIG) install
	@# a stale build/ or an old install would leave modules that no longer exist (chunking.py, answer.py)
	@rm -rf python_udfs/build
	@$(DB_VENV)/bin/python -m pip uninstall -y -q pgcite-udfs >/dev/null 2>&1 || true
	@$(DB_VENV)/bin/python -m pip install -q --no-deps --no-build-isolation ./python_udfs >/dev/null
	@chmod -R a+rX $(DB_VENV)

lint:
	@$(VENV)/bin/sqlfluff lint --dialect postgres sql migrations
	@$(VENV)/bin/ruff check src tests python_udfs bench eval
	@$(VENV)/bin/ruff format --check src tests python_udfs bench eval

test: setup lint test-udfs test-sql

test-udfs:
	@$(DB_VENV)/bin/python -m pytest -q python_udfs/tests $(PYTEST_ARGS)

test-sql:
	@$(VENV)/bin/python -m pytest tests $(PYTEST_ARGS)

demo: setup
	@bash scripts/demo.sh

bench: setup
	@SIZE=$(SIZE) DURATION=$(DURATION) bash scripts/bench.sh

clean:
	@$(MAKE) -s -C extension PG_CONFIG=$(PG_CONFIG) clean
