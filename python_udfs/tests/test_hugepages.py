"""hugepages.py: which memory is advised, that the machine's policy is kept, and that the model's vectors do
not change when its weights move to huge pages."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest
from pgcite_udfs import embed, hugepages

H = hugepages.HUGE_PAGE
MAPS = """\
55d0c0000000-55d0c0021000 r--p 00000000 fd:01 1234   /usr/lib/postgresql/15/bin/postgres
55d0c2000000-55d0c2800000 rw-p 00000000 00:00 0      [heap]
7f0000000000-7f0000600000 rw-p 00000000 00:00 0
7f0000600000-7f0000a00000 rw-s 00000000 00:01 99     /dev/zero (deleted)
7f0000a00000-7f0001000000 r--p 00000000 00:00 0
7f0001000000-7f0001400000 rw-p 00000000 fd:01 777    /usr/lib/x86_64-linux-gnu/libonnxruntime.so
7ffc00000000-7ffc00200000 rw-p 00000000 00:00 0      [stack]
"""


def _anon_huge_kb(lo: int, hi: int) -> int:
    """AnonHugePages (kB) of this process's mappings overlapping [lo, hi)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start < hi and end > lo
            elif inside and line.startswith("AnonHugePages:"):
                total += int(line.split()[1])
    return total


def _kernel_collapses() -> bool:
    """MADV_COLLAPSE: Linux 6.1 or later."""
    major, minor = (int("".join(c for c in x if c.isdigit()) or 0) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 1)


def test_policy_reads_the_bracketed_word(tmp_path):
    for text, want in [
        ("always [madvise] never\n", "madvise"),
        ("[always] madvise never\n", "always"),
        ("always madvise [never]\n", "never"),
        ("garbage\n", None),
    ]:
        (tmp_path / "enabled").write_text(text)
        assert hugepages.policy(str(tmp_path / "enabled")) == want
    assert hugepages.policy(str(tmp_path / "missing")) is None


def test_only_private_anonymous_writable_memory_and_the_heap_are_candidates():
    regions = hugepages.private_anonymous(MAPS)
    assert regions == {0x55D0C2000000: 0x55D0C2800000, 0x7F0000000000: 0x7F0000600000}
    # shared memory (PostgreSQL's), read-only, file-backed and the stack are never touched


def test_grown_keeps_new_regions_and_the_new_tail_of_grown_ones_in_whole_huge_pages():
    before = {0x100000000: 0x100000000 + 4 * H, 0x200000000: 0x200000000 + 2 * H}
    after = {
        0x100000000: 0x100000000 + 7 * H + 4096,  # grew: its new part, whole pages only
        0x200000000: 0x200000000 + 2 * H,  # unchanged
        0x300000000 + 4096: 0x300000000 + 3 * H,  # new, unaligned start
        0x400000000: 0x400000000 + H - 4096,  # new, under one huge page
    }
    assert hugepages.grown(before, after) == [
        (0x100000000 + 4 * H, 0x100000000 + 7 * H),
        (0x300000000 + H, 0x300000000 + 3 * H),
    ]
    assert hugepages.grown(after, after) == []
    # a new mapping the kernel merged with an old region above it: the region's start moved; only the new part
    old = 0x600000000 + 8 * H
    assert hugepages.grown({old: old + 8 * H}, {old - 4 * H: old + 8 * H}) == [(old - 4 * H, old)]
    # a new region between two old ones, merged with both: only the middle
    merged = {0x700000000: 0x700000000 + 12 * H}
    two = {0x700000000: 0x700000000 + 4 * H, 0x700000000 + 8 * H: 0x700000000 + 12 * H}
    assert hugepages.grown(two, merged) == [(0x700000000 + 4 * H, 0x700000000 + 8 * H)]
    # a region that shrank is not advised
    assert hugepages.grown({0x500000000: 0x500000000 + 8 * H}, {0x500000000: 0x500000000 + 4 * H}) == []


