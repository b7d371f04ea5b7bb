"""Token length of a table, counted offline, and the capability-based TableBench's length buckets.

The tokenizer is ``bpe-openai`` (PyPI), a tiktoken-compatible BPE whose encodings ship inside
its package: nothing is downloaded at run time (tiktoken itself fetches its encodings over the
network the first time). The default encoding is OpenAI's ``cl100k_base`` (GPT-4, GPT-3.5);
``o200k_base`` (GPT-4o) is the other one the package ships (:data:`ENCODINGS`).

>>> count_tokens("hello world")
2
>>> t = Table.build(["Name", "Age"], [["Sophia", "26"], ["Aarav", "34"]])
>>> table_tokens(t, "csv")
14
>>> bucket_of(4096).name
'4-8k'

**Buckets.** The paper ("Large-table Understanding") bins tables by token length into
``<4k, 4-8k, 8-16k, 16-32k, >32k``. We read ``k`` as 1024, as model context windows are named
(the paper's "16k to 131k" models are 16,384 to 131,072 tokens), and every bucket as
``low <= n < high``: ``<4k`` is 0..4095 tokens, ``4-8k`` 4096..8191, ``8-16k`` 8192..16383,
``16-32k`` 16384..32767 and ``>32k`` 32768 and up (so a count of exactly 32768 is in ``>32k``).

**Long texts.** The tokenizer refuses a text of 1,000,000 characters or more and a result of more
than 200,000 tokens; :func:`count_tokens` counts a long text in pieces cut where the tokenizer's
pre-tokenizer always cuts (before a space that follows a non-space, after a line feed followed
by a character that is neither white space nor ``/``, between a letter or digit and ASCII
punctuation other than ``'``), so the sum of the pieces is the count of the whole. Only a run
of more than :data:`_PIECE` characters with no such place (one enormous word) is cut
elsewhere, where the count may differ from the whole's by a token.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tqaforge.errors import TokenCountError
from tqaforge.tables.serialize import SERIALIZATIONS, serialize
from tqaforge.tables.table import Table

#: The encoding used unless one is named.
DEFAULT_ENCODING = "cl100k_base"
#: The encodings whose data ship inside bpe-openai (its legacy gpt2/p50k ones need tiktoken).
ENCODINGS: tuple[str, ...] = ("cl100k_base", "o200k_base")
#: The serialization a table is counted in unless one is named.
DEFAULT_SERIALIZATION = "markdown"

#: Characters counted at once. The tokenizer refuses more than 200,000 tokens per call, and a
#: character is at most 4 UTF-8 bytes, each at most one token: 50,000 characters always fit.
_PIECE = 50_000

# Where the pre-tokenizers of cl100k_base and o200k_base always cut (the piece before ends at
# the match's end): between a non-space and a space; after a line feed whose next character is
# neither white space (which a run of white space would take) nor "/" (which o200k_base's
# punctuation rule ``[^\s\p{L}\p{N}]+[\r\n/]*`` takes after line feeds); and between a letter
# or digit and ASCII punctuation other than the apostrophe (o200k_base keeps "'s" with its word).
_CUT = re.compile(r"\S(?= )|\n(?=[^\s/])|[^\W_](?=[!-&(-/:-@\[-`{-~])")


@dataclass(frozen=True, slots=True)
class TokenBucket:
    """One length bucket: counts ``n`` with ``low <= n < high`` (``high=None``: no upper bound)."""

    name: str
    low: int
    high: int | None

    def holds(self, n: int) -> bool:
        return self.low <= n and (self.high is None or n < self.high)


K = 1024
#: The capability-based TableBench's five buckets, in order (bounds: see the module docstring).
BUCKETS: tuple[TokenBucket, ...] = (
    TokenBucket("<4k", 0, 4 * K),
    TokenBucket("4-8k", 4 * K, 8 * K),
    TokenBucket("8-16k", 8 * K, 16 * K),
    TokenBucket("16-32k", 16 * K, 32 * K),
    TokenBucket(">32k", 32 * K, None),
)
BUCKET_NAMES: tuple[str, ...] = tuple(b.name for b in BUCKETS)
#: The capability taxonomy's subtype of the large-table probes (schemas/taxonomy.py), whose
#: questions carry their table's bucket.
LARGE_TABLE = "LargeTableUnderstanding"


def check_count(n: object, what: str = "token count") -> int:
    """``n`` if it is a non-negative int (not a bool); else :class:`TokenCountError`."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TokenCountError(f"{what} must be a whole number, not {n!r}", hint="give an integer such as 40000")
    if n < 0:
        raise TokenCountError(f"{what} must not be negative, got {n}")
    return n


