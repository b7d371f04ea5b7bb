"""The one exception hierarchy of tqaforge.

Every error a user can cause derives from :class:`TqaforgeError`; its message says what went
wrong, where (file, line, row, item id) and, where we know it, what to do. The CLI prints the
message and exits non-zero instead of showing a traceback.
"""

from __future__ import annotations


class TqaforgeError(Exception):
    """Base class of every error tqaforge raises on purpose."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class ConfigError(TqaforgeError):
    """The workspace configuration is missing, unreadable or inconsistent."""


class WorkspaceNotFound(ConfigError):
    """No tqaforge workspace in the given or current directory."""

    hint = "run `tqaforge init DIR` first, or pass --workspace DIR"


class StoreError(TqaforgeError):
    """The record store cannot be opened, migrated or written."""


class NotFound(TqaforgeError):
    """A record asked for by id does not exist."""


class TableError(TqaforgeError):
    """A table is malformed (ragged rows, empty, bad header...)."""


class ReaderError(TableError):
    """A file could not be read as a table; names the file and the line or row."""

    def __init__(
        self,
        path: str,
        problem: str,
        *,
        line: int | None = None,
        row: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.row = row
        self.problem = problem
        where = path
        if line is not None:
            where += f", line {line}"
        if row is not None:
            where += f", row {row}"
        super().__init__(f"{where}: {problem}", hint=hint)


class TaxonomyError(TqaforgeError):
    """A category or subtype is not part of the workspace's taxonomy."""


class LLMError(TqaforgeError):
    """The model endpoint is unusable (after retries) or the LLM settings are missing."""


class BudgetExceeded(LLMError):
    """A paid call was refused before sending: its worst-case cost would pass ``max_cost``."""

    hint = "raise --max-cost (or [llm] max_cost); finished calls are stored and a re-run resumes"


class InvalidReply(LLMError):
    """A JSON reply was still invalid after one repair retry; ``call_ids`` names the calls."""

    def __init__(self, message: str, *, call_ids: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.call_ids = list(call_ids)


class AgreementError(TqaforgeError):
    """Agreement statistics cannot be computed from the ratings given (wrong shape, unequal raters...)."""


class AdjudicationError(AgreementError):
    """A final label cannot be recorded as given (unknown task, label of the wrong shape...)."""