def test_disabled_advises_nothing():
    with hugepages.backed_by_huge_pages(enabled=False) as outcome:
        block = np.ones(16 * H // 4, dtype=np.float32)
    assert outcome.done.is_set() and outcome.ranges == [] and outcome.collapsed == 0
    del block


def test_the_policy_never_is_kept(monkeypatch):
    monkeypatch.setattr(hugepages, "policy", lambda path=hugepages.THP_ENABLED: "never")
    with hugepages.backed_by_huge_pages() as outcome:
        block = np.ones(16 * H // 4, dtype=np.float32)
    assert outcome.done.is_set() and outcome.ranges == [] and outcome.collapsed == 0
    del block


def test_memory_allocated_in_the_block_is_collapsed_into_huge_pages():
    if hugepages.policy() not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages are {hugepages.policy()} on this machine")
    with hugepages.backed_by_huge_pages() as outcome:
        # new memory whatever glibc kept from earlier tests (it serves large blocks from freed memory too)
        raw = mmap.mmap(-1, 32 * H, flags=mmap.MAP_PRIVATE)
        block = np.frombuffer(raw, dtype=np.float32)
        block[:] = 1  # 64 MB, written: resident
    assert outcome.wait(30), "the collapse did not finish"
    lo, hi = block.ctypes.data, block.ctypes.data + block.nbytes
    assert any(a < hi and b > lo for a, b in outcome.ranges), "the new block was not advised"
    if not _kernel_collapses():
        pytest.skip("MADV_COLLAPSE needs Linux 6.1")
    assert outcome.collapsed >= 16 * H
    assert _anon_huge_kb(lo, hi) >= 16 * H // 1024, "the block is not on huge pages"
    assert float(block.sum()) == block.size, "the block's contents changed"


def test_the_models_vectors_are_the_same_on_huge_pages():
    if not embed.onnx_export_current():
        pytest.skip("no current ONNX export (make setup makes it)")
    texts = ["How do I prevent transaction ID wraparound failures?", "vacuum", "GIN indexes are inverted."]
    plain = embed.load_onnx(threads=1, huge_pages=False)
    huge = embed.load_onnx(threads=1, huge_pages=True)
    assert plain.huge_pages.ranges == [] and plain.huge_pages.done.is_set()
    assert huge.huge_pages.wait(30)
    if hugepages.policy() in ("always", "madvise") and _kernel_collapses():
        assert huge.huge_pages.collapsed >= 32 * H, "the session's weights were not collapsed"
    assert np.array_equal(plain.encode(texts), huge.encode(texts))


def test_the_collapse_runs_on_a_thread_with_every_signal_blocked(monkeypatch):
    """The caller does not wait for the collapse (a backend's first embedding goes on meanwhile), and the
    thread that runs it blocks every signal (PostgreSQL's handlers must run on the backend's thread);
    synchronous with background=False."""
    import signal
    import threading

    started = threading.Event()
    release = threading.Event()
    seen = {}

    def slow_advise(ranges):
        seen["thread"] = threading.current_thread().name
        seen["mask"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        started.set()
        release.wait(10)
        return 7

    monkeypatch.setattr(hugepages, "policy", lambda path=hugepages.THP_ENABLED: "madvise")
    monkeypatch.setattr(hugepages, "advise", slow_advise)
    # mmap, not numpy: after a large block is freed, glibc serves the next ones from memory it already had
    with hugepages.backed_by_huge_pages() as outcome:
        block = mmap.mmap(-1, 8 * H, flags=mmap.MAP_PRIVATE)
        block.write(b"x" * 8 * H)
    assert outcome.ranges and started.wait(10) and not outcome.done.is_set()
    blockable = set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
    assert seen["thread"] == "pgcite-thp" and blockable <= set(seen["mask"])
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the caller's mask is its own
    release.set()
    assert outcome.wait(10) and outcome.collapsed == 7
    with hugepages.backed_by_huge_pages(background=False) as sync:
        block2 = mmap.mmap(-1, 8 * H, flags=mmap.MAP_PRIVATE)
        block2.write(b"y" * 8 * H)
    assert sync.done.is_set() and sync.collapsed == 7 and seen["thread"] == threading.current_thread().name
    block.close()
    block2.close()


def _grown_by_pages(before: dict[int, int], after: dict[int, int]) -> list[tuple[int, int]]:
    """hugepages.grown the slow way: the 4 kB pages of `after` that no region of `before` holds, in runs,
    each narrowed to whole huge pages."""
    old = {p for a, b in before.items() for p in range(a // 4096, b // 4096)}
    runs = []
    for a, b in sorted(after.items()):
        run = None
        for p in range(a // 4096, b // 4096):
            if p in old:
                if run:
                    runs.append(run)
                run = None
            else:
                run = (run[0], p + 1) if run else (p, p + 1)
        if run:
            runs.append(run)
    out = []
    for pa, pb in runs:
        lo, hi = (pa * 4096 + H - 1) & ~(H - 1), (pb * 4096) & ~(H - 1)
        if hi - lo >= H:
            out.append((lo, hi))
    return out


def test_grown_is_the_new_pages_whatever_the_kernel_merged():
    """Old regions grown, merged with new neighbours and with each other, and new ones between them: 300
    random layouts against the page-by-page definition."""
    import random

    rnd = random.Random(19)
    for _ in range(300):
        pos, before = 0x7F0000000000, {}
        for _ in range(8):
            pos += rnd.randint(0, 3) * H + rnd.randint(0, 511) * 4096
            n = rnd.randint(1, 6) * H + rnd.randint(0, 511) * 4096
            before[pos] = pos + n
            pos += n
        old, after, i = sorted(before.items()), {}, 0
        while i < len(old):
            start = old[i][0]
            if i == 0 or old[i - 1][1] < start - 4 * H:
                start -= rnd.choice([0, 0, H, 3 * H + 4096])  # a new mapping merged below it
            j = i
            while j + 1 < len(old) and rnd.random() < 0.3:
                j += 1  # merged with the next ones, and the new memory between them
            after[start] = old[j][1] + rnd.choice([0, 0, 2 * H])  # grown at its end
            i = j + 1
        assert hugepages.grown(before, after) == _grown_by_pages(before, after), (before, after)
