"""Cancellation: long work calls a checkpoint now and then, where the caller may raise to stop it.

In PostgreSQL the checkpoint runs a trivial query now and then: that is where the backend processes
statement_timeout and pg_cancel_backend, and the error it raises leaves through the chunker unchanged.
"""

from __future__ import annotations

from collections.abc import Callable


class Ticker:
    """Called for every piece of work: an element, a line, a token count (one more for every 256 characters
    it tokenizes). Calls the checkpoint once ``every`` units of work, so a call costs little."""

    __slots__ = ("_checkpoint", "_every", "_left")

    def __init__(self, checkpoint: Callable[[], object] | None, every: int = 256):
        self._checkpoint = checkpoint
        self._every = every
        self._left = every

    def __call__(self, work: int = 1) -> None:
        self._left -= work
        if self._left <= 0:
            self._left = self._every
            if self._checkpoint is not None:
                self._checkpoint()
