"""The per-item scores of an evaluation: ``items.jsonl`` next to ``scores.json``.

:func:`~tqaforge.evaluate.harness.evaluate` writes, beside its aggregated ``scores.json``, one
line per scored row (every system, subset and configuration; unanswered rows too, scored 0):

    {"format": "tqaforge-item-scores", "version": 1, "release": "NAME VERSION", "rows": N}
    {"system": "m/DP", "id": "...", "item_id": "...", "subset": "base", "config": "base",
     "qtype": "...", "qsubtype": "...", "dataset": "...", "score": 0.5, "correct": false, "answered": true}

The first line (the header) names the release scored. The file is written line by line through a
temporary file moved into place (:func:`tqaforge.files.atomic_writer`): bounded memory, and a
killed run leaves the previous file or the new one. :func:`read_item_scores` reads it back a line
at a time, checking each (a damaged file is an :class:`~tqaforge.errors.EvaluateError` naming the
line); :func:`saved_system_scores` and :func:`saved_configuration_scores` give what
:func:`tqaforge.evaluate.significance.compare` takes, as
:func:`~tqaforge.evaluate.significance.system_scores` does from the harness's rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Iterator

from tqaforge.errors import EvaluateError
from tqaforge.evaluate.predictions import BASE_CONFIG, CONFIGURATIONS
from tqaforge.evaluate.scoring import Scored
from tqaforge.files import atomic_writer
from tqaforge.printable import escape_controls

__all__ = ["ITEMS_FILE", "FORMAT", "ItemScore", "ItemFile", "write_item_scores", "read_item_scores", "open_item_scores",
           "saved_system_scores", "saved_configuration_scores"]

ITEMS_FILE = "items.jsonl"
FORMAT = "tqaforge-item-scores"
VERSION = 1
#: The longest line accepted (a row is a few hundred bytes; ids and subtypes are short).
MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class ItemScore:
    """One scored row: ``system`` (``model/method``), the release row ``id`` and its ``item_id``,
    ``subset``, ``config``, subtype, the normalised ``score`` (0-1), exact ``correct`` and
    whether a prediction was given (``answered``)."""

    system: str
    id: str
    item_id: str
    subset: str
    config: str
    qtype: str
    qsubtype: str
    dataset: str
    score: float
    correct: bool
    answered: bool

    @property
    def subtype(self) -> str:
        return f"{self.qtype}_{self.qsubtype}"


def _row(s: Scored) -> ItemScore:
    r = s.ref
    return ItemScore(s.system, r.id, r.item_id, r.subset, r.config, r.qtype, r.qsubtype, r.dataset,
                     round(float(s.score), 6), bool(s.correct), bool(s.answered))


#: ItemScore's fields in order: a line is the flat dict of them (``asdict`` would deep-copy each
#: value, a tenth of a second for a few thousand rows).
_NAMES = tuple(f.name for f in fields(ItemScore))


def write_item_scores(scored: Iterable[Scored], path: Path, *, release: str, rows: int) -> Path:
    """Write ``scored`` (``rows`` of them, for the header) to ``path`` atomically, a line each."""
    with atomic_writer(path) as fh:
        fh.write(json.dumps({"format": FORMAT, "version": VERSION, "release": release, "rows": rows}, ensure_ascii=False) + "\n")
        for s in scored:
            row = _row(s)
            fh.write(escape_controls(json.dumps({name: getattr(row, name) for name in _NAMES}, ensure_ascii=False), json=True) + "\n")
    return path


@dataclass(frozen=True)
class ItemFile:
    """An opened ``items.jsonl``: its ``path``, the ``release`` it scored, its row count (header)."""

    path: Path
    release: str
    rows: int

    def __iter__(self) -> Iterator[ItemScore]:
        return read_item_scores(self.path)


_FIELDS = {"system": str, "id": str, "item_id": str, "subset": str, "config": str, "qtype": str, "qsubtype": str,
           "dataset": str, "correct": bool, "answered": bool}


def _damaged(path: Path, line: int, what: str) -> EvaluateError:
    return EvaluateError(f"{path}:{line}: {what}",
                         hint="score the predictions again (`tqaforge evaluate`) to rewrite the item scores")


def _lines(path: Path) -> Iterator[tuple[int, object]]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise EvaluateError(f"{path} does not exist: no per-item scores",
                            hint="give a directory `tqaforge evaluate` wrote (it holds scores.json and items.jsonl)") from None
    except OSError as exc:
        raise EvaluateError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        number = 0
        while True:
            data = fh.readline(MAX_LINE + 1)
            if not data:
                return
            number += 1
            if len(data) > MAX_LINE:
                raise _damaged(path, number, f"a line longer than {MAX_LINE} bytes")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise _damaged(path, number, "not UTF-8 text") from None
            if not text.strip():
                continue
            try:
                yield number, json.loads(text)
            except ValueError as exc:
                raise _damaged(path, number, f"not JSON ({exc})") from None


def open_item_scores(path: Path) -> ItemFile:
    """The header of ``path`` (``items.jsonl``, or the directory holding it), checked."""
    if path.is_dir():
        path = path / ITEMS_FILE
    for number, head in _lines(path):
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            raise _damaged(path, number, f"not a {FORMAT} file (its first line is no header)")
        if head.get("version") != VERSION:
            raise _damaged(path, number, f"version {head.get('version')!r}, this tool reads version {VERSION}")
        release, rows = head.get("release"), head.get("rows")
        if not isinstance(release, str) or not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            raise _damaged(path, number, "the header's release or row count is missing or wrong")
        return ItemFile(path, release, rows)
    raise _damaged(path, 0, "empty")


def read_item_scores(path: Path) -> Iterator[ItemScore]:
    """The rows of ``path`` one at a time (bounded memory), each checked; a short file (fewer rows
    than its header says: cut off) is an error at its end."""
    if path.is_dir():
        path = path / ITEMS_FILE
    header = open_item_scores(path)
    count = 0
    first = True
    for number, row in _lines(path):
        if first:
            first = False
            continue
        if not isinstance(row, dict):
            raise _damaged(path, number, "a row that is not a JSON object")
        for name, kind in _FIELDS.items():
            if not isinstance(row.get(name), kind):
                raise _damaged(path, number, f"{name} is missing or not a {kind.__name__}")
        score = row.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) or not 0.0 <= score <= 1.0:
            raise _damaged(path, number, f"the score {score!r} is not a number in [0, 1]")
        count += 1
        yield ItemScore(row["system"], row["id"], row["item_id"], row["subset"], row["config"], row["qtype"], row["qsubtype"],
                        row["dataset"], float(score), row["correct"], row["answered"])
    if count != header.rows:
        raise _damaged(path, count + 1, f"{count} rows where its header says {header.rows} (cut off?)")


def saved_system_scores(rows: Iterable[ItemScore], *, subset: str = "base", config: str = BASE_CONFIG,
                        binary: bool = False) -> dict[str, dict[str, float]]:
    """Per system, its score per row id on one subset and configuration (the base items by
    default): what :func:`~tqaforge.evaluate.significance.system_scores` gives from the harness."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.subset == subset and r.config == config:
            out.setdefault(r.system, {})[r.id] = float(r.correct) if binary else r.score
    return dict(sorted(out.items()))


def saved_configuration_scores(rows: Iterable[ItemScore], system: str, *, binary: bool = False) -> dict[str, dict[str, float]]:
    """One system's score per item in each configuration of the configurations subset, as
    :func:`~tqaforge.evaluate.significance.configuration_scores` gives from the harness."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.subset == CONFIGURATIONS and r.system == system:
            out.setdefault(r.config, {})[r.item_id] = float(r.correct) if binary else r.score
    return dict(sorted(out.items()))
