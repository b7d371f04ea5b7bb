"""What is scored: a release's rows as references, and a predictions file matched to them.

A **reference** is one scorable row of a release: a base item (config ``base``), a robustness
variant (config: its perturbation) or one prompt of the configurations subset (config
``SERIALIZATION/PERTURBATION``). The release is verified against its manifest before it is read:
scores on a damaged release would be scores on something else.

A **predictions file** is JSON Lines, one object per prediction: ``id`` (a row id of the release,
or for TableBench's own inference files its TableBench ``id``) and ``prediction`` (the model's
reply as it came); optional ``model`` (or TableBench's ``model_name``) and ``method`` (or
``instruction_type``: DP, TCoT, SCoT, PoT). Every other field is ignored, so TableBench's
inference format is read as it is. TableBench has one id under two subtypes: its rows are matched
by id and ``qsubtype`` together.

Both are input from elsewhere: the predictions file is read by the one bounded JSON reader (a
regular file, line by line, nesting bounded; a FIFO or ``/dev/zero`` is refused at once), every
release file is opened through :func:`~tqaforge.release.verify.release_file` (never outside the
release), and a model name is kept with its control characters escaped, so that it reaches no
terminal, report or ``scores.json`` raw.

>>> release = load_release(Path("releases/mybench-0.1.0"))          # doctest: +SKIP
>>> predictions = read_predictions(Path("preds.jsonl"))              # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterator, Mapping

from tqaforge.answers.methods import parse_methods
from tqaforge.errors import ConfigError, EvaluateError, ReaderError
from tqaforge.printable import escape_controls
from tqaforge.release.verify import read_manifest, subset_file, verify_release
from tqaforge.schemas.enums import AnswerMethod
from tqaforge.tables.readers._common import open_regular
from tqaforge.tables.readers.jsonio import loads, read_json_lines, read_json_lines_at

#: The answering methods a prediction may name (TableBench's instruction types).
METHODS = tuple(m.value for m in AnswerMethod)
BASE_CONFIG = "base"
#: Subsets whose rows are variants of an item, scored against the item (Em, Emd, VP).
ROBUSTNESS_SUBSETS = ("structure", "relevant_cells", "values", "realistic")
CONFIGURATIONS = "configurations"


@dataclass(frozen=True)
class Reference:
    """One scorable row of a release (module docs); ``row``: its index in its subset's file."""

    id: str
    subset: str
    item_id: str
    config: str
    qtype: str
    qsubtype: str
    answer: tuple[str, ...]
    answer_text: str
    row: int
    question: str = ""
    dataset: str = ""
    chart_type: str = ""
    source_id: str = ""
    token_bucket: str = ""  # a large-table probe's token bucket (release column ``token_bucket``)


#: The columns read for scoring; tables (and prompts) are read only for the rows whose code runs.
_COLUMNS = ("id", "item_id", "source_id", "dataset", "qtype", "qsubtype", "chart_type", "question", "answer",
            "answer_text", "perturbation", "config", "token_bucket")

#: A subset whose JSON Lines file is at most this large is read from it, not from its Parquet file:
#: parsing it costs less than importing pyarrow (and numpy with it), about 0.1 s of every
#: ``tqaforge evaluate`` (TableBench's base subset is 1.5 MB). Larger ones (big tables, many items)
#: are read from Parquet, column by column, their tables left unparsed.
JSONL_READ_BYTES = 4 * 1024 * 1024


