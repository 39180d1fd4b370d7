"""A question's embedding computed on a thread of its own while the backend goes on with what does not need
it.

rag.ask embeds its question (~6-10 ms of onnxruntime on one core) and then runs the full-text and title legs
of retrieval, which never read the vector; only the vector leg does. `Background.begin(text)` tokenizes the
text in the caller's thread and hands the transformer's run to a worker thread; `Background.result(text)`
waits for it and returns the unit vector (the same numbers as `embed.encode`: the same session, the same
inputs).

Why this works inside PostgreSQL: PL/Python's interpreter holds the GIL for as long as the backend lives, also
while the backend runs SQL between two PL/Python calls, and onnxruntime releases it only inside its run. So
`begin` waits until the worker is about to enter the run (it gives the GIL up while it waits); the worker then
computes on the other core without the GIL while the backend executes SQL, and needs the GIL again only to
hand its result over, which it gets as soon as `result` waits for it.

The worker never calls into PostgreSQL (no plpy, no SPI) and starts with every signal blocked, so PostgreSQL's
handlers (cancel, timeout, terminate, latch) keep running on the backend's own thread. One job at a time:
`begin` replaces the previous job (a job of an aborted call is never read; if it is still running, its run is
terminated), and `result` answers only for the text of the latest job; anything else is the caller's to embed
as before.

A backend that exits while a run is in flight (its ask cancelled, then the connection closed or terminated)
must not let exit() run onnxruntime's static destructors under the worker's feet (undefined behaviour: it
logged "GetElementType is not implemented" in about a third of such exits, security review of session 18). So
the first Background of a process registers libc's `_exit` with on_exit, after onnxruntime has run once in
this process (its lazily made statics have registered their destructors by then): exit() calls it first, with
the status it was given, and the process ends there without running those destructors. PostgreSQL's own exit
work (before_shmem_exit and on_proc_exit callbacks) is done before it calls exit(), and its stderr is
unbuffered, so nothing of it is skipped; a plain Python process has finalized its interpreter by then.
"""

from __future__ import annotations

import ctypes
import threading
from collections import deque

from .threads import block_signals, start_without_signals

# How long `begin` waits for the worker to start the run, and `result` for the run to end: both are bounded by
# one transformer run of at most max_seq_length word pieces, so these only guard against a worker that died.
START_TIMEOUT_S = 5.0
RESULT_TIMEOUT_S = 120.0


# CPU pressure (the share of the last 10 s in which some task waited for a CPU) under which a core is taken to
# be free: one client's asks on an idle machine keep it near 0, 8 clients on 2 cores near 100
PRESSURE_LIMIT = 20.0


def worker_helps(load_1min: float, cpus: int, pressure_avg10: float | None = None) -> bool:
    """Whether a question is worth embedding on the worker: only while the machine has a core to spare. With
    every core busy the worker cannot run beside the backend, and handing it the run costs throughput instead
    of saving time: 8 clients on 2 cores asked 4.8 % fewer questions per second with it (docs/BENCHMARKS.md,
    session 18). Read from the kernel's CPU pressure over the last 10 s where it has it (Linux 4.20 or later,
    /proc/pressure/cpu): it follows the load within seconds, where the 1-minute load average (the rule
    without it: under one runnable task per CPU) still counted a burst a minute or two after it ended."""
    if pressure_avg10 is not None:
        return pressure_avg10 < PRESSURE_LIMIT
    return load_1min < cpus


def cpu_pressure_avg10(path: str = "/proc/pressure/cpu") -> float | None:
    """The `some avg10` of the kernel's CPU pressure (percent), None without it."""
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "some":
                    for field in fields[1:]:
                        if field.startswith("avg10="):
                            return float(field[6:])
    except (OSError, ValueError):
        return None
    return None


