"""Writing a release's files in bounded memory: rows in, JSONL and Parquet out, hashed as written.

>>> with SubsetWriter(root, "base", spill=root / ".spill") as writer:   # doctest: +SKIP
...     for row in rows:                                                  # sorted by id
...         writer.add(row)
>>> writer.hashes                                                         # doctest: +SKIP
{"data/base.jsonl": "...", "data/base.parquet": "..."}

**JSONL** is written a batch at a time, each line as :func:`~tqaforge.ids.canonical_json` makes
it, so its bytes do not depend on the batching. **Parquet** cannot be written before its schema
is known, and the schema is inferred from every row (as ``pyarrow.Table.from_pylist`` over the whole subset would:
a column empty everywhere is ``list<null>``, say), so each batch of at most
:data:`ROW_GROUP_BYTES` of JSON becomes an Arrow table spilled to a temporary file; at the end
the batches' schemas are unified and each batch, cast to that schema, is one row group. A subset
that fits in one batch is written exactly as the in-memory build wrote it (one row group, the
same bytes); a larger one has several row groups where the in-memory build had one: the same
columns and values (``pyarrow.parquet.read_table`` gives equal tables), not the same bytes.
Either way the same rows always give the same bytes: the boundaries are a function of the rows.

:class:`SortedSpill` is an external sort for rows made in another order than the file's (the
configurations subset is sorted by prompt id, a hash), given as :class:`EncodedRow`: runs of at
most :data:`RUN_BYTES` of rows on disk, merged.

**Rows made as their lines** (:class:`EncodedRow`): a subset whose columns are known in advance
(the configurations: 35 rows an item, ten columns of each the same for seven of them) can be
given as JSON Lines lines made where the rows are made (:class:`RowTemplate` encodes what the
rows of one table share once), with the Arrow schema the writer would have inferred from those
rows (its ``schema`` function of :attr:`EncodedRow.shape`). The line is then the only copy of a
row: the external sort moves it (no ``marshal`` of the row's nested lists), the JSON Lines file
takes it as it is, and each Parquet batch is parsed from the batch's lines by Arrow's JSON reader
with that schema: the same table as ``from_pylist`` of the rows, the same Parquet bytes (tests),
in about a quarter of the time.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import marshal
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Callable, Iterator, Mapping, Sequence

from tqaforge.ids import canonical_json, encode_json_string

#: JSON bytes of the rows held (and written as one Parquet row group) at once. Measured on
#: TableBench's release (``benchmarks/release.py``): peak RSS 239 MB at 2 MB, 249 MB at 4 MB,
#: 293 MB at 8 MB; smaller row groups compress less (its configurations file: 33.7, 31.2 and
#: 28.6 MB; 24.2 MB in one row group).
ROW_GROUP_BYTES = 2 * 1024 * 1024
#: Marshalled bytes of the rows an external sort holds before it writes a sorted run.
RUN_BYTES = 4 * 1024 * 1024
#: Runs merged at once (and at most this many files open a level at the end, each with a read
#: buffer of :data:`READ_BUFFER`: 4 MB at most a level). Every merge writes the rows again: at 16,
#: TableBench x10's configurations (about 370 runs) went through three levels; at 64, through one
#: merge for most rows and the final one (``benchmarks/release.py``).
FAN_IN = 64
READ_BUFFER = 64 * 1024
#: The largest batch of lines Arrow's JSON reader parses (its block size is an int32); a larger
#: one (a batch of one enormous row) is parsed in Python.
READER_MAX_BYTES = 1 << 30


class HashingFile:
    """A binary file written once, start to end, whose sha256 is taken over the bytes as they go
    (Parquet's writer takes it as a Python file: ``write``, ``tell``, ``flush``, ``close``)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = path.open("wb")
        self._sha = hashlib.sha256()
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._sha.update(data)
        self._size += len(data)
        return self._file.write(data)

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def write_file(root: Path, rel: str, data: bytes) -> str:
    """Write ``root/rel`` and return its sha256."""
    out = HashingFile(root / rel)
    try:
        out.write(data)
    finally:
        out.close()
    return out.hexdigest()


@dataclass(frozen=True, slots=True)
class EncodedRow:
    """A row as its JSON Lines line (module docs, "Rows made as their lines")."""

    #: ``canonical_json(row)`` and a line feed, in UTF-8.
    line: bytes
    #: The row's ``qsubtype`` (the manifest counts rows by it).
    subtype: str
    #: What the Arrow type of some columns depends on (which lists hold items), as bits: the
    #: argument of the subset's schema function, OR-ed over a batch.
    shape: int = 0


# A placeholder no text of the rows can hold as it is encoded: JSON writes a NUL as \u0000, and
# each placeholder is checked to occur exactly once in the encoded template.
_SLOT = "\x00{}\x00"


class RowTemplate:
    """``canonical_json`` of rows that share every value but a few strings, with the shared
    values encoded once: ``template(*values)`` is ``canonical_json({**fixed, **dict(zip(varying,
    values))})``, the same text, joined from the template's pieces and the values' encodings.

    >>> RowTemplate({"b": [1], "d": None}, ("c", "a"))("x", "y")
    '{"a":"y","b":[1],"c":"x","d":null}'
    """

    def __init__(self, fixed: Mapping[str, Any], varying: Sequence[str]) -> None:
        self._fixed = dict(fixed)
        self._varying = tuple(varying)
        slots = {name: _SLOT.format(i) for i, name in enumerate(self._varying)}
        text = canonical_json({**self._fixed, **slots})
        marks = [encode_json_string(slot) for slot in slots.values()]
        self._pieces: list[str] | None = None
        self._order: list[int] = []
        if len(set(self._varying)) == len(self._varying) and not set(self._varying) & set(self._fixed) \
                and all(text.count(mark) == 1 for mark in marks):
            at = sorted((text.index(mark), i) for i, mark in enumerate(marks))
            pieces, start = [], 0
            for position, i in at:
                pieces.append(text[start:position])
                start = position + len(marks[i])
            pieces.append(text[start:])
            self._pieces, self._order = pieces, [i for _, i in at]

    def __call__(self, *values: str) -> str:
        """The row's canonical JSON (``values`` in the order of ``varying``: strings)."""
        if self._pieces is None or any(type(v) is not str for v in values):
            return canonical_json({**self._fixed, **dict(zip(self._varying, values, strict=True))})
        parts = [""] * (2 * len(self._order) + 1)
        parts[0::2] = self._pieces
        parts[1::2] = [encode_json_string(values[i]) for i in self._order]
        return "".join(parts)


class SubsetWriter:
    """``data/SUBSET.jsonl`` and ``data/SUBSET.parquet`` from rows given in file order (module docs).

    ``schema``: for a subset given as :class:`EncodedRow` (:meth:`add_encoded`), the Arrow schema
    ``pyarrow.Table.from_pylist`` would infer for a batch of its rows, from their OR-ed shapes."""

    def __init__(self, root: Path, subset: str, spill: Path, group_bytes: int | None = None,
                 schema: Callable[[int], Any] | None = None) -> None:
        self.subset = subset
        self.count = 0
        self.by_subtype: dict[str, int] = {}
        self.hashes: dict[str, str] = {}
        self._root = root
        self._spill = spill
        self._group_bytes = ROW_GROUP_BYTES if group_bytes is None else group_bytes
        self._jsonl = HashingFile(root / "data" / f"{subset}.jsonl")
        self._rows: list[dict[str, Any]] = []
        self._lines: list[bytes] = []
        self._held = 0
        self._spilled: list[Path] = []
        self._schemas: list[Any] = []
        self._last: Any = None  # the one batch's table while nothing was spilled
        self._schema = schema
        self._shape = 0  # the held encoded rows' shapes, OR-ed

    def __enter__(self) -> SubsetWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self._jsonl.close()

    def add(self, row: dict[str, Any]) -> None:
        """One row (rows come sorted: the writer keeps their order)."""
        line = (canonical_json(row) + "\n").encode("utf-8")  # sorted keys, no spaces, UTF-8 as it is
        self._rows.append(row)
        self._lines.append(line)
        self._held += len(line)
        self.count += 1
        subtype = row.get("qsubtype") or "(none)"
        self.by_subtype[subtype] = self.by_subtype.get(subtype, 0) + 1
        if self._held >= self._group_bytes:
            self._flush()

    def add_encoded(self, row: EncodedRow) -> None:
        """One row as its line (module docs); a writer takes rows one way only."""
        if self._schema is None or self._rows:
            raise ValueError(f"the {self.subset} writer takes rows as dicts, not as lines")
        self._lines.append(row.line)
        self._held += len(row.line)
        self._shape |= row.shape
        self.count += 1
        subtype = row.subtype or "(none)"
        self.by_subtype[subtype] = self.by_subtype.get(subtype, 0) + 1
        if self._held >= self._group_bytes:
            self._flush()

    def _batch(self) -> Any:
        """The held rows as an Arrow table (module docs)."""
        import pyarrow as pa

        if self._rows or self._schema is None:
            return pa.Table.from_pylist(self._rows)
        import pyarrow.json as pj

        schema = self._schema(self._shape)
        data = b"".join(self._lines)
        if len(data) >= READER_MAX_BYTES:
            return pa.Table.from_pylist([json.loads(line) for line in self._lines], schema=schema)
        # One block for the whole batch (the reader cuts blocks at line ends): one chunk, as
        # from_pylist gives.
        options = pj.ReadOptions(block_size=max(len(data) + 1, 1 << 20), use_threads=False)
        table = pj.read_json(pa.py_buffer(data), read_options=options,
                             parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"))
        return table.combine_chunks() if table.num_rows and table.column(0).num_chunks > 1 else table

    def _flush(self) -> None:
        import pyarrow as pa

        if not self._lines:
            return
        self._jsonl.write(b"".join(self._lines))
        table = self._batch()
        self._rows, self._lines, self._held, self._shape = [], [], 0, 0
        self._schemas.append(table.schema)
        if self._last is not None:  # a second batch: both go to disk until the schema is known
            self._spill_table(self._last)
        if self._spilled or self._last is not None:
            self._spill_table(table)
            self._last = None
        else:
            self._last = table
        del table
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed batches otherwise

    def _spill_table(self, table: Any) -> None:
        import pyarrow as pa

        self._spill.mkdir(parents=True, exist_ok=True)
        path = self._spill / f"{self.subset}-{len(self._spilled):05}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        self._spilled.append(path)

    def close(self) -> None:
        """Write the last batch and the Parquet file; ``hashes`` then holds both files' sha256."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._flush()
        self._jsonl.close()
        parquet = HashingFile(self._root / "data" / f"{self.subset}.parquet")
        try:
            if not self._spilled:  # one batch or none: written as the in-memory build wrote it
                table = self._last if self._last is not None else pa.table({"id": pa.array([], pa.string())})
                self._last = None
                pq.write_table(table, parquet, compression="zstd")
            else:
                schema = pa.unify_schemas(self._schemas, promote_options="permissive")
                with pq.ParquetWriter(parquet, schema, compression="zstd") as writer:
                    for path in self._spilled:
                        with pa.memory_map(str(path)) as source:
                            table = pa.ipc.open_stream(source).read_all()
                        writer.write_table(table if table.schema == schema else table.cast(schema))
                        del table
                        path.unlink()
        finally:
            parquet.close()
        self.hashes = {f"data/{self.subset}.jsonl": self._jsonl.hexdigest(), f"data/{self.subset}.parquet": parquet.hexdigest()}


class SortedSpill:
    """Rows (:class:`EncodedRow`) in any order in, out sorted by their keys, with at most
    :data:`RUN_BYTES` of them held.

    Sorted runs go to disk; :data:`FAN_IN` runs of one level are merged into one run of the next
    (so the files open at the end, and their read buffers, stay few whatever the rows' number)."""

    def __init__(self, spill: Path, name: str, run_bytes: int | None = None) -> None:
        self._spill = spill
        self._name = name
        self._run_bytes = RUN_BYTES if run_bytes is None else run_bytes
        self._held: list[tuple[str, bytes]] = []
        self._size = 0
        self._levels: list[list[Path]] = []  # the runs on disk, by level
        self._made = 0

    def add(self, key: str, row: EncodedRow) -> None:
        """A row, sorted by ``key``."""
        blob = _dump(row)
        self._held.append((key, blob))
        self._size += len(blob)
        if self._size >= self._run_bytes:
            self._write_run()

    def _path(self) -> Path:
        self._spill.mkdir(parents=True, exist_ok=True)
        self._made += 1
        return self._spill / f"{self._name}-run-{self._made:06}.run"

    def _write_run(self) -> None:
        self._held.sort(key=lambda pair: pair[0])
        path = self._path()
        with path.open("wb") as f:
            for key, blob in self._held:
                _put(f, key, blob)
        self._held, self._size = [], 0
        self._add_run(0, path)

    def _add_run(self, level: int, path: Path) -> None:
        while len(self._levels) <= level:
            self._levels.append([])
        self._levels[level].append(path)
        if len(self._levels[level]) >= FAN_IN:
            runs, self._levels[level] = self._levels[level], []
            merged = self._path()
            with merged.open("wb") as f:
                for key, blob in self._merge(runs):  # the rows stay marshalled: only their keys are compared
                    _put(f, key, blob)
            self._add_run(level + 1, merged)

    def _merge(self, runs: list[Path]) -> Iterator[tuple[str, bytes]]:
        files = [path.open("rb", buffering=READ_BUFFER) for path in runs]
        try:
            yield from heapq.merge(*(_records(f) for f in files), key=lambda pair: pair[0])
        finally:
            for f, path in zip(files, runs):
                f.close()
                path.unlink(missing_ok=True)

    def __iter__(self) -> Iterator[EncodedRow]:
        """The rows in key order."""
        if not self._levels:  # everything fitted: no file
            self._held.sort(key=lambda pair: pair[0])
            held, self._held = self._held, []
            for _, blob in held:
                yield _load(blob)
            return
        if self._held:
            self._write_run()
        for _, blob in self._merge([path for level in self._levels for path in level]):
            yield _load(blob)


_LENGTHS = struct.Struct("<II")


def _dump(row: EncodedRow) -> bytes:
    """A row as bytes: ``marshal`` of its fields (three times faster than ``pickle``), ``pickle``
    when marshal cannot hold them (a subtype that is a ``str`` subclass, say)."""
    fields = (row.line, row.subtype, row.shape)
    try:
        return b"m" + marshal.dumps(fields)
    except ValueError:
        return b"p" + pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)


def _load(blob: bytes) -> EncodedRow:
    """A row back from :func:`_dump` (only ever our own files of this process: never read from elsewhere)."""
    return EncodedRow(*(marshal.loads(blob[1:]) if blob[:1] == b"m" else pickle.loads(blob[1:])))


def _put(f: IO[bytes], key: str, blob: bytes) -> None:
    """One record of a run: the two lengths, the key (UTF-8), the marshalled row."""
    encoded = key.encode("utf-8")
    f.write(_LENGTHS.pack(len(encoded), len(blob)))
    f.write(encoded)
    f.write(blob)


def _records(f: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    """The records of a run, in order (the bytes read whole, then loaded: faster than loading
    from the file object)."""
    while True:
        head = f.read(_LENGTHS.size)
        if not head:
            return
        n_key, n_blob = _LENGTHS.unpack(head)
        yield f.read(n_key).decode("utf-8"), f.read(n_blob)
