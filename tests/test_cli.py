"""The `pgcite` command line: file walking (no database), then every command against the real database."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import MANUAL

from pgcite.cli import build_parser, main
from pgcite.cluster import Cluster
from pgcite.ingest_files import detect_format, iter_sources, read_document
from pgcite.printing import print_table

ROOT = Path(__file__).resolve().parents[1]
TINY_FILES = ["routine-vacuuming.html", "indexes-types.html"]
WRAP_Q = "How do I prevent transaction ID wraparound failures?"
OUT_Q = "What is the capital of Australia?"

HTML = """<html><head><title>Night jobs</title></head><body>
<div class="sect1" id="NIGHT-JOBS"><h2>Night jobs</h2>
<p>The night team vacuums the orders table at two o'clock every morning.</p></div>
</body></html>"""
MD = "# Backups\n\nBackups of the orders database run at four o'clock with pg_basebackup.\n"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def dsn(pg, db):
    return pg.dsn(db)


@pytest.fixture
def docs_dir(tmp_path):
    d = tmp_path / "docs"
    (d / "ops").mkdir(parents=True)
    (d / "ops" / "night.html").write_text(HTML)
    (d / "backups.md").write_text(MD)
    return d


# ---------------------------------------------------------------------- no database
def test_detect_format():
    assert [detect_format(p) for p in ("a.html", "b.HTM", "c.md", "d.markdown", "e.txt", "f.rst", "g")] == [
        "html",
        "html",
        "markdown",
        "markdown",
        "text",
        "text",
        "text",
    ]
    assert detect_format("a.html", "text") == "text"
    with pytest.raises(ValueError):
        detect_format("a.html", "pdf")


def test_doc_keys_are_relative_to_the_given_root(docs_dir, monkeypatch):
    keys = [s.doc_key for s in iter_sources([docs_dir])]
    assert keys == ["backups.md", "ops/night.html"]  # sorted walk
    assert [s.doc_key for s in iter_sources([docs_dir / "ops" / "night.html"])] == ["night.html"]
    monkeypatch.chdir(docs_dir.parent)
    assert [s.doc_key for s in iter_sources(["docs/**/*.html"])] == ["ops/night.html"]
    assert [s.doc_key for s in iter_sources(["docs/*"])] == ["backups.md", "ops/night.html"]
    assert [s.doc_key for s in iter_sources([docs_dir], root=docs_dir.parent)] == [
        "docs/backups.md",
        "docs/ops/night.html",
    ]
    # a file named twice is ingested once; a missing path is yielded to be reported
    assert len(list(iter_sources([docs_dir, docs_dir / "backups.md"]))) == 2
    missing = list(iter_sources([docs_dir / "nope.md"]))
    assert [m.doc_key for m in missing] == ["nope.md"] and not missing[0].path.exists()


def test_hidden_files_are_skipped(docs_dir):
    (docs_dir / ".git").mkdir()
    (docs_dir / ".git" / "config").write_text("x")
    (docs_dir / ".DS_Store").write_text("x")
    assert [s.doc_key for s in iter_sources([docs_dir])] == ["backups.md", "ops/night.html"]


def test_directory_walk_takes_documents_not_stylesheets_or_images(docs_dir):
    (docs_dir / "stylesheet.css").write_text("body {}")
    (docs_dir / "gin.svg").write_text("<svg/>")
    (docs_dir / "notes.txt").write_text("plain notes")
    assert [s.doc_key for s in iter_sources([docs_dir])] == ["backups.md", "notes.txt", "ops/night.html"]
    # named explicitly, any file is taken
    assert [s.doc_key for s in iter_sources([docs_dir / "stylesheet.css"])] == ["stylesheet.css"]


def test_read_document_refuses_binary_and_non_utf8(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x89PNG\x00\x01")
    (tmp_path / "l.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "bom.md").write_bytes("\ufeff# T\n".encode())
    with pytest.raises(ValueError, match="binary"):
        read_document(tmp_path / "b.bin")
    with pytest.raises(ValueError, match="UTF-8"):
        read_document(tmp_path / "l.txt")
    assert read_document(tmp_path / "bom.md") == "# T\n"


def test_parser_accepts_dsn_before_or_after_the_command():
    p = build_parser()
    assert p.parse_args(["--dsn", "x", "ask", "q", "--tenant", "t"]).dsn == "x"
    assert p.parse_args(["ask", "q", "--tenant", "t", "--dsn", "y"]).dsn == "y"
    assert getattr(p.parse_args(["ask", "q", "--tenant", "t"]), "dsn", None) is None


def test_print_table_generic():
    out = io.StringIO()
    print_table([{"a": 1, "b": "x" * 100, "c": {"k": [1]}}, {"a": None, "b": "y", "c": 0.5}], out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["a", "b", "c"]
    assert "…" in lines[2] and '{"k":[1]}' in lines[2]
    out = io.StringIO()
    print_table([], out)
    assert out.getvalue() == "(no rows)\n"


def test_errors_without_a_database(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PGCITE_HOME", str(tmp_path / "none"))
    code, out, err = run_cli("ask", "q", "--tenant", "t")
    assert code == 2 and err.startswith("error: no database given") and "hint: " in err
    code, out, err = run_cli("eval", str(tmp_path / "missing.jsonl"), "--tenant", "t")
    assert code == 2 and "error:" in err


# ---------------------------------------------------------------------- database
def test_ingest_directory_json_summary_then_unchanged(dsn, docs_dir):
    tenant = f"cli_{uuid.uuid4().hex[:8]}"
    args = [
        "--dsn",
        dsn,
        "ingest",
        str(docs_dir),
        "--tenant",
        tenant,
        "--create-tenant",
        "--json",
        "--no-progress",
    ]
    code, out, err = run_cli(*args)
    assert code == 0, err
    s = json.loads(out)
    assert (s["documents"], s["inserted"], s["updated"], s["unchanged"], s["failed"]) == (2, 2, 0, 0, 0)
    assert s["chunks"] >= 2 and s["errors"] == []
    code, out, err = run_cli(*args)
    s = json.loads(out)
    assert (code, s["inserted"], s["unchanged"]) == (0, 0, 2)
    # the keys are the relative paths, the formats came from the extensions
    code, out, _ = run_cli("--dsn", dsn, "ask", "When are the orders vacuumed?", "--tenant", tenant, "--json")
    a = json.loads(out)
    assert code == 0, a["evidence"]["gate"]
    assert a["citations"][0]["doc_key"] == "ops/night.html"
    assert a["citations"][0]["anchor"] == "NIGHT-JOBS"


def test_ingest_reports_a_bad_file_and_goes_on(dsn, docs_dir):
    (docs_dir / "broken.txt").write_bytes(b"\x00\x01binary")
    (docs_dir / "empty.md").write_text("   \n")
    tenant = f"cli_{uuid.uuid4().hex[:8]}"
    code, out, err = run_cli(
        "--dsn",
        dsn,
        "ingest",
        str(docs_dir),
        str(docs_dir / "missing.md"),
        "--tenant",
        tenant,
        "--create-tenant",
    )
    assert code == 1
    assert "5 documents: 2 inserted, 0 updated, 0 unchanged, 0 empty, 3 failed" in out
    assert "broken.txt: binary file" in err
    assert "failed [22023]" in err and "empty.md" in err
    assert "missing.md" in err


def test_ingest_unknown_tenant_without_create(dsn, docs_dir):
    code, out, err = run_cli("--dsn", dsn, "ingest", str(docs_dir), "--tenant", "no_such_tenant", "--json")
    s = json.loads(out)
    assert code == 1 and s["failed"] == 2
    assert {e["sqlstate"] for e in s["errors"]} == {"42704"}


def test_ask_answers(dsn):
    code, out, err = run_cli("--dsn", dsn, "ask", WRAP_Q, "--tenant", "tiny")
    assert code == 0, out + err
    assert "[1] routine-vacuuming.html § " in out and "(VACUUM-FOR-WRAPAROUND)" in out
    assert "    verified" in out and "ask_id " in out


def test_ask_json(dsn):
    code, out, _ = run_cli("--dsn", dsn, "ask", WRAP_Q, "--tenant", "tiny", "--k", "5", "--json")
    a = json.loads(out)
    assert code == 0 and a["status"] == "answered"
    assert a["citations"][0]["verified"] is True and a["evidence"]["fingerprint"]


def test_abstention_exits_3(dsn):
    code, out, err = run_cli("--dsn", dsn, "ask", OUT_Q, "--tenant", "tiny")
    assert code == 3
    assert out.startswith("ABSTAINED: no_relevant_sources\n")
    assert "failed: score" in out
    code, out, _ = run_cli("--dsn", dsn, "ask", OUT_Q, "--tenant", "tiny", "--json")
    assert code == 3 and json.loads(out)["status"] == "abstained"


@pytest.mark.parametrize(
    "argv, sqlstate",
    [
        (["ask", "q", "--tenant", "no_such_tenant"], "42704"),
        (["ask", "q", "--tenant", "tiny", "--k", "0"], "22023"),
        (["ask", "x" * 4001, "--tenant", "tiny"], "54000"),
    ],
)
def test_errors_exit_2_with_sqlstate(dsn, argv, sqlstate):
    code, out, err = run_cli("--dsn", dsn, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"error [{sqlstate}]: ")


def test_hint_printed(dsn):
    _, _, err = run_cli("--dsn", dsn, "ask", "q", "--tenant", "no_such_tenant")
    assert "\nhint: Create it with rag.create_tenant(tenant)." in err


def test_dsn_from_environment(dsn, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", dsn)
    code, out, _ = run_cli("status", "--json")
    s = json.loads(out)
    assert code == 0 and s["running"] and s["extensions"]["pgcite"] and s["chunks"] > 0


def test_explain_replay_verify_log(dsn):
    code, out, _ = run_cli("--dsn", dsn, "explain", WRAP_Q, "--tenant", "tiny")
    assert code == 0 and "VACUUM-FOR-WRAPAROUND" in out
    _, out, _ = run_cli("--dsn", dsn, "ask", WRAP_Q, "--tenant", "tiny", "--json")
    ask_id = json.loads(out)["ask_id"]
    code, out, err = run_cli("--dsn", dsn, "replay", str(ask_id))
    assert code == 0 and out.startswith(f"ask {ask_id}: identical"), err
    code, out, _ = run_cli("--dsn", dsn, "verify-log", "--tenant", "tiny")
    assert code == 0 and out.startswith("log of tiny: ok")


def test_tenant_create_and_grant(dsn):
    tenant = f"cli_{uuid.uuid4().hex[:8]}"
    assert run_cli("--dsn", dsn, "tenant", "create", tenant)[:2] == (0, f"tenant {tenant}\n")
    assert run_cli("--dsn", dsn, "tenant", "grant", tenant, "pgcite_reader")[0] == 0
    code, _, err = run_cli("--dsn", dsn, "tenant", "grant", tenant, "no_such_role_xyz")
    assert code == 2 and err.startswith("error [42704]")


def test_eval_json_and_report(dsn, tmp_path):
    report = tmp_path / "report.html"
    code, out, err = run_cli(
        "--dsn",
        dsn,
        "eval",
        str(ROOT / "eval" / "tiny.jsonl"),
        "--tenant",
        "tiny",
        "--json",
        "--report",
        str(report),
    )
    assert code == 0, err
    s = json.loads(out)
    for key in (
        "hit_at_1",
        "hit_at_3",
        "mrr_at_10",
        "false_abstain",
        "false_answer",
        "answerable",
        "unanswerable",
        "quotes_verified",
        "answer_contains",
    ):
        assert key in s
    assert (s["answerable"], s["unanswerable"], s["questions"]) == (4, 2, 6)
    assert s["answer_contains_questions"] == 4  # tiny.jsonl's answerable questions carry answer_has
    assert all("answer" in r and "answer_contains" in r for r in s["per_question"])
    assert s["false_answer"] == 0 and s["quotes_verified"] == 1.0
    assert len(s["per_question"]) == 6
    html = report.read_text()
    assert "<svg" in html and "tiny-005" in html


def test_eval_unknown_tenant_stops_before_asking_and_failed_questions_exit_1(dsn, tmp_path):
    tiny = str(ROOT / "eval" / "tiny.jsonl")
    code, out, err = run_cli("--dsn", dsn, "eval", tiny, "--tenant", "no_such_tenant", "--no-progress")
    assert code == 2 and out == "" and "42704" in err
    long = tmp_path / "long.jsonl"
    lines = [
        {"id": "big", "question": "vacuum " * 700, "expect": ["X"], "kind": "answerable"},
        {"id": "ok", "question": "What is the capital of Australia?", "expect": [], "kind": "out_of_corpus"},
    ]
    long.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, err = run_cli("--dsn", dsn, "eval", str(long), "--tenant", "tiny", "--no-progress")
    assert code == 1 and "1 questions failed with an error" in err
    assert "big [answerable] expected X; got ERROR [54000]" in out


def test_eval_human_output_and_split(dsn):
    code, out, err = run_cli(
        "--dsn", dsn, "eval", str(ROOT / "eval" / "tiny.jsonl"), "--tenant", "tiny", "--split", "calibration"
    )
    assert code == 2 and "no questions in split 'calibration'" in err
    code, out, err = run_cli("--dsn", dsn, "eval", str(ROOT / "eval" / "tiny.jsonl"), "--tenant", "tiny")
    assert code == 0 and out.startswith("questions 6: 4 answerable, 2 unanswerable\n")
    assert "warning" not in err  # tiny was never calibrated


@pytest.fixture(scope="module")
def calibrated_tenant(dsn, tmp_path_factory):
    """A tenant with the tiny corpus, calibrated with the CLI on tiny.jsonl (its test split)."""
    d = tmp_path_factory.mktemp("tiny")
    for name in TINY_FILES:
        shutil.copy(MANUAL / name, d / name)
    tenant = f"cal_{uuid.uuid4().hex[:8]}"
    code, _, err = run_cli(
        "--dsn", dsn, "ingest", str(d), "--tenant", tenant, "--create-tenant", "--no-progress"
    )
    assert code == 0, err
    return tenant


def test_calibrate_then_eval_warns(dsn, calibrated_tenant):
    tiny = str(ROOT / "eval" / "tiny.jsonl")
    code, out, err = run_cli(
        "--dsn", dsn, "calibrate", tiny, "--tenant", calibrated_tenant, "--split", "test"
    )
    assert code == 0, err
    assert "warning: calibrating on split 'test'" in err
    assert out.strip() and out != "(no rows)\n"
    # the decision is printed after the table: the stored threshold and its errors
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"tenant {calibrated_tenant}: min_score = ") and "from 6 questions" in last
    code, out, err = run_cli(
        "--dsn", dsn, "calibrate", tiny, "--tenant", calibrated_tenant, "--split", "test", "--json"
    )
    assert code == 0 and isinstance(json.loads(out), list)
    assert f"tenant {calibrated_tenant}: min_score = " in err
    code, out, err = run_cli("--dsn", dsn, "eval", tiny, "--tenant", calibrated_tenant, "--split", "test")
    assert code == 0
    assert "warning: tenant " in err and "not held out" in err


def _pgcite_command() -> list[str]:
    script = Path(sys.executable).parent / "pgcite"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pgcite.cli"]


def test_up_status_down(tmp_path):
    """The private cluster end to end, through the installed entry point (slow: initdb + extensions)."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PGCITE_HOME"] = str(home)

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*_pgcite_command(), *argv], env=env, capture_output=True, text=True, timeout=300
        )

    try:
        r = cli("status")
        assert r.returncode == 1 and "running: no" in r.stdout
        r = cli("up")
        assert r.returncode == 0, r.stderr
        dsn = r.stdout.strip()
        assert "dbname=pgcite" in dsn
        r = cli("status", "--json")
        s = json.loads(r.stdout)
        assert r.returncode == 0 and s["running"] and s["dsn"] == dsn
        assert {"pgcite", "pgcite_python", "vector"} <= set(s["extensions"])
        assert (s["tenants"], s["chunks"]) == (0, 0)
        r = cli("tenant", "create", "demo")  # no --dsn: the running embedded cluster
        assert r.returncode == 0 and r.stdout == "tenant demo\n", r.stderr
        r = cli("up")  # idempotent
        assert r.returncode == 0 and r.stdout.strip() == dsn
        r = cli("down")
        assert r.returncode == 0 and r.stdout == "stopped\n"
        r = cli("status")
        assert r.returncode == 1 and "stopped" in r.stdout
    finally:
        Cluster(home).destroy()
