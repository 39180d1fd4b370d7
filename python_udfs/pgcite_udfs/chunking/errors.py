"""The error the chunker raises for input it refuses."""

from __future__ import annotations


class InputError(ValueError):
    """Invalid input, carrying the SQLSTATE / HINT / DETAIL to raise in PostgreSQL."""

    def __init__(
        self,
        message: str,
        *,
        sqlstate: str = "22023",
        hint: str | None = None,
        detail: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.hint = hint
        self.detail = detail
