"""background.py: a question embedded on the worker thread is the ordinary embedding, bit for bit; only the
latest job's text is answered; the worker blocks every signal; a failed run hands the work back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from pgcite_udfs import embed
from pgcite_udfs.background import Background, Job

TEXTS = [
    "How do I prevent transaction ID wraparound failures?",
    "a",
    "é ü ß — Ünïcödé, 日本語のテキスト, emoji 🙂🐘",
    "word " * 600,  # truncated to max_seq_length word pieces
]


@pytest.fixture(scope="module")
def onnx_model():
    if not embed.onnx_export_current():
        pytest.skip("no current ONNX export (make setup makes it)")
    return embed.load_onnx(threads=1)


@pytest.fixture()
def bg(onnx_model):
    return Background(onnx_model)


@pytest.mark.parametrize("text", TEXTS)
def test_the_workers_vector_is_the_ordinary_embedding(bg, onnx_model, text):
    job = bg.begin(text)
    vec = bg.result(text)
    assert job.running.is_set()
    assert vec is not None and vec.dtype == np.float32 and vec.shape == (embed.DIM,)
    # the same session and the same inputs: the same numbers, not merely close ones
    assert np.array_equal(vec, embed.encode(onnx_model, [text])[0])
    assert bg.latest(text) is job


def test_only_the_latest_jobs_text_is_answered(bg, onnx_model):
    bg.begin(TEXTS[0])
    bg.begin(TEXTS[1])  # replaces the first: a job of an aborted call is never read
    assert bg.result(TEXTS[0]) is None
    assert bg.latest(TEXTS[0]) is None
    assert np.array_equal(bg.result(TEXTS[1]), embed.encode(onnx_model, [TEXTS[1]])[0])
    assert bg.result("never begun") is None
    assert bg.jobs == 2


def test_one_worker_thread_serves_every_job(bg):
    before = {t.ident for t in threading.enumerate()}
    for text in TEXTS:
        bg.begin(text)
        assert bg.result(text) is not None
    workers = [t for t in threading.enumerate() if t.name == "pgcite-embed" and t.ident not in before]
    assert len(workers) <= 1
    assert bg._thread is not None and bg._thread.is_alive() and bg._thread.daemon


def _blocked_signals(native_id: int) -> int:
    with open(f"/proc/self/task/{native_id}/status") as f:
        for line in f:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigBlk line")


def test_the_worker_blocks_every_signal_the_caller_does_not(bg):
    bg.begin(TEXTS[0])
    assert bg.result(TEXTS[0]) is not None
    import signal

    worker = _blocked_signals(bg._thread.native_id)
    caller = _blocked_signals(threading.main_thread().native_id)
    for sig in (
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGALRM,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGQUIT,
    ):
        assert worker & (1 << (sig - 1)), f"worker does not block {sig!r}"
        assert not caller & (1 << (sig - 1)), f"caller blocks {sig!r}"


def test_a_failed_run_is_no_result(bg, onnx_model):
    """A run that raises (here: inputs of the wrong type) leaves the text to the caller, who embeds it itself
    and so raises the error where it can be reported."""
    feed = dict(onnx_model.batches([TEXTS[0]])[0][1])
    feed["input_ids"] = feed["input_ids"].astype(np.float32)
    job = Job(TEXTS[0], [([0], feed)])
    bg._latest = job
    bg._run(job)
    assert job.done.is_set() and job.error is not None
    assert bg.result(TEXTS[0]) is None and bg.latest(TEXTS[0]) is None
    # the worker goes on serving later jobs
    bg.begin(TEXTS[1])
    assert bg.result(TEXTS[1]) is not None


def test_batches_and_run_are_what_encode_does(onnx_model):
    texts = ["short", "a somewhat longer text about vacuum and autovacuum", "word " * 600, ""]
    out = np.zeros((len(texts), embed.DIM), dtype=np.float32)
    batches = onnx_model.batches(texts, batch_size=2)
    assert sorted(i for idx, _ in batches for i in idx) == list(range(len(texts)))
    for idx, feed in batches:
        out[idx] = onnx_model.run(feed)
    assert np.array_equal(out, onnx_model.encode(texts, batch_size=2))
    assert onnx_model.batches([]) == []


def test_a_new_job_terminates_the_run_of_the_one_it_replaces(bg, onnx_model):
    """A typo question begins its corrected form while the first form may still run: that run is terminated
    (no one reads it) and the new job's vector is the ordinary one."""
    first = bg.begin(TEXTS[3])  # 256 word pieces: the longest run
    second = bg.begin(TEXTS[0])
    assert first.run_options.terminate is True
    assert first.done.wait(30)
    assert bg.result(TEXTS[3]) is None
    assert np.array_equal(bg.result(TEXTS[0]), embed.encode(onnx_model, [TEXTS[0]])[0])
    assert second.error is None


EXIT_IN_FLIGHT = r"""
import sys
from pgcite_udfs import embed
from pgcite_udfs.background import Background
bg = Background(embed.load_onnx(threads=1))
assert bg.exit_handler
for _ in range(3):
    bg.begin(("vacuum freezes old transaction ids " * 60) + str(_))
assert bg.in_flight()
sys.exit(int(sys.argv[1]))  # with a run in flight
"""


@pytest.mark.parametrize("status", [0, 1, 7])
def test_a_process_that_exits_with_a_run_in_flight_exits_cleanly_with_its_status(onnx_model, status):
    """exit() with the worker inside onnxruntime: the process ends with the status it was given and nothing
    of onnxruntime's teardown under the running worker (in a backend it logged 'GetElementType is not
    implemented' for about a third of such exits)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", EXIT_IN_FLIGHT, str(status)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == status, out.stderr
        assert "onnxruntime" not in out.stderr and "Error" not in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("load", "cpus", "helps"),
    [(0.0, 2, True), (1.9, 2, True), (2.0, 2, False), (7.5, 2, False), (7.5, 16, True), (0.5, 1, True)],
)
def test_the_worker_is_used_only_while_a_core_is_to_spare(load, cpus, helps):
    from pgcite_udfs.background import worker_helps

    assert worker_helps(load, cpus) is helps


@pytest.mark.parametrize(
    ("load", "pressure", "helps"),
    [(7.5, 0.0, True), (7.5, 19.9, True), (0.1, 20.0, False), (0.1, 96.3, False), (0.1, None, True)],
)
def test_the_cpu_pressure_decides_where_the_kernel_has_it(load, pressure, helps):
    """A burst that ended seconds ago: the 1-minute load average still says busy, the pressure does not."""
    from pgcite_udfs.background import worker_helps

    assert worker_helps(load, 2, pressure) is helps


def test_the_cpu_pressure_is_read_from_its_some_line(tmp_path):
    from pgcite_udfs.background import cpu_pressure_avg10

    f = tmp_path / "cpu"
    f.write_text(
        "some avg10=56.41 avg60=74.73 avg300=45.59 total=3030607349\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert cpu_pressure_avg10(str(f)) == 56.41
    f.write_text("garbage\n")
    assert cpu_pressure_avg10(str(f)) is None
    assert cpu_pressure_avg10(str(tmp_path / "missing")) is None
    if os.path.exists("/proc/pressure/cpu"):
        assert 0.0 <= cpu_pressure_avg10() <= 100.0