def bucket_of(n: int) -> TokenBucket:
    """The bucket a count of ``n`` tokens falls in."""
    check_count(n)
    for bucket in BUCKETS:
        if bucket.holds(n):
            return bucket
    raise AssertionError("the buckets cover every count")  # pragma: no cover


def bucket_named(name: str) -> TokenBucket:
    """The bucket called ``name`` (one of :data:`BUCKET_NAMES`)."""
    for bucket in BUCKETS:
        if bucket.name == name:
            return bucket
    raise TokenCountError(f"unknown token bucket {name!r}", hint="one of " + ", ".join(BUCKET_NAMES))


def check_encoding(name: str) -> str:
    """``name`` if it is one of :data:`ENCODINGS`; else :class:`TokenCountError` naming them."""
    if name not in ENCODINGS:
        raise TokenCountError(
            f"unknown token encoding {name!r}",
            hint="one of " + ", ".join(ENCODINGS) + " (the encodings bpe-openai ships; counting never downloads one)",
        )
    return name


def check_serialization(name: str) -> str:
    """``name`` if it is one of the serializations; else :class:`TokenCountError` naming them."""
    if name not in SERIALIZATIONS:
        raise TokenCountError(f"unknown serialization {name!r}", hint="one of " + ", ".join(SERIALIZATIONS))
    return name


@lru_cache(maxsize=None)
def encoding(name: str = DEFAULT_ENCODING) -> Any:
    """The tokenizer of encoding ``name`` (loaded once per process, about 0.1 s)."""
    check_encoding(name)
    import warnings

    with warnings.catch_warnings():
        # bpe-openai 0.1.4 reads its data with importlib.resources.open_binary (deprecated).
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai  # loaded on first use (about 1.5 s, all its encodings): most commands never count

        return bpe_openai.get_encoding(name)


def tokenizer_version() -> str:
    """``bpe-openai X.Y.Z``: the tokenizer package and its version (read without importing it)."""
    from importlib.metadata import version

    return f"bpe-openai {version('bpe-openai')}"


def encode(text: str, encoding_name: str = DEFAULT_ENCODING) -> list[int]:
    """The token ids of ``text``. Special-token spellings such as ``<|endoftext|>`` are plain
    text here, as they are in a table's cells. For texts shorter than :data:`_PIECE` characters."""
    return list(encoding(encoding_name).encode_ordinary(text))


def decode(tokens: Iterable[int], encoding_name: str = DEFAULT_ENCODING) -> str:
    """The text of ``tokens`` (the inverse of :func:`encode`)."""
    return str(encoding(encoding_name).decode(list(tokens)))


def _pieces(text: str, size: int) -> Iterable[str]:
    """``text`` in pieces of at most ``size`` characters, cut where the pre-tokenizer cuts."""
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = None
        for match in _CUT.finditer(text, start, end):  # the last cut within the window
            cut = match.end()
        if cut is None or cut <= start:
            cut = end  # one enormous word: see the module docstring
        yield text[start:cut]
        start = cut
    yield text[start:]


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING, *, _piece: int = _PIECE) -> int:
    """How many tokens ``text`` is in encoding ``encoding_name``; any length (see the module
    docstring for how a long text is counted)."""
    if not isinstance(text, str):
        raise TokenCountError(f"can only count the tokens of text, not of {type(text).__name__}")
    enc = encoding(encoding_name)
    return sum(len(enc.encode_ordinary(piece)) for piece in _pieces(text, _piece) if piece)