class Job:
    """One text's embedding in the worker: `vector` (a float32 row) or `error` once `done` is set."""

    __slots__ = ("text", "batches", "running", "done", "vector", "error", "literal", "run_options")

    def __init__(self, text: str, batches, run_options=None):
        self.text = text
        self.batches = batches
        self.running = threading.Event()
        self.done = threading.Event()
        self.vector = None
        self.error: BaseException | None = None
        self.literal: str | None = None
        self.run_options = run_options

    def cancel(self) -> None:
        """Terminates the job's run if it is still going (no one will read it)."""
        if self.run_options is not None and not self.done.is_set():
            self.run_options.terminate = True


_EXIT_REGISTERED = False


def _register_exit_handler() -> bool:
    """on_exit(_exit) once per process (glibc calls it with exit()'s status): the handlers and library
    destructors registered before it (onnxruntime's among them) are skipped at exit. False where libc has no
    on_exit."""
    global _EXIT_REGISTERED
    if _EXIT_REGISTERED:
        return True
    try:
        libc = ctypes.CDLL(None)
        on_exit, exit_now = libc.on_exit, libc._exit
    except (OSError, AttributeError):
        return False
    on_exit.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    on_exit.restype = ctypes.c_int
    if on_exit(ctypes.cast(exit_now, ctypes.c_void_p), None) != 0:
        return False
    _EXIT_REGISTERED = True
    return True


class Background:
    """The worker thread of one process and its latest job. `model` has batches(texts) and run(feed) (embed.
    OnnxModel)."""

    def __init__(self, model):
        self.model = model
        self._cv = threading.Condition()
        self._queue: deque[Job] = deque()
        self._latest: Job | None = None
        self._thread: threading.Thread | None = None
        self.jobs = 0  # begun, for tests and benchmarks
        # onnxruntime runs once here, in the caller's thread, before the exit handler is registered: the
        # statics a run makes on first use then have their destructors registered before the handler
        model.run(model.batches([""])[0][1])
        self.exit_handler = _register_exit_handler()

    def in_flight(self) -> bool:
        """A job begun and not finished (its run may be inside onnxruntime)."""
        job = self._latest
        return bool(self._queue) or (job is not None and not job.done.is_set())

    def begin(self, text: str) -> Job:
        """Starts embedding `text` on the worker; returns once the worker is inside the run (or finished)."""
        job = Job(text, self.model.batches([text]), _run_options())
        with self._cv:
            if self._latest is not None:
                self._latest.cancel()
            self._latest = job
            self._queue.append(job)
            self._cv.notify()
        self._ensure_thread()
        self.jobs += 1
        # Event.wait gives the GIL up: the worker takes it, sets `running` and enters the run, which releases
        # it
        job.running.wait(START_TIMEOUT_S)
        return job

    def finished(self, text: str) -> Job | None:
        """The latest job if it is of `text`, once it has finished without error (waiting for it), else None:
        the caller embeds."""
        job = self._latest
        if job is None or job.text != text:
            return None
        if not job.done.wait(RESULT_TIMEOUT_S) or job.error is not None:
            return None
        return job

    def result(self, text: str):
        """The vector of finished(text), or None."""
        job = self.finished(text)
        return None if job is None else job.vector

    def latest(self, text: str) -> Job | None:
        """The latest job if it is of `text` and finished without error."""
        job = self._latest
        if job is None or job.text != text or not job.done.is_set() or job.error is not None:
            return None
        return job

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            # signals blocked from its first instruction on (threads.py)
            self._thread = start_without_signals(
                threading.Thread(target=self._loop, name="pgcite-embed", daemon=True)
            )

    def _loop(self) -> None:
        # PostgreSQL's signal handlers must run on the backend's thread, never on this one
        block_signals()
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                job = self._queue.popleft()
            self._run(job)

    def _run(self, job: Job) -> None:
        try:
            ((_, feed),) = job.batches  # one text: one batch
            job.running.set()
            job.vector = self.model.run(feed, job.run_options)[0]
        except BaseException as e:  # noqa: BLE001 - handed to the caller, who embeds again and raises there
            job.error = e
        finally:
            job.batches = None
            job.running.set()
            job.done.set()


def _run_options():
    import onnxruntime as ort

    return ort.RunOptions()
