"""`pgcite` command line: a private cluster, tenants, ingestion, cited answers, audit and evaluation.

Exit codes: 0 success (and an answered question); 3 an abstention (`ask`); 1 a check that did not pass
(`status` cannot reach the database, `ingest` with failed files, `replay` not identical, `verify-log` broken);
2 an error (printed as `error [SQLSTATE]: message` plus `hint:` on stderr), including every refusal of
`install` and `uninstall` (which then changed nothing), and parsing or embedding in the client without its
local extra (PC003) or with another model than the database's (55000), refused before anything is read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .calls import resolve_dsn
from .client import Client
from .errors import ConnectionFailed, PgciteError
from .evaluate import (
    QuestionResult,
    QuestionSetError,
    calibration_overlap,
    calibration_summary,
    load_questions,
    run,
    summarize,
)
from .ingest_files import FORMATS, ingest_paths
from .printing import print_answer, print_error, print_json, print_misses, print_summary, print_table

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_ERROR = 2
EXIT_ABSTAINED = 3


def _client(args: argparse.Namespace) -> Client:
    # --client-side: parse and embed in this process; else only what the server cannot (no pgcite_python)
    return Client(args.dsn, client_side=True if getattr(args, "client_side", False) else None)


def cmd_up(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .cluster import DB_NAME, Cluster, default_home

    cluster = Cluster(default_home())
    created = not cluster.exists()
    cluster.init()
    cluster.start()
    cluster.ensure_database(DB_NAME, python=not args.no_python)
    err.write(f"pgcite: cluster {'created and ' if created else ''}running at {cluster.base}\n")
    out.write(cluster.dsn(DB_NAME) + "\n")
    return EXIT_OK


def cmd_down(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .cluster import Cluster, default_home

    cluster = Cluster(default_home())
    if not cluster.exists():
        err.write(f"pgcite: no cluster at {cluster.home}\n")
        return EXIT_OK
    was_running = cluster.running()
    cluster.stop()
    if args.destroy:
        cluster.destroy()
        out.write(f"destroyed {cluster.home}\n")
    else:
        out.write(("stopped" if was_running else "not running") + "\n")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    info: dict[str, Any] = {}
    if not args.dsn and not os.environ.get("DATABASE_URL"):
        from .cluster import Cluster, default_home

        cluster = Cluster(default_home())
        running = cluster.running()
        info["cluster"] = {"home": str(cluster.home), "exists": cluster.exists(), "running": running}
        if not running:
            info["running"] = False
            if args.json:
                print_json(info, out)
            else:
                state = "stopped" if cluster.exists() else "not created"
                out.write(f"cluster: {cluster.home} ({state})\nrunning: no\n")
                err.write("hint: start it with `pgcite up`\n")
            return EXIT_CHECK_FAILED
    dsn = resolve_dsn(args.dsn)
    info["dsn"] = dsn
    try:
        with Client(dsn) as client:
            info.update(client.server_status())
    except ConnectionFailed as exc:
        info["running"] = False
        info["error"] = exc.message
        if args.json:
            print_json(info, out)
        else:
            out.write(f"dsn: {dsn}\nrunning: no ({exc.message})\n")
        return EXIT_CHECK_FAILED
    info["running"] = True
    if args.json:
        print_json(info, out)
        return EXIT_OK
    if "cluster" in info:
        out.write(f"cluster: {info['cluster']['home']}\n")
    out.write("running: yes\n")
    out.write(f"dsn: {dsn}\n")
    out.write(f"server: PostgreSQL {info['server_version']}, database {info['database']} as {info['role']}\n")
    exts = info.get("extensions") or {}
    ext_text = ", ".join(f"{k} {v}" for k, v in exts.items()) if exts else "none"
    out.write(f"extensions: {ext_text}\n")
    if info.get("tenants") is None:
        out.write("pgcite is not installed in this database (CREATE EXTENSION pgcite CASCADE)\n")
    else:
        out.write(
            f"tenants: {info['tenants']}  documents: {info['documents']}  chunks: {info['chunks']}"
            f"  asks: {info['asks']}\n"
        )
    return EXIT_OK


def cmd_install(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .install import install

    progress = (lambda m: err.write(m + "\n")) if args.verbose else None
    result = install(resolve_dsn(args.dsn), version=args.version, progress=progress)
    if result.action == "unchanged":
        out.write(f"pgcite {result.version} already installed; nothing to do\n")
    elif result.action == "installed":
        out.write(f"installed pgcite {result.version} (schema rag)\n")
    else:
        out.write(f"{result.action} pgcite {result.previous} -> {result.version}\n")
    if result.migrations:
        out.write("migrations applied: " + ", ".join(result.migrations) + "\n")
    if result.roles_created:
        out.write("roles created: " + ", ".join(result.roles_created) + "\n")
    for warning in result.warnings:
        err.write(f"warning: {warning}\n")
    return EXIT_OK


def cmd_uninstall(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .install import uninstall

    if uninstall(resolve_dsn(args.dsn), progress=lambda m: err.write(m + "\n")):
        out.write("uninstalled pgcite (schema rag dropped; roles pgcite_* kept, see docs/managed.md)\n")
    else:
        out.write("pgcite was not installed in this database\n")
    return EXIT_OK


def cmd_tenant(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _client(args) as client:
        if args.tenant_command == "create":
            name = client.create_tenant(args.tenant, args.ts_config)
            out.write(f"tenant {name}\n")
        elif args.tenant_command == "grant":
            client.grant_tenant(args.tenant, args.role)
            out.write(f"granted {args.tenant} to {args.role}\n")
        elif args.tenant_command == "revoke":
            revoked = client.revoke_tenant(args.tenant, args.role)
            out.write(f"{'revoked' if revoked else 'was not a member:'} {args.tenant} from {args.role}\n")
    return EXIT_OK


def cmd_ingest(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _client(args) as client:
        if args.create_tenant:
            client.create_tenant(args.tenant)

        def report(source, result, error) -> None:
            if error is not None and not args.json:
                sqlstate = getattr(error, "sqlstate", None)
                code = f" [{sqlstate}]" if sqlstate else ""
                message = getattr(error, "message", None) or str(error)
                err.write(f"failed{code}: {source.path}: {message}\n")

        summary = ingest_paths(
            client,
            args.tenant,
            args.paths,
            format=args.format,
            root=args.root,
            source_url_prefix=args.source_url_prefix,
            progress=False if args.no_progress else None,
            progress_file=err,
            on_result=report,
        )
    if args.json:
        print_json(summary.to_dict(with_results=args.verbose), out)
    else:
        if args.verbose:
            for r in summary.results:
                out.write(f"{r['status']:9} v{r['version']:<3} {r['chunks']:5} chunks  {r['doc_key']}\n")
        out.write(
            f"{summary.documents} documents: {summary.inserted} inserted, {summary.updated} updated, "
            f"{summary.unchanged} unchanged, {summary.empty} empty, {summary.failed} failed; "
            f"{summary.chunks} chunks, "
            f"{summary.empty_sections} empty sections\n"
        )
    if summary.documents == 0:
        err.write("pgcite: no files found\n")
        return EXIT_CHECK_FAILED
    return EXIT_CHECK_FAILED if summary.failed else EXIT_OK


def cmd_ask(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    options = json.loads(args.options) if args.options else None
    if args.generator:
        if options is not None and not isinstance(options, dict):
            raise PgciteError("--options must be a JSON object")
        options = {**(options or {}), "generator": args.generator}
    with _client(args) as client:
        answer = client.ask(args.question, args.tenant, k=args.k, options=options)
    if args.json:
        print_json(answer.to_dict(), out)
    else:
        print_answer(answer, out)
    return EXIT_OK if answer.answered else EXIT_ABSTAINED


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _client(args) as client:
        rows = client.explain(args.question, args.tenant, k=args.k)
    if args.json:
        print_json(rows, out)
    else:
        print_table(rows, out)
    return EXIT_OK


def cmd_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _client(args) as client:
        r = client.replay(args.ask_id)
    if args.json:
        print_json(r.to_dict(), out)
    else:
        out.write(f"ask {r.ask_id}: {'identical' if r.identical else 'DIFFERENT'}\n")
        out.write(f"fingerprint then: {r.fingerprint_then}\nfingerprint now:  {r.fingerprint_now}\n")
        out.write(f"chunks then: {r.chunks_then}\nchunks now:  {r.chunks_now}\n")
        if r.citations_verify is not None:
            verdict = "still verify" if r.citations_verify else "NO LONGER VERIFY"
            out.write(f"generated answer: its stored reply re-checked today, citations {verdict}\n")
    return EXIT_OK if r.identical else EXIT_CHECK_FAILED


def cmd_verify_log(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _client(args) as client:
        v = client.verify_log(args.tenant)
    if args.json:
        print_json(v.to_dict(), out)
    elif v.ok:
        pending = f", {v.unsealed} not yet sealed" if v.unsealed else ""
        out.write(f"log of {args.tenant}: ok ({v.checked} entries checked{pending})\n")
    else:
        where = f" at ask_id {v.first_bad_ask_id}" if v.first_bad_ask_id is not None else ""
        out.write(f"log of {args.tenant}: BROKEN{where}: {v.problem} ({v.checked} entries checked)\n")
    return EXIT_OK if v.ok else EXIT_CHECK_FAILED


def cmd_eval(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tqdm import tqdm

    questions = load_questions(args.questions, args.split)
    if not questions:
        raise QuestionSetError(f"{args.questions}: no questions in split {args.split!r}")
    warnings: list[str] = []
    with _client(args) as client:
        client.retrieve("", args.tenant, k=1)  # an unknown tenant (42704) or a non-member (42501) stops here
        overlap = calibration_overlap([q.id for q in questions], client.tenant_gate(args.tenant))
        if overlap:
            warnings.append(
                f"tenant {args.tenant} was calibrated on {len(overlap)} of these {len(questions)} questions "
                f"({', '.join(overlap[:5])}{', …' if len(overlap) > 5 else ''}): "
                "these numbers are not held out"
            )
        for w in warnings:
            err.write(f"warning: {w}\n")
        bar = tqdm(
            total=len(questions),
            unit="q",
            desc=f"eval {args.tenant}",
            file=err,
            disable=True if args.no_progress else None,
            dynamic_ncols=True,
        )

        def progress(r: QuestionResult) -> None:
            bar.update(1)
            bar.set_postfix(status=r.status, refresh=False)

        try:
            results = run(
                lambda text: client.ask(text, args.tenant, k=args.k),
                questions,
                signal=args.signal,
                progress=progress,
                stop_on=(ConnectionFailed,),
            )
        finally:
            bar.close()
    summary = summarize(results, args.signal)
    meta = {"tenant": args.tenant, "questions_file": str(args.questions), "split": args.split, "k": args.k}
    if args.report:
        from .report import render_html

        html = render_html(
            summary, results, title=f"pgcite eval: {Path(args.questions).name}", meta=meta, warnings=warnings
        )
        Path(args.report).write_text(html, encoding="utf-8")
        err.write(f"pgcite: report written to {args.report}\n")
    if args.json:
        print_json(
            {**summary, **meta, "warnings": warnings, "per_question": [r.to_dict() for r in results]}, out
        )
    else:
        print_summary(summary, out)
        print_misses(results, out)
    if summary["errors"]:
        failed = summary["errors"]
        err.write(f"pgcite: {failed} questions failed with an error; the totals count them as misses\n")
        return EXIT_CHECK_FAILED
    return EXIT_OK


def cmd_calibrate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    questions = load_questions(args.questions, args.split)
    if not questions:
        raise QuestionSetError(f"{args.questions}: no questions in split {args.split!r}")
    if args.split != "calibration":
        err.write(
            f"warning: calibrating on split {args.split!r}: evaluation numbers of these questions "
            "no longer count as held out\n"
        )
    with _client(args) as client:
        rows = client.calibrate(args.tenant, [q.for_calibrate() for q in questions])
        summary = calibration_summary(args.tenant, client.tenant_gate(args.tenant))
    if args.json:
        print_json(rows, out)
        err.write(summary + "\n")
    else:
        print_table(rows, out)
        out.write(summary + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help="libpq connection string or URI (default: $DATABASE_URL, else the cluster of `pgcite up`)",
    )
    parser = argparse.ArgumentParser(
        prog="pgcite",
        description="Retrieval-augmented answers with auditable citations, inside PostgreSQL.",
        parents=[common],
        epilog="Exit codes: 0 ok/answered, 1 check failed, 2 error, 3 abstained.",
    )
    parser.add_argument("--version", action="version", version=f"pgcite {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def client_side(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument(
            "--client-side",
            action="store_true",
            help=f"{what} with the database's chunker and model (the local extra; the default where the "
            "database has no pgcite_python)",
        )

    def command(name: str, func, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(func=func)
        return p

    p = command(
        "up", cmd_up, "create and start the private cluster (PGCITE_HOME or ./.pgcite), print its DSN"
    )
    p.add_argument("--no-python", action="store_true", help="install pgcite only, without pgcite_python")
    p = command("down", cmd_down, "stop the private cluster")
    p.add_argument("--destroy", action="store_true", help="also delete its data directory")
    p = command("status", cmd_status, "is the database reachable; extension versions; tenant/chunk counts")
    p.add_argument("--json", action="store_true")

    p = command(
        "install",
        cmd_install,
        "create or upgrade schema rag without the extension mechanism (managed PostgreSQL; docs/managed.md)",
    )
    p.add_argument(
        "--version",
        default=None,
        metavar="X.Y.Z",
        help="install this frozen release instead of the current version (into a database without pgcite)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="name every SQL file as it runs")
    p = command("uninstall", cmd_uninstall, "drop schema rag made by `pgcite install` and all its data")

    p = command("tenant", cmd_tenant, "create tenants and grant roles access to them")
    tsub = p.add_subparsers(dest="tenant_command", required=True, metavar="ACTION")
    t = tsub.add_parser("create", parents=[common], help="create a tenant (idempotent)")
    t.add_argument("tenant")
    t.add_argument("--ts-config", default=None, help="text search configuration (default english)")
    for action, text in (("grant", "let ROLE read the tenant"), ("revoke", "remove ROLE's membership")):
        t = tsub.add_parser(action, parents=[common], help=text)
        t.add_argument("tenant")
        t.add_argument("role")

    p = command("ingest", cmd_ingest, "ingest files, directories (recursively) and globs, one document each")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--tenant", required=True)
    p.add_argument("--format", choices=FORMATS, default="auto", help="auto: by extension (default)")
    p.add_argument(
        "--create-tenant", action="store_true", help="create the tenant first if it does not exist"
    )
    p.add_argument("--root", help="make doc_keys relative to this directory")
    p.add_argument("--source-url-prefix", metavar="URL", help="source_url = URL + doc_key")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--verbose", "-v", action="store_true", help="also list every document")
    p.add_argument("--no-progress", action="store_true")
    client_side(p, "parse, chunk and embed in this process")

    p = command("ask", cmd_ask, "answer a question with verified citations, or abstain (exit 3)")
    p.add_argument("question")
    p.add_argument("--tenant", required=True)
    p.add_argument("--k", type=int, default=5, help="passages to answer from (default 5)")
    p.add_argument("--options", metavar="JSON", help="options object passed to rag.ask")
    p.add_argument(
        "--generator",
        metavar="NAME",
        help="answer with this configured generator (rag.generators), held to the same proof (exit 3 if it "
        "abstains)",
    )
    p.add_argument("--json", action="store_true")
    client_side(p, "embed the question in this process")

    p = command(
        "explain", cmd_explain, "every retrieval candidate with its per-leg ranks and why it was dropped"
    )
    p.add_argument("question")
    p.add_argument("--tenant", required=True)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--json", action="store_true")
    client_side(p, "embed the question in this process")

    p = command("replay", cmd_replay, "re-run a logged ask and compare (exit 1 if it differs)")
    p.add_argument("ask_id", type=int, metavar="ASK_ID")
    p.add_argument("--json", action="store_true")

    p = command("verify-log", cmd_verify_log, "check the tenant's hash-chained audit log (exit 1 if broken)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--json", action="store_true")

    p = command(
        "eval",
        cmd_eval,
        "ask every question of a JSONL set and score answers and citations (exit 1 if one failed)",
    )
    p.add_argument("questions", metavar="QUESTIONS.jsonl")
    p.add_argument("--tenant", required=True)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--split", choices=("calibration", "test", "all"), default="all")
    p.add_argument("--signal", help="gate signal to report separation on (default: score)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--report", metavar="OUT.html", help="write a self-contained HTML report")
    p.add_argument("--no-progress", action="store_true")
    client_side(p, "embed the questions in this process")

    p = command("calibrate", cmd_calibrate, "set the tenant's gate thresholds from a question set")
    p.add_argument("questions", metavar="QUESTIONS.jsonl")
    p.add_argument("--tenant", required=True)
    p.add_argument("--split", choices=("calibration", "test", "all"), default="calibration")
    p.add_argument("--json", action="store_true")
    client_side(p, "embed the questions in this process")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    args.dsn = getattr(args, "dsn", None)  # --dsn may come before or after the command
    try:
        return args.func(args, out, err)
    except PgciteError as exc:
        print_error(exc, err)
    except QuestionSetError as exc:
        err.write(f"error: {exc}\n")
    except json.JSONDecodeError as exc:
        err.write(f"error: --options is not JSON: {exc}\n")
    except BrokenPipeError:  # output piped into `head` and the like
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        err.write(f"error: {exc}\n")
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except Exception as exc:
        from .cluster import ClusterError

        if not isinstance(exc, ClusterError):
            raise
        err.write(f"error: {exc}\n")
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