def table_tokens(
    table: Table, serialization: str = DEFAULT_SERIALIZATION, encoding_name: str = DEFAULT_ENCODING
) -> int:
    """How many tokens ``table`` is when serialized as ``serialization`` (header and rows only,
    as :func:`tqaforge.tables.serialize.serialize` writes it for a prompt)."""
    check_serialization(serialization)
    check_encoding(encoding_name)
    return count_tokens(serialize(table, serialization), encoding_name)


@dataclass(slots=True)
class BucketCounts:
    """How many tables fall in each bucket, per serialization, with the smallest and largest
    count seen in each (what ``tqaforge tables stats`` prints)."""

    encoding: str
    serializations: tuple[str, ...]
    tables: int = 0
    #: (serialization, bucket name) -> [tables, min tokens, max tokens]
    cells: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def add(self, serialization: str, n: int) -> None:
        """Count one table of ``n`` tokens in ``serialization``."""
        key = (serialization, bucket_of(n).name)
        cell = self.cells.get(key)
        if cell is None:
            self.cells[key] = [1, n, n]
        else:
            cell[0] += 1
            cell[1] = min(cell[1], n)
            cell[2] = max(cell[2], n)

    def count(self, serialization: str, bucket: str) -> int:
        return self.cells.get((serialization, bucket), [0])[0]

    def rows(self) -> list[list[str]]:
        """A row per bucket: its name, then per serialization ``tables (min-max)``."""
        out = []
        for bucket in BUCKET_NAMES:
            row = [bucket]
            for fmt in self.serializations:
                cell = self.cells.get((fmt, bucket))
                row.append(f"{cell[0]} ({cell[1]}-{cell[2]})" if cell else "0")
            out.append(row)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The counts as JSON-able data: per serialization, per bucket ``{tables, min, max}``."""
        return {
            "encoding": self.encoding,
            "tables": self.tables,
            "buckets": [
                {"name": b.name, "low": b.low, "high": b.high} for b in BUCKETS
            ],
            "counts": {
                fmt: {
                    name: dict(zip(("tables", "min", "max"), self.cells.get((fmt, name), [0, None, None])))
                    for name in BUCKET_NAMES
                }
                for fmt in self.serializations
            },
        }

    def lines(self) -> list[str]:
        """The buckets as plain text lines (a header line, then a line per bucket)."""
        header = ["tokens", *self.serializations]
        body = self.rows()
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        lines = [f"{self.tables} tables; tokens in {self.encoding} (bpe-openai), buckets of 1024 tokens, low <= n < high"]
        for row in [header, *body]:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        return lines


def pick_per_bucket(
    counts: Mapping[str, int], per_bucket: int, seed: int, buckets: Iterable[str] = BUCKET_NAMES
) -> dict[str, list[str]]:
    """Up to ``per_bucket`` ids per bucket of ``counts`` (id -> tokens), drawn with ``seed``.

    Deterministic: the same counts, ``per_bucket`` and seed give the same picks, whatever the
    order of ``counts`` (ids are sorted before the draw). A bucket with fewer tables gives all it
    has; every bucket asked for is a key of the result, in :data:`BUCKETS` order, its ids sorted.
    """
    check_count(per_bucket, "tables per bucket")
    check_count(seed, "seed")
    wanted = [bucket_named(name) for name in buckets]
    wanted.sort(key=BUCKETS.index)
    by_bucket: dict[str, list[str]] = {b.name: [] for b in wanted}
    for table_id, n in counts.items():
        name = bucket_of(n).name
        if name in by_bucket:
            by_bucket[name].append(table_id)
    rng = random.Random(seed)
    picked: dict[str, list[str]] = {}
    for name, ids in by_bucket.items():
        ids.sort()
        picked[name] = sorted(rng.sample(ids, per_bucket)) if len(ids) > per_bucket else ids
    return picked


__all__ = [
    "BUCKETS",
    "BUCKET_NAMES",
    "BucketCounts",
    "DEFAULT_ENCODING",
    "DEFAULT_SERIALIZATION",
    "ENCODINGS",
    "LARGE_TABLE",
    "TokenBucket",
    "TokenCountError",
    "bucket_named",
    "bucket_of",
    "check_count",
    "check_encoding",
    "check_serialization",
    "count_tokens",
    "decode",
    "encode",
    "encoding",
    "pick_per_bucket",
    "table_tokens",
    "tokenizer_version",
]