@dataclass
class Release:
    """A verified release's manifest and references; :meth:`table` reads a row's table when needed."""

    root: Path
    manifest: dict[str, Any]
    references: list[Reference]
    _files: dict[str, Any] = field(default_factory=dict)
    # Subsets read from their JSON Lines file: each row's byte offset in it, where its table is read.
    _offsets: dict[str, list[int]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return escape_controls(f"{self.manifest.get('name', '?')} {self.manifest.get('version', '?')}", lines=False)

    def base_references(self) -> list[Reference]:
        """The references of the base items: subset ``base``, unperturbed configuration."""
        return [r for r in self.references if r.subset == "base" and r.config == BASE_CONFIG]

    def table(self, ref: Reference) -> Mapping[str, Any]:
        """The table of ``ref`` (``{"header": [...], "rows": [[...]]}``), read from the file its subset
        was read from (its row's line of the JSON Lines file, or the Parquet file's table column)."""
        offsets = self._offsets.get(ref.subset)
        if offsets is not None:
            path = subset_file(self.root, self.manifest, ref.subset, "jsonl")
            try:
                with os.fdopen(open_regular(path), "rb") as handle:
                    handle.seek(offsets[ref.row])
                    row = loads(handle.readline().decode("utf-8"))
            except (OSError, ValueError) as exc:
                raise EvaluateError(f"cannot read {path}: {exc}", hint="rebuild the release") from None
            table = row.get("table") if isinstance(row, dict) else None
            if not isinstance(table, dict):
                raise EvaluateError(f"{path}: row {ref.row + 1} holds no table", hint="rebuild the release")
            return table
        import pyarrow.parquet as pq

        column = self._files.get(ref.subset)
        if column is None:
            path = subset_file(self.root, self.manifest, ref.subset, "parquet")
            with pq.ParquetFile(path) as parquet:  # not pq.read_table: it imports pyarrow.dataset, and pandas
                column = self._files[ref.subset] = parquet.read(columns=["table"]).column("table")
        value: Mapping[str, Any] = column[ref.row].as_py()
        return value


@dataclass(frozen=True)
class Prediction:
    """One line of a predictions file."""

    line: int
    id: str
    model: str
    method: str
    text: str
    qsubtype: str = ""


@dataclass
class Matched:
    """Predictions matched to references, and the lines that matched nothing."""

    pairs: list[tuple[Reference, Prediction]] = field(default_factory=list)
    unmatched: list[Prediction] = field(default_factory=list)


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, value) of each line of a predictions file, through the one bounded JSON reader."""
    try:
        yield from read_json_lines(path)
    except ReaderError as exc:
        where = f"{exc.path}:{exc.line}" if exc.line is not None else exc.path
        raise EvaluateError(f"{where}: {exc.problem}", hint="give a JSON Lines file: one JSON object per line, UTF-8") from None


def load_release(root: Path, *, ids: Collection[str] | None = None) -> Release:
    """The references of the release at ``root``, after checking every file against its manifest.

    ``ids`` (the ids of the predictions to match, say): the base items are read always (they match
    TableBench's ids too), any other subset only when one of its row ids is among ``ids``, and then
    whole (its unanswered rows count). None: every subset."""
    if not (root / "manifest.json").exists():
        raise EvaluateError(f"{root} is not a release (no manifest.json)", hint="give the directory `tqaforge release build` wrote")
    report = verify_release(root)
    if not report.ok:
        raise EvaluateError(
            f"release {root} does not match its manifest: " + "; ".join(report.lines()[1:6]),
            hint="score an intact release (download it again, or rebuild it)",
        )
    manifest = read_manifest(root)
    subsets = list(manifest.get("counts") or {})
    # Column by column (a list per column, no dict per row): the configurations subset alone has
    # tens of thousands of rows, and this is most of what `tqaforge evaluate` does before scoring.
    for sub in subsets:  # every subset counted has its files listed (so verified), whether read or not
        subset_file(root, manifest, sub, "parquet")
    offsets: dict[str, list[int]] = {}
    columns: dict[str, dict[str, list[Any]]] = {}
    if "base" in subsets:
        columns["base"] = _subset_columns(root, manifest, "base", offsets)
    if ids is not None:
        # A prediction of a base item (by row id or TableBench's id, as most are) needs no other
        # subset: row ids are content hashes, never shared between subsets.
        b = columns.get("base") or {}
        rest = (ids if isinstance(ids, (set, frozenset)) else set(ids)).difference(b.get("id") or (), b.get("source_id") or ())
        subsets = [sub for sub in subsets if sub == "base" or (rest and _holds(subset_file(root, manifest, sub, "parquet"), rest))]
    for sub in subsets:
        if sub not in columns:
            columns[sub] = _subset_columns(root, manifest, sub, offsets)
    refs: list[Reference] = []
    b = columns.get("base") or {}
    base_ids: list[str] = b.get("id") or []
    n = len(base_ids)
    none = [None] * n
    b_answer = b["answer"] if n else []
    b_answer_text, b_qtype, b_qsubtype = (b.get(k) or none for k in ("answer_text", "qtype", "qsubtype"))
    b_dataset, b_chart = (b.get(k) or none for k in ("dataset", "chart_type"))
    for i, (id_, qtype, qsubtype, answer, answer_text, question, dataset, chart_type, source_id, bucket) in enumerate(zip(
            base_ids, b_qtype, b_qsubtype, b_answer, b_answer_text, b.get("question") or none, b_dataset, b_chart,
            b.get("source_id") or none, b.get("token_bucket") or none)):
        refs.append(Reference(
            id_, "base", id_, BASE_CONFIG, qtype or "", qsubtype or "", tuple(answer), answer_text or ", ".join(answer), i,
            question or "", dataset or "", chart_type or "", source_id or "", bucket if isinstance(bucket, str) else "",
        ))
    item_of = {id_: i for i, id_ in enumerate(base_ids)}

    def item_value(column: str, i: int | None, default: Any) -> Any:
        """``base[item].get(column, default)`` as a row dict would give it (None where the row holds None)."""
        if i is None or column not in b:
            return default
        return b[column][i]

    for sub in subsets:
        if sub == "base":
            continue
        c = columns[sub]
        row_ids: list[str] = c.get("id") or []
        if not row_ids:
            continue
        none = [None] * len(row_ids)
        configs = c["config"] if sub == CONFIGURATIONS else c["perturbation"]
        for i, (id_, item_id, config, qtype, qsubtype, answer_list, question, chart_type) in enumerate(zip(
                row_ids, c["item_id"], configs, c.get("qtype") or none, c.get("qsubtype") or none, c["answer"],
                c.get("question") or none, c.get("chart_type") or none)):
            k = item_of.get(item_id)
            answer = tuple(answer_list)
            # A variant whose gold is the item's keeps the item's own answer text (a chart's references).
            same = k is not None and tuple(item_value("answer", k, ())) == answer
            text = item_value("answer_text", k, "") if same else ", ".join(answer)
            refs.append(Reference(
                id_, sub, item_id, config, qtype or item_value("qtype", k, ""), qsubtype or item_value("qsubtype", k, ""), answer,
                text, i, question or "", item_value("dataset", k, None) or "", chart_type or item_value("chart_type", k, None) or "",
            ))
    return Release(root, manifest, refs, _offsets=offsets)


def _holds(path: Path, ids: Collection[str]) -> bool:
    """Whether the ``id`` column of one subset's Parquet file holds one of ``ids`` (a subset no
    prediction names is not read further: most of a release's rows are prompts of the grid)."""
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as parquet:
            if "id" not in parquet.schema_arrow.names:
                return True  # read whole, as without ``ids``: what is missing shows there
            _check_types(parquet.schema_arrow, ["id"], path)
            column = parquet.read(columns=["id"]).column("id")
    except (OSError, ValueError) as exc:
        raise EvaluateError(f"cannot read {path}: {exc}", hint="rebuild the release") from None
    return any(id_ in ids for id_ in column.to_pylist())


def _subset_columns(root: Path, manifest: dict[str, Any], subset: str, offsets: dict[str, list[int]]) -> dict[str, list[Any]]:
    """The scoring columns of one subset: from its JSON Lines file when that is small (then its rows'
    offsets go into ``offsets``), else from its Parquet file (:data:`JSONL_READ_BYTES`)."""
    entry = f"data/{subset}.jsonl"
    if entry in manifest["files"]:
        path = subset_file(root, manifest, subset, "jsonl")
        try:
            small = os.stat(path).st_size <= JSONL_READ_BYTES
        except OSError:
            small = False  # verified a moment ago: the Parquet file says what is wrong
        if small:
            columns, offsets[subset] = _jsonl_columns(path)
            return columns
    return _columns(subset_file(root, manifest, subset, "parquet"))


def _jsonl_columns(path: Path) -> tuple[dict[str, list[Any]], list[int]]:
    """The scoring columns of one subset's JSON Lines file (as :func:`_columns` gives them from its
    Parquet twin: a column no row has is left out, a row without it holds None) and the byte offset of
    each row's line. Each row must be an object whose scoring columns hold strings (``answer`` a list
    of strings), as the Parquet schema has them: a release rewritten with its manifest is still input."""
    values: dict[str, list[Any]] = {name: [] for name in _COLUMNS}
    seen: set[str] = set()
    offsets: list[int] = []
    try:
        for number, at, row in read_json_lines_at(path, max_bytes=JSONL_READ_BYTES):
            if not isinstance(row, dict):
                raise ValueError(f"line {number} is not a JSON object")
            seen.update(row)
            offsets.append(at)
            for name, column in values.items():
                value = row.get(name)
                if value is not None and not _plain_value(name, value):
                    raise ValueError(f"line {number}: {name} is not {'a list of strings' if name == 'answer' else 'a string'}")
                column.append(value)
    except ReaderError as exc:
        raise EvaluateError(f"cannot read {path}: line {exc.line}: {exc.problem}", hint="rebuild the release") from None
    except ValueError as exc:
        raise EvaluateError(f"cannot read {path}: {exc}", hint="rebuild the release") from None
    return {name: column for name, column in values.items() if name in seen}, offsets


def _plain_value(name: str, value: object) -> bool:
    """Whether a scoring column's value has the type the Parquet schema gives it."""
    if name == "answer":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, str)


