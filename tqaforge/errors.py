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


class ServerBindError(TqaforgeError):
    """A local server (Label Studio, the app) cannot listen where it was asked to."""


class PortInUse(ServerBindError):
    """The port a server was asked to use is already taken; the message names it."""


class RemoteBindingRefused(ServerBindError):
    """A server was asked to listen beyond loopback without the explicit flag that allows it."""


class ImportFailed(TqaforgeError):
    """One path of an import could not be imported (unreadable directory, broken link, a file
    that broke the reader or the store); the other paths of the call still import."""

    def __init__(self, path: str, problem: str, *, hint: str | None = None) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}", hint=hint)


class EndpointAuthError(LLMError):
    """The model endpoint refused our credentials (HTTP 401/403) or no API key is set."""


class ImpossibleUsage(LLMError):
    """An endpoint reported token usage that its request cannot have produced (more completion
    tokens than ``max_tokens``, a prompt count far beyond the prompt's size, negative or
    non-numeric counts). Its cost figures cannot be trusted, so the run stops."""


class ReplyTooLarge(InvalidReply):
    """A model reply was larger than any honest reply to its request can be; it was cut off
    at the limit, recorded with a truncated body, and never sent back to the model."""


class SandboxError(TqaforgeError):
    """The sandbox cannot run code as asked: limits out of range, or no worker process could start.

    What a program does inside the sandbox (loop, crash, exceed a limit) is never this error: it is
    the ``outcome`` of the run."""

    hint = "check the sandbox limits you passed (see tqaforge.sandbox.Limits) or the worker log named in the message"


class ReleaseError(TqaforgeError):
    """A release cannot be built, verified or compared (the message says why and what to do)."""


class EvaluateError(TqaforgeError):
    """A release or predictions file cannot be scored (the message says where and what to do)."""
