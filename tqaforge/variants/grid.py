"""The variant grid: items x perturbations x seeds x serializations.

One :class:`~tqaforge.schemas.records.Variant` is stored per (question, perturbation, seed): the
perturbed table, what changed and what happened to the gold answer, or the reason the
perturbation was skipped. Serializations are a pure function of the stored table, so they are
not stored again per format; they are rendered into the prompts stream (JSONL, one line per
configuration). The full ToRR grid is 7 serializations x 5 conditions (none + 4 perturbations).

Variant ids hash (question, perturbation, seed): building the grid twice adds nothing, and a
run killed half-way resumes where it stopped.

**Commanding items** (table editing: the gold is a table, the target of an edit of the item's own
table; :func:`tqaforge.tables.commanding.gold_is_table`) get only the perturbations that leave
the table's content and order as they are (:data:`KEEPS_TABLE`: ``none``, so the item in every
serialization): any other perturbation changes the table the edit applies to, and the gold would
no longer be its target. The others are stored as skipped, and the summary counts them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TextIO

from sqlmodel import Session, col, select

from tqaforge.answers.agents import AGENTS
from tqaforge.errors import ReaderError, TqaforgeError
from tqaforge.files import atomic_write_text, name_target, replace_durably
from tqaforge.ids import variant_id
from tqaforge.progress import Progress
from tqaforge.queries import tables_by_id, trusted_answers
from tqaforge.schemas.enums import AnswerEffect, AnswerMethod, Origin, VariantStatus
from tqaforge.schemas.records import MAX_SEED, Question, Variant, utcnow
from tqaforge.store import Workspace, insert_new
from tqaforge.tables.commanding import gold_is_table
from tqaforge.tables.perturb import MOVES_CELLS, PERTURBATIONS, TORR_PERTURBATIONS, PerturbationSkipped, perturb
from tqaforge.tables.perturb.base import ItemContext, Perturbed
from tqaforge.tables.perturb.structural import structural_words
from tqaforge.tables.readers.jsonio import read_json_file
from tqaforge.tables.serialize import SERIALIZATIONS, TORR_SERIALIZATIONS
from tqaforge.tables.table import Table

#: Perturbations whose result does not depend on the seed: built once, with seed 0.
SEED_FREE = frozenset({"none", "transpose", "remove_table", "remove_relevant_cells", "shorten_to_relevant"})

_BATCH = 500  # questions per transaction: a killed run loses at most one batch of work

#: The perturbations that leave a table's content and order unchanged: all a commanding item gets.
KEEPS_TABLE = frozenset({"none"})
#: Why a commanding item gets no other perturbation.
COMMANDING_SKIP = ("a commanding item: its gold is the edit of the original table, and this perturbation changes "
                   "the table (only the unperturbed table is kept, in every serialization)")




class GridError(TqaforgeError):
    """The grid specification is invalid (unknown names, seeds out of range, no seeds...)."""


class OutputPathError(GridError):
    """The prompts file cannot be written where it was asked for."""


class PromptsFileConflict(GridError):
    """The prompts file exists and was not made by this grid: replacing it needs --overwrite."""


@dataclass(frozen=True, slots=True)
class GridSpec:
    """Which configurations to build."""

    serializations: tuple[str, ...]
    perturbations: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    #: Skip perturbations that move cells for questions that name positions (FREB-TQA's filter).
    skip_structural: bool = True

    def __post_init__(self) -> None:
        for kind, names, known in (
            ("serialization", self.serializations, SERIALIZATIONS),
            ("perturbation", self.perturbations, PERTURBATIONS),
        ):
            unknown = [n for n in names if n not in known]
            if unknown:
                raise GridError(f"unknown {kind}(s): {', '.join(unknown)}", hint="known: " + ", ".join(known))
            if not names:
                flag = "--serializations" if kind == "serialization" else "--perturbations"
                raise GridError(f"give at least one {kind}", hint=f"{flag} NAME,NAME (see `tqaforge variants list`)")
        if not self.seeds:
            raise GridError("give at least one seed", hint="--seeds 0 or --seeds 0,1,2")
        for seed in self.seeds:
            # bool is an int subclass; a float or a huge int would fail only at the insert.
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
                raise GridError(
                    f"seed {seed!r} is outside 0..{MAX_SEED}",
                    hint=f"give --seeds as comma-separated integers from 0 to {MAX_SEED}",
                )

    def seeds_for(self, perturbation: str) -> tuple[int, ...]:
        """The seeds ``perturbation`` is built with (one for perturbations that draw nothing)."""
        return (self.seeds[0],) if perturbation in SEED_FREE else self.seeds

    def as_dict(self) -> dict[str, Any]:
        """The spec as JSON-able data (stored in the prompts file's sidecar)."""
        return {
            "serializations": list(self.serializations),
            "perturbations": list(self.perturbations),
            "seeds": list(self.seeds),
            "skip_structural": self.skip_structural,
        }


def parse_seeds(text: str) -> tuple[int, ...]:
    """Seeds from the ``--seeds`` text ("0,1,2"), checked like :class:`GridSpec` checks them."""
    values: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise GridError(f"seed {part!r} is not an integer", hint=f"give --seeds as integers from 0 to {MAX_SEED}, e.g. --seeds 0,1,2") from None
        if not 0 <= value <= MAX_SEED:
            raise GridError(f"seed {part} is outside 0..{MAX_SEED}", hint=f"give --seeds as integers from 0 to {MAX_SEED}")
        if value not in values:
            values.append(value)
    if not values:
        raise GridError("give at least one seed", hint="--seeds 0 or --seeds 0,1,2")
    return tuple(values)


@dataclass(frozen=True, slots=True)
class Item:
    """A question with its table and gold answer: what the grid perturbs."""

    question_id: str
    question: str
    table_id: str
    table: Table
    context: ItemContext
    subtype: str | None = None  # picks the answer-format rules of the prompt

    @property
    def commanding(self) -> bool:
        """Whether the gold is a table (a commanding item): it gets only :data:`KEEPS_TABLE`."""
        return gold_is_table(self.context.answers, self.subtype)

    @property
    def structural_words(self) -> tuple[str, ...]:
        """Position and order words in the question (see :func:`~tqaforge.tables.perturb.structural.structural_words`)."""
        return structural_words(self.question)


@dataclass(slots=True)
class GridSummary:
    """What one build of the grid did; :meth:`lines` is what ``tqaforge variants build`` prints."""

    items: int = 0
    variants_new: int = 0
    variants_present: int = 0
    prompts: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # perturbation -> count
    skip_reasons: dict[str, int] = field(default_factory=dict)  # reason -> count
    #: Commanding items (gold is a table), and per perturbation how many of them it skipped.
    commanding: int = 0
    commanding_skipped: dict[str, int] = field(default_factory=dict)
    #: The prompts file written (as it was asked for, not resolved); None when none was written.
    prompts_path: Path | None = None

    def lines(self, *, max_reasons: int = 10) -> list[str]:
        """The report: counts (and the prompts file), skips per perturbation, the commonest skip reasons."""
        head = (
            f"{self.items} items: {self.variants_new} new variants, {self.variants_present} already present, "
            f"{sum(self.skipped.values())} skipped"
        )
        if self.prompts_path is not None:
            head += f"; {self.prompts} prompts -> {self.prompts_path}"
        lines = [head]
        if self.commanding:
            skipped = ", ".join(f"{name} {n}" for name, n in sorted(self.commanding_skipped.items()))
            lines.append(f"  {self.commanding} commanding items (gold is a table): only the unperturbed table, "
                         f"in every serialization" + (f"; skipped for them: {skipped}" if skipped else ""))
        lines += [f"  skipped {name}: {n}" for name, n in sorted(self.skipped.items())]
        reasons = sorted(self.skip_reasons.items(), key=lambda kv: -kv[1])[:max_reasons]
        lines += [f"    {n} x {reason}" for reason, n in reasons]
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-able data."""
        return {
            "items": self.items,
            "variants_new": self.variants_new,
            "variants_present": self.variants_present,
            "prompts": self.prompts,
            "skipped": dict(self.skipped),
            "skip_reasons": dict(self.skip_reasons),
            "commanding": self.commanding,
            "commanding_skipped": dict(self.commanding_skipped),
            "prompts_path": str(self.prompts_path) if self.prompts_path is not None else None,
        }


def item_context(question: Question, answers: Sequence[str]) -> ItemContext:
    """What perturbations may use: the gold answers, relevant cells and a derivation if any."""
    derivation = (question.meta or {}).get("derivation")
    return ItemContext(
        question=question.text,
        answers=tuple(answers),
        relevant_cells=tuple(tuple(c) for c in question.relevant_cells) if question.relevant_cells else None,  # type: ignore[misc]
        derivation=derivation if isinstance(derivation, str) and derivation.strip() else None,
    )


def load_items(
    ws: Workspace,
    *,
    subtype: str | None = None,
    status: str | None = "accepted",
    question_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Item]:
    """Questions (with their tables and gold answers) to build variants for."""
    with ws.session() as s:
        q = select(Question)
        if subtype:
            q = q.where(Question.subtype == subtype)
        if status:
            q = q.where(Question.status == status)
        if question_ids:
            q = q.where(Question.id.in_(list(question_ids)))  # type: ignore[attr-defined]
        q = q.order_by(col(Question.created_at), col(Question.id))
        if limit is not None:
            if limit < 1:
                raise GridError(f"limit {limit} is less than 1", hint="give --limit 1 or more, or leave it out for all questions")
            q = q.limit(limit)
        questions = list(s.exec(q).all())
        gold = trusted_answers(s, [x.id for x in questions])
        tables = tables_by_id(s, [x.table_id for x in questions])
    return [
        Item(x.id, x.text, x.table_id, tables[x.table_id], item_context(x, gold[x.id].values if x.id in gold else []),
             x.subtype)
        for x in questions
    ]


def perturb_item(item: Item, perturbation: str, seed: int, *, skip_structural: bool = True) -> Perturbed | PerturbationSkipped:
    """One cell of the grid, before serialization; a skip is returned, not raised. A commanding
    item gets only :data:`KEEPS_TABLE` (module docs)."""
    if perturbation not in KEEPS_TABLE and item.commanding:
        return PerturbationSkipped(COMMANDING_SKIP)
    if skip_structural and perturbation in MOVES_CELLS:
        words = item.structural_words
        if words:
            return PerturbationSkipped(f"the question names positions ({', '.join(words)}): moving cells may change its answer")
    try:
        return perturb(perturbation, item.table, item.context, seed)
    except PerturbationSkipped as skipped:
        return skipped


def render_prompt(table: Table, question: str, serialization: str, subtype: str | None = None) -> str:
    """The answering prompt for one configuration: the direct-prompting agent's (template ``answer_dp``)."""
    return AGENTS[AnswerMethod.DP].prompt(table, question, subtype, serialization)


def iter_grid(items: Iterable[Item], spec: GridSpec) -> Iterator[tuple[Item, str, int, Perturbed | PerturbationSkipped]]:
    """Every (item, perturbation, seed) with its outcome; pure, no store (used by benchmarks too)."""
    for item in items:
        for name in spec.perturbations:
            for seed in spec.seeds_for(name):
                yield item, name, seed, perturb_item(item, name, seed, skip_structural=spec.skip_structural)


def _variant_row(item: Item, name: str, seed: int, outcome: Perturbed | PerturbationSkipped, now: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": variant_id(item.question_id, name, seed),
        "question_id": item.question_id,
        "table_id": item.table_id,
        "perturbation": name,
        "seed": seed,
        "serialization": None,
        "origin": Origin.RULE.value,
        "created_by": "tqaforge",
        "created_at": now,
    }
    if isinstance(outcome, PerturbationSkipped):
        row.update(params=None, table=None, changes=None, answer_effect=None, answers=None,
                   status=VariantStatus.SKIPPED.value, skip_reason=outcome.reason)
    else:
        row.update(
            params=outcome.params or None,
            table=outcome.table.to_dict(),
            changes=outcome.change.to_dict(),
            answer_effect=outcome.answer_effect.value,
            answers=list(outcome.answers) if outcome.answers is not None else None,
            # A person must settle the gold before such a variant can be used.
            status=(VariantStatus.PENDING_REVIEW if outcome.answer_effect == AnswerEffect.NEEDS_PERSON
                    else VariantStatus.BUILT).value,
            skip_reason=None,
        )
    return row


def _existing(session: Session, ids: list[str]) -> dict[str, Variant]:
    found: dict[str, Variant] = {}
    for start in range(0, len(ids), _BATCH):
        for v in session.exec(select(Variant).where(Variant.id.in_(ids[start : start + _BATCH]))).all():  # type: ignore[attr-defined]
            found[v.id] = v
    return found


def build_variants(
    ws: Workspace,
    items: Sequence[Item],
    spec: GridSpec,
    *,
    prompts: TextIO | None = None,
    on_progress: Progress | None = None,
) -> GridSummary:
    """Build and store the grid for ``items``; stream one prompt line per configuration to
    ``prompts`` (JSONL). Already stored variants are reused, never rebuilt or duplicated, and a
    second build running at the same time stores nothing twice (the inserts skip existing ids).
    ``on_progress(done, len(items))`` is called before the first item and after each one."""
    summary = GridSummary(items=len(items))
    done = 0
    if on_progress:
        on_progress(0, len(items))
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        ids = [variant_id(it.question_id, n, s) for it in batch for n in spec.perturbations for s in spec.seeds_for(n)]
        # Read in its own short transaction: on SQLite a write that follows a read in one
        # transaction fails at once ("database is locked") when another writer committed
        # in between, instead of waiting for the busy timeout.
        with ws.session() as session:
            present = _existing(session, ids)
        now = utcnow()
        new_rows: list[dict[str, Any]] = []
        for item in batch:
            commanding = item.commanding
            summary.commanding += commanding
            for name in spec.perturbations:
                if commanding and name not in KEEPS_TABLE:
                    summary.commanding_skipped[name] = summary.commanding_skipped.get(name, 0) + 1
                for seed in spec.seeds_for(name):
                    stored = present.get(variant_id(item.question_id, name, seed))
                    if stored is None:
                        row = _variant_row(item, name, seed, perturb_item(item, name, seed, skip_structural=spec.skip_structural), now)
                        new_rows.append(row)
                    else:
                        row = stored.model_dump()
                        summary.variants_present += 1
                    if row["status"] == VariantStatus.SKIPPED.value:
                        summary.skipped[name] = summary.skipped.get(name, 0) + 1
                        summary.skip_reasons[row["skip_reason"]] = summary.skip_reasons.get(row["skip_reason"], 0) + 1
                    elif prompts is not None:
                        summary.prompts += _write_prompts(prompts, item, row, spec)
            done += 1
            if on_progress:
                on_progress(done, len(items))
        if new_rows:
            inserted = insert_new_variants(ws, new_rows)
            summary.variants_new += inserted
            # Rows another build stored first: the same id means the same content.
            summary.variants_present += len(new_rows) - inserted
    return summary


def insert_new_variants(ws: Workspace, rows: list[dict[str, Any]]) -> int:
    """Insert ``rows``, skipping ids already stored (by a concurrent build); the number inserted."""
    with ws.session() as session:  # commits on leaving the block
        return len(insert_new(session, Variant, rows))


def _write_prompts(out: TextIO, item: Item, row: dict[str, Any], spec: GridSpec) -> int:
    table = Table.from_dict(row["table"])
    for serialization in spec.serializations:
        line = {
            "variant_id": row["id"],
            "question_id": item.question_id,
            "perturbation": row["perturbation"],
            "seed": row["seed"],
            "serialization": serialization,
            "prompt": render_prompt(table, item.question, serialization, item.subtype),
            "answers": row["answers"],
            "answer_effect": row["answer_effect"],
        }
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return len(spec.serializations)


def write_prompts_file(path: Path, write: Callable[[TextIO], GridSummary]) -> GridSummary:
    """Write the prompts stream atomically: a killed run never leaves a half file in place, and
    two runs at once never share a file (each writes its own temporary file, then renames it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, summary = _write_temporary(path, write)
    replace_durably(tmp, path)
    return summary


def _write_temporary(path: Path, write: Callable[[TextIO], GridSummary]) -> tuple[Path, GridSummary]:
    """Run ``write`` into a fresh, fsynced temporary file beside ``path`` (same file system, so
    the rename is atomic); the file is removed if ``write`` fails. The caller renames it (with
    :func:`~tqaforge.files.replace_durably`) once the target has been checked again."""
    try:
        fh = tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
        )
    except OSError as exc:
        name_target(exc, path)  # a full or read-only disk names the prompts file, not our temporary one
        raise
    tmp = Path(fh.name)
    try:
        with fh:
            summary = write(fh)  # type: ignore[arg-type]  # a text file object: TextIO in all but name
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        name_target(exc, path)
        raise
    return tmp, summary


# --- where the prompts file goes, and what it was made with ------------------------------------

META_SUFFIX = ".meta.json"
_META_FORMAT = 1


def default_prompts_path(ws: Workspace) -> Path:
    """WORKSPACE/prompts/variants.jsonl (its folder is created: it belongs to the workspace)."""
    folder = ws.paths.prompts
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "variants.jsonl"


def meta_path(path: Path) -> Path:
    """The sidecar that records what made the prompts file ``path``."""
    return path.with_name(path.name + META_SUFFIX)


def check_output_path(path: Path) -> Path:
    """``path`` resolved, if a file can be written there; :class:`OutputPathError` otherwise.

    Call it before building anything, so a bad ``--out`` never fails after variants are stored."""
    path = Path(path).expanduser()
    resolved = path.resolve()
    hint = "give --out a file name in an existing, writable folder, e.g. --out prompts/variants.jsonl"
    if resolved.is_dir():
        raise OutputPathError(f"{path} is a directory, not a file", hint=f"name a file inside it, e.g. --out {path / 'variants.jsonl'}")
    if resolved.exists() and not stat.S_ISREG(resolved.stat().st_mode):
        raise OutputPathError(f"{path} exists and is not a regular file (a FIFO, device or socket)", hint=hint)
    parent = resolved.parent
    if not parent.exists():
        raise OutputPathError(f"the folder {parent} of {path} does not exist", hint=f"create it first (mkdir -p {parent}), or {hint}")
    if not parent.is_dir():
        raise OutputPathError(f"{parent} (the folder of {path}) is not a directory", hint=hint)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"the folder {parent} is not writable", hint=hint)
    if resolved.exists() and not os.access(resolved, os.W_OK):
        raise OutputPathError(f"{path} is not writable", hint=hint)
    return resolved


@dataclass(frozen=True, slots=True)
class PromptsOptions:
    """Everything that decides what a prompts file holds: the grid and the item selection."""

    spec: GridSpec
    subtype: str | None = None
    status: str | None = "accepted"
    limit: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The options as JSON-able data, in a fixed key order."""
        return {**self.spec.as_dict(), "subtype": self.subtype, "status": self.status, "limit": self.limit}

    def digest(self) -> str:
        """A hash of the options: equal digests mean the same kind of file."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()


def describe_options(options: Mapping[str, Any]) -> str:
    """Options as the CLI flags that give them, for messages."""
    parts = [
        f"--serializations {','.join(options.get('serializations') or [])}",
        f"--perturbations {','.join(options.get('perturbations') or [])}",
        f"--seeds {','.join(str(s) for s in options.get('seeds') or [])}",
        f"--status {options.get('status') or chr(39) * 2}",
    ]
    if options.get("subtype"):
        parts.append(f"--subtype {options['subtype']}")
    if options.get("limit") is not None:
        parts.append(f"--limit {options['limit']}")
    if options.get("skip_structural") is False:
        parts.append("--keep-structural")
    return " ".join(parts)


#: A prompts file's sidecar holds the options it was built with: a few hundred bytes.
MAX_META_BYTES = 1024**2


def read_meta(path: Path) -> dict[str, Any] | None:
    """The sidecar of the prompts file ``path``, or None when there is none we can read."""
    try:
        # The one bounded JSON reader: a sidecar that is a FIFO, huge or too deep is unreadable.
        meta = read_json_file(meta_path(path), max_bytes=MAX_META_BYTES)
    except ReaderError:
        return None
    ok = isinstance(meta, dict) and meta.get("format") == _META_FORMAT and isinstance(meta.get("options"), dict)
    return meta if ok else None


def check_prompts_target(path: Path, options: PromptsOptions, *, overwrite: bool = False) -> Path:
    """Refuse (before anything is built) to replace a prompts file made with other options or
    by someone else, unless ``overwrite``; the resolved path otherwise."""
    resolved = check_output_path(path)
    if overwrite or not resolved.exists():
        return resolved
    ways_out = f"write to another file with --out OTHER.jsonl, or replace {path} with --overwrite"
    meta = read_meta(resolved)
    if meta is None:
        raise PromptsFileConflict(
            f"{path} exists and was not written by `tqaforge variants build` (no readable {meta_path(path).name}); "
            "not replacing it", hint=ways_out,
        )
    if meta.get("options_digest") != options.digest():
        raise PromptsFileConflict(
            f"{path} was made with other options ({describe_options(meta['options'])}) than this run "
            f"({describe_options(options.as_dict())}); not replacing it", hint=ways_out,
        )
    return resolved


@contextlib.contextmanager
def _file_lock(ws: Workspace, path: Path) -> Iterator[None]:
    """Hold the workspace's exclusive lock for the prompts file ``path``: the check and the
    rename are one step."""
    name = "prompts-" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    with ws.lock(name, wait=True):
        yield


def write_prompts(
    ws: Workspace,
    path: Path,
    options: PromptsOptions,
    write: Callable[[TextIO], GridSummary],
    *,
    overwrite: bool = False,
) -> GridSummary:
    """Write the prompts file ``path`` with its sidecar (``path`` + ``.meta.json``).

    ``write`` streams into a private temporary file; then, under a lock, the target is checked
    again (another build may have written it meanwhile), the sidecar is written and the file is
    renamed into place. Call :func:`check_prompts_target` before building as well."""
    resolved = check_prompts_target(path, options, overwrite=overwrite)
    tmp, summary = _write_temporary(resolved, write)
    try:
        with _file_lock(ws, resolved):
            check_prompts_target(path, options, overwrite=overwrite)
            meta = {
                "format": _META_FORMAT,
                "made_by": "tqaforge variants build",
                "options": options.as_dict(),
                "options_digest": options.digest(),
                "prompts": summary.prompts,
            }
            # The sidecar goes first: a kill between the two renames leaves a sidecar that
            # over-claims (so a later run is refused, the safe side), never a file without one.
            atomic_write_text(meta_path(resolved), json.dumps(meta, indent=2, sort_keys=True) + "\n")
            replace_durably(tmp, resolved)
    finally:
        tmp.unlink(missing_ok=True)
    return summary


# --- the step: options in, summary out (what the CLI and the app call) -------------------------


@dataclass(frozen=True, slots=True)
class GridOptions:
    """Everything ``tqaforge variants build`` takes. ``None`` grids mean ToRR's (seven
    serializations; none + four perturbations); ``out=None`` means WORKSPACE/prompts/variants.jsonl."""

    serializations: tuple[str, ...] | None = None
    perturbations: tuple[str, ...] | None = None
    seeds: tuple[int, ...] = (0,)
    subtype: str | None = None
    status: str | None = "accepted"  # None: questions of every status
    limit: int | None = None
    out: Path | None = None
    overwrite: bool = False  # replace a prompts file made with other options
    write_prompts: bool = True  # False: store the variants only
    skip_structural: bool = True  # FREB-TQA's filter for questions that name positions

    def spec(self) -> GridSpec:
        """The grid these options ask for (checked: :class:`GridError` on unknown names or bad seeds)."""
        return GridSpec(
            self.serializations if self.serializations is not None else tuple(TORR_SERIALIZATIONS),
            self.perturbations if self.perturbations is not None else ("none", *TORR_PERTURBATIONS),
            self.seeds, skip_structural=self.skip_structural,
        )

    def prompts_options(self) -> PromptsOptions:
        """What decides the content of the prompts file (recorded in its sidecar)."""
        return PromptsOptions(self.spec(), subtype=self.subtype, status=self.status, limit=self.limit)


def build_variant_grid(ws: Workspace, options: GridOptions, *, on_progress: Progress | None = None) -> GridSummary:
    """Build and store the variant grid and (unless ``options.write_prompts`` is False) write its
    prompts file with the sidecar, in one call.

    Every option is checked, and so is the prompts file, before anything is stored: a prompts
    file made with other options is never replaced without ``overwrite``.

        summary = build_variant_grid(ws, GridOptions(perturbations=("none", "transpose"), seeds=(0, 1)))
        print("\n".join(summary.lines()))
    """
    prompts_options = options.prompts_options()
    spec = prompts_options.spec
    target = options.out or default_prompts_path(ws)
    if options.write_prompts:
        check_prompts_target(target, prompts_options, overwrite=options.overwrite)
    items = load_items(ws, subtype=options.subtype, status=options.status, limit=options.limit)
    if not options.write_prompts:
        return build_variants(ws, items, spec, on_progress=on_progress)
    summary = write_prompts(
        ws, target, prompts_options, lambda fh: build_variants(ws, items, spec, prompts=fh, on_progress=on_progress),
        overwrite=options.overwrite,
    )
    summary.prompts_path = target
    return summary