def _columns(path: Path) -> dict[str, list[Any]]:
    """The scoring columns of one subset's Parquet file, each a list (checked by the manifest already)."""
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not pq.read_table: that one imports pyarrow.dataset, and with it pandas.
        with pq.ParquetFile(path) as parquet:
            names = parquet.schema_arrow.names
            wanted = [c for c in _COLUMNS if c in names]
            _check_types(parquet.schema_arrow, wanted, path)
            table = parquet.read(columns=wanted)
            columns: dict[str, list[Any]] = {name: table.column(name).to_pylist() for name in table.column_names}
    except (OSError, ValueError) as exc:
        raise EvaluateError(f"cannot read {path}: {exc}", hint="rebuild the release") from None
    return columns


def _check_types(schema: Any, names: list[str], path: Path) -> None:
    """Refuse a Parquet file whose scoring columns are not what the release writes (text; ``answer``
    a list of text; a column of nulls only): a release rewritten with its manifest is still input,
    and a number where text belongs would fail deep in the scoring."""
    import pyarrow as pa

    def text(t: Any) -> bool:
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t))

    for name in names:
        t = schema.field(name).type
        if name == "answer":
            ok = pa.types.is_null(t) or ((pa.types.is_list(t) or pa.types.is_large_list(t)) and text(t.value_type))
        else:
            ok = text(t)
        if not ok:
            raise EvaluateError(f"{path}: column {name} holds {t}, not {'lists of text' if name == 'answer' else 'text'}",
                                hint="rebuild the release")


