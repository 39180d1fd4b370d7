"""The error the chunker raises for input it refuses, and the size limit on input."""

from __future__ import annotations

# The default largest document, in bytes of UTF-8: the default of the setting max_document_bytes.
MAX_DOCUMENT_BYTES = 20 * 1024 * 1024


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


def check_size(body: str, max_bytes: int) -> None:
    """InputError 54000 (program_limit_exceeded) when body is over max_bytes bytes of UTF-8."""
    size = len(body) if body.isascii() else len(body.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InputError(
            f"document is {size} bytes, over the limit of {max_bytes} bytes",
            sqlstate="54000",
            hint="Split the document, or raise the limit (in PostgreSQL an admin sets max_document_bytes "
            "with rag.set_config).",
        )
