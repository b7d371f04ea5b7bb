"""The one progress protocol every long step reports through.

A step (import, variant grid, generation round, typing, ...) takes ``on_progress: Progress | None``
and calls it as work completes; the CLI wires it to a progress bar, the app to ``st.progress``,
tests to a list. Leaf module: it imports nothing of tqaforge.

    def show(done: int, total: int | None, note: str = "") -> None:
        print(f"{done}/{total or '?'} {note}")

    import_paths(ws, paths, on_progress=show)
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Called with how many units are done so far (cumulative, not a delta), the total when known
    (``None`` while it is not), and an optional note (e.g. the file being read)."""

    def __call__(self, done: int, total: int | None, note: str = "") -> None: ...
