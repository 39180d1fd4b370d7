"""Threads inside a PostgreSQL backend: started with every signal blocked.

PostgreSQL's signal handlers (cancel, statement timeout, terminate, latch wake-ups) must run on the backend's
own thread. A thread inherits its creator's signal mask, so a thread started while the caller blocks every
signal has them blocked from its first instruction on, not only once its target runs; the caller's mask is
restored at once (a signal that arrives in between stays pending for the backend's thread).
"""

from __future__ import annotations

import signal
import threading


def block_signals() -> None:
    """Blocks every signal in the calling thread (a thread's target calls it first, as a second guard)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())


def start_without_signals(thread: threading.Thread) -> threading.Thread:
    """Starts `thread` with every signal blocked in it; the caller's mask is left as it was."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return thread