def _method(value: object, path: Path, number: int) -> str:
    try:
        methods = parse_methods(str(value or "DP"))
    except ConfigError as exc:
        raise EvaluateError(f"{path}:{number}: {escape_controls(exc.args[0], lines=False)}",
                            hint=f"method (or instruction_type) is one of {', '.join(METHODS)}") from None
    if len(methods) != 1:
        raise EvaluateError(f"{path}:{number}: one method per prediction, got {escape_controls(repr(value), lines=False)}",
                            hint=f"one of {', '.join(METHODS)}")
    return methods[0].value


def read_predictions(path: Path, *, model: str | None = None) -> list[Prediction]:
    """Every prediction of ``path`` (module docs); ``model`` names those that do not name one
    (default: the file's name without extension)."""
    out: list[Prediction] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    default_model = model or path.stem
    # A model name is shown everywhere (terminal, scores.json, plots): kept with its control
    # characters escaped, once, so that every place shows the same inert text.
    for number, row in _read_jsonl(path):
        if not isinstance(row, dict):
            raise EvaluateError(f"{path}:{number}: a prediction is a JSON object, got {type(row).__name__}")
        if "id" not in row or "prediction" not in row:
            missing = " and ".join(k for k in ("id", "prediction") if k not in row)
            raise EvaluateError(f"{path}:{number}: no {missing}", hint="each line needs an id (a release row's id) and the model's prediction")
        text = row["prediction"]
        if text is None:
            text = ""  # a failed request: scored as unanswered
        if not isinstance(text, str):
            raise EvaluateError(f"{path}:{number}: prediction is {type(text).__name__}, not text", hint="give the model's reply as a string")
        name = escape_controls(str(row.get("model") or row.get("model_name") or default_model), lines=False)
        method = _method(row.get("method") or row.get("instruction_type"), path, number)
        prediction = Prediction(number, str(row["id"]), name, method, text, str(row.get("qsubtype") or ""))
        key = (prediction.model, prediction.method, prediction.id, prediction.qsubtype)
        if key in seen:
            raise EvaluateError(
                f"{path}:{number}: a second prediction of {prediction.model}/{prediction.method} for "
                f"{escape_controls(prediction.id, lines=False)} (first at line {seen[key]})",
                hint="keep one prediction per model, method and id",
            )
        seen[key] = number
        out.append(prediction)
    if not out:
        raise EvaluateError(f"{path}: no predictions", hint="one JSON object per line with id and prediction")
    return out


def match(release: Release, predictions: list[Prediction]) -> Matched:
    """Pair each prediction with its reference: by row id, else by the item's source id (TableBench's
    ``id``), with ``qsubtype`` deciding between items that share one."""
    by_id = {ref.id: ref for ref in release.references}
    by_source: dict[str, list[Reference]] = {}
    for row in release.references:
        if row.subset == "base" and row.source_id:
            by_source.setdefault(row.source_id, []).append(row)
    out = Matched()
    for p in predictions:
        ref: Reference | None = by_id.get(p.id)
        if ref is None:
            candidates = by_source.get(p.id, [])
            if len(candidates) > 1:
                candidates = [c for c in candidates if c.qsubtype == p.qsubtype]
            ref = candidates[0] if len(candidates) == 1 else None
        if ref is None:
            out.unmatched.append(p)
        else:
            out.pairs.append((ref, p))
    return out
