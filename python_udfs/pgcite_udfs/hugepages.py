"""The embedding model's weights on transparent huge pages.

One transformer run of a question reads every weight of the six layers (about 42 MB of prepacked fp32
matrices) and little else: with 4 kB pages that is some 10,000 pages per run, more than the TLB holds, so
each run pays page walks. On 2 MB pages it is about 20. Measured on the 2-core Zen 2 machine (one intra-op
thread, the dev questions, session.run as thread CPU time): 9.7-10.2 ms p50 on 4 kB pages, 8.5-8.6 ms with
the session's memory collapsed into huge pages (docs/BENCHMARKS.md, session 19).

onnxruntime allocates those weights with malloc while the session is made, and has no option for huge pages;
glibc's own (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) is read when a process starts, which for a PostgreSQL
backend is the postmaster's environment. So `backed_by_huge_pages` notes the process's private anonymous
memory before the session is made, and afterwards asks the kernel (madvise) to back the addresses that became
private anonymous memory meanwhile with huge pages: MADV_HUGEPAGE (later faults and khugepaged) and
MADV_COLLAPSE (now, Linux 6.1 or later). Neither changes the memory's contents. Only whole 2 MB ranges of
those addresses are advised, which the session had already filled, so the resident size grows little (about
12 MB a backend, where small pages had gaps); memory the process had before, such as PostgreSQL's, is left
alone (by address: a new mapping the kernel merged with an old one counts for its new part only), and shared
memory is never touched.

The machine's policy is kept: with /sys/kernel/mm/transparent_hugepage/enabled at "never" (or a kernel
without transparent huge pages) nothing is advised. Any madvise error (an older kernel: EINVAL) only means
the weights stay on small pages.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from contextlib import contextmanager

from .threads import block_signals, start_without_signals

HUGE_PAGE = 2 << 20
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def policy(path: str = THP_ENABLED) -> str | None:
    """The kernel's transparent huge page policy (always, madvise or never), None when it has none."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return None


def private_anonymous(maps_text: str) -> dict[int, int]:
    """start -> end of the writable private anonymous regions (and the heap) of a /proc/<pid>/maps text."""
    out: dict[int, int] = {}
    for line in maps_text.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        perms = fields[1]
        name = fields[5] if len(fields) > 5 else ""
        if len(perms) < 4 or perms[0] != "r" or perms[1] != "w" or perms[3] != "p":
            continue
        if name not in ("", "[heap]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        out[start] = end
    return out


def grown(before: dict[int, int], after: dict[int, int]) -> list[tuple[int, int]]:
    """The address ranges of `after` that no region of `before` covered, each narrowed to whole huge pages;
    ranges shorter than one are dropped. By address, not by region: the kernel merges a new mapping with an
    adjacent old one (mmap grows down), so a region's start may move while most of it is old memory."""
    old = sorted(before.items())
    old_ends = [e for _, e in old]  # increasing: regions do not overlap
    out = []
    for start, end in sorted(after.items()):
        gaps = []
        lo = start
        # from the first old region that ends past `start` (a backend maps a few hundred regions)
        for o_start, o_end in old[bisect.bisect_right(old_ends, start) :]:
            if o_start >= end:
                break
            if o_start > lo:
                gaps.append((lo, o_start))
            lo = max(lo, o_end)
            if lo >= end:
                break
        if lo < end:
            gaps.append((lo, end))
        for g_lo, g_hi in gaps:
            a = (g_lo + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
            b = g_hi & ~(HUGE_PAGE - 1)
            if b - a >= HUGE_PAGE:
                out.append((a, b))
    return out


def _read_maps() -> str:
    with open("/proc/self/maps") as f:
        return f.read()


def advise(ranges: list[tuple[int, int]]) -> int:
    """madvise each range MADV_HUGEPAGE then MADV_COLLAPSE; returns the bytes the kernel collapsed."""
    # the process's own symbols, libc's among them (ctypes.util.find_library would run ldconfig)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.restype = ctypes.c_int
    collapsed = 0
    # largest first: on a thread of its own, each call may wait for the GIL (a backend holds it while it runs
    # SQL), so the collapse may take the backend's first few embeddings to finish; the big ranges (the
    # weights) go first
    for lo, hi in sorted(ranges, key=lambda r: r[0] - r[1]):
        libc.madvise(lo, hi - lo, MADV_HUGEPAGE)
        if libc.madvise(lo, hi - lo, MADV_COLLAPSE) == 0:
            collapsed += hi - lo
    return collapsed


class Outcome:
    """What `backed_by_huge_pages` did: the ranges it advised and the bytes the kernel collapsed, known once
    `done` is set (the collapse may run on a thread of its own)."""

    __slots__ = ("ranges", "collapsed", "done")

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.collapsed = 0
        self.done = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the collapse; whether it is done."""
        return self.done.wait(timeout)


def _collapse(outcome: Outcome) -> None:
    try:
        outcome.collapsed = advise(outcome.ranges)
    finally:
        outcome.done.set()


def _collapse_on_thread(outcome: Outcome) -> None:
    # PostgreSQL's signal handlers must run on the backend's thread (threads.py)
    block_signals()
    _collapse(outcome)


@contextmanager
def backed_by_huge_pages(enabled: bool = True, background: bool = True):
    """Backs the private memory the body allocates with huge pages when it is done (see the module's
    docstring). Yields an Outcome. With `background`, the collapse (about 140 ms of one core for the model's
    memory) runs on a thread of its own, started with every signal blocked (threads.py), so the caller's first
    embedding does not wait for it: memory read meanwhile is simply read from small pages, and madvise never
    changes contents. A no-op (done at once) when not enabled, when the kernel's policy is never, or when
    /proc/self/maps cannot be read."""
    outcome = Outcome()
    before = None
    if enabled and policy() in ("always", "madvise"):
        try:
            before = private_anonymous(_read_maps())
        except OSError:
            before = None
    try:
        yield outcome
        if before is not None:
            try:
                outcome.ranges = grown(before, private_anonymous(_read_maps()))
            except OSError:
                outcome.ranges = []
    finally:
        if not outcome.ranges:
            outcome.done.set()
    if outcome.ranges:
        if background:
            thread = threading.Thread(
                target=_collapse_on_thread, args=(outcome,), name="pgcite-thp", daemon=True
            )
            start_without_signals(thread)
        else:
            _collapse(outcome)
