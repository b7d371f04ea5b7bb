"""The workspace: a directory with ``tqaforge.toml`` and (by default) a SQLite database.

Every command works on the workspace in the current directory (or a parent of it), or the one
named by ``--workspace DIR``. ``TQAFORGE_DATABASE_URL`` (or ``[database] url`` in the config)
points the same workspace at PostgreSQL instead of the SQLite file.

This module is the one place that reads ``tqaforge.toml``: :func:`load_config` checks every
section and key and gives typed sections (:class:`WorkspaceConfig` ``.llm``, ``.generation``,
...), which the functions that use them read; no other module reads the TOML itself.
:class:`WorkspacePaths` is the one place that decides where a workspace keeps its files.

**Unknown keys are refused**, in every section and at the top level: :class:`ConfigError`
names the file, the section and the key, and lists the keys that section knows. A misspelt
key (``per_rounds``) silently ignored would leave a setting at its default without a word;
refusing it costs one edit. Sections reserved for stages still to come (``[sandbox]``,
``[answers]``, ``[release]``) know no keys yet.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Self

from tqaforge.errors import ConfigError, TaxonomyError, WorkspaceNotFound
from tqaforge.files import atomic_write_text
from tqaforge.redact import redact_url, url_has_secret
from tqaforge.schemas.taxonomy import BUILTIN, Taxonomy, custom_taxonomy

CONFIG_NAME = "tqaforge.toml"
DB_NAME = "tqaforge.db"
DATABASE_ENV = "TQAFORGE_DATABASE_URL"

DEFAULT_CONFIG = """\
# tqaforge workspace configuration. Edit freely; a key tqaforge does not know is refused, naming it.

[workspace]
name = {name}
# Built-in taxonomies: "tablebench" (4 types / 18 subtypes), "freb-tqa" (extraction /
# reasoning) and "capability" (4 stages / 10 capabilities). To use your own, set taxonomy = "custom" and list categories below:
# [[taxonomy.category]]
# type = "Lookup"
# subtype = "SingleCell"
taxonomy = {taxonomy}

[database]
# Empty: the SQLite file {db} in this directory. For PostgreSQL:
# url = "postgresql+psycopg://user@127.0.0.1:5432/dbname"
# The environment variable {env} overrides this.
url = {url}

[llm]
# Any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp server. The environment
# (OPENAI_BASE_URL, OPENAI_API_KEY, TQAFORGE_LLM_MODEL) overrides these; CLI options override both.
# model = "gpt-4o-mini"
# base_url = "http://127.0.0.1:8000/v1"  # unset: OpenAI
# base_urls = ["http://gpu1:8000/v1", "http://gpu2:8000/v1"]  # several endpoints (replaces base_url)
# endpoint_concurrency = 8               # requests in flight per endpoint (default: concurrency)
# endpoint_failures = 3                  # failures in a row (connection, timeout, 5xx): endpoint down
# endpoint_cooldown_s = 30               # then left alone this long before one request probes it
# api_key_env = "OPENAI_API_KEY"         # the variable holding the key (never the key itself)
# concurrency = 8                        # requests in flight at once
# requests_per_minute = 500
# tokens_per_minute = 200000
# max_retries = 5                        # on 429, 5xx, timeouts and connection errors
# timeout_s = 60
# max_cost = 5.0                         # USD per run; the run stops before it would pass this
# batch_discount = 0.5                   # Batch API price / online price, for [llm.prices] entries
# Prices (USD per million tokens) come from the genai-prices library bundled with tqaforge; an
# entry here overrides it for that model. With max_cost set, a model with no price is refused.
# [llm.prices."gpt-4o-mini"]
# input = 0.15
# output = 0.60
# batch_input = 0.075                   # optional: the Batch API rates (default: x batch_discount)
# batch_output = 0.30

# [generation]              # question generation; `generate questions` options override these
# per_round = 5             # questions asked for per (round, subtype, table)
# target = 50               # accepted + seed questions per subtype before routing starts
# few_shot = 3              # seed questions shown per prompt (seed corpus: seeds.toml here)
# serialization = "markdown"
# rouge_threshold = 0.7     # ROUGE-L at or above which a new question is a duplicate
# dedup_scope = "subtype"   # or "table"
# human_share = 0.3         # past the target: share kept for people, the rest to the verifier

# [labelstudio]             # the local Label Studio server (`tqaforge labelstudio start`, `tqaforge serve`)
# port = 8080               # on 127.0.0.1; --port (--ls-port for serve) overrides it
# overlap = {{ question_review = 2, answer_verification = 2 }}   # annotators per task, per kind; --overlap
# venv = ".venv-ls"         # its virtualenv (relative: to this directory); TQAFORGE_LABEL_STUDIO_VENV
#                           # overrides it; unset: .venv-ls of a source checkout, else label-studio on PATH
"""


#: Bigger than any config or seed corpus a person writes; a bound so that a mistaken path (a
#: dump, a device) fails at once instead of filling memory.
MAX_TOML_BYTES = 16 * 1024 * 1024

_TOML_ERROR_AT = re.compile(r"\(at line (\d+), column (\d+)\)|\(at end of document\)")


def read_text_file(path: str | PathLike[str], *, what: str, max_bytes: int = MAX_TOML_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``; ``what`` names it in errors ("config file").

    Raises :class:`ConfigError` naming the file when it is missing, not a regular file (a FIFO or
    a device would block or never end), larger than ``max_bytes``, or not UTF-8 (with the byte
    offset, line and column of the first bad byte).
    """
    where = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such {what}", hint="check the path") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the {what}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"{where}: the {what} is not a regular file ({_file_kind(info.st_mode)})",
            hint=f"point tqaforge at a plain text file; move the {_file_kind(info.st_mode)} away",
        )
    if info.st_size > max_bytes:
        raise ConfigError(
            f"{where}: the {what} is {info.st_size:,} bytes, more than the {max_bytes:,} allowed",
            hint="this is not a file a person wrote; check the path",
        )
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)  # a file that grew after stat() is still bounded
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the {what}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{where}: the {what} is more than the {max_bytes:,} bytes allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{where}, line {line}, column {column}: the {what} is not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint=f"save the file as UTF-8, e.g. iconv -f latin1 -t utf-8 {where} > fixed.toml",
        ) from None


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def parse_toml(text: str, *, where: str, hint: str | None = None) -> dict[str, Any]:
    """Parse TOML text; a syntax error becomes a :class:`ConfigError` with ``where`` and the line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_ERROR_AT.search(message)
        problem = message[: match.start()].strip() if match else message
        if match and match.group(1):
            at = f", line {match.group(1)}, column {match.group(2)}"
        else:
            at = ", at end of file" if match else ""
        raise ConfigError(
            f"{where}{at}: invalid TOML: {problem}",
            hint=hint or 'check quoting ("..."), brackets and that each key = value is on its own line',
        ) from None


def load_toml(path: str | PathLike[str], *, what: str, hint: str | None = None) -> dict[str, Any]:
    """Read and parse a TOML file: :func:`read_text_file` then :func:`parse_toml`.

    Every TOML file tqaforge reads (``tqaforge.toml``, ``seeds.toml``, corpora) goes through here.
    """
    return parse_toml(read_text_file(path, what=what), where=str(path), hint=hint)


def describe_value(value: object) -> str:
    """``value`` for an error message: its TOML kind and a short repr ("integer 7")."""
    kinds = ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"),
             (list, "array"), (dict, "table"))
    kind = next((name for typ, name in kinds if isinstance(value, typ)), type(value).__name__)
    text = repr(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def expect(value: object, typ: type | tuple[type, ...], *, where: str, key: str, expected: str) -> Any:
    """``value`` if it is a ``typ`` (booleans are never numbers); else ConfigError
    "WHERE: KEY: expected EXPECTED, got KIND VALUE"."""
    wrong_bool = isinstance(value, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,))
    if not isinstance(value, typ) or wrong_bool:
        raise ConfigError(
            f"{where}: {key}: expected {expected}, got {describe_value(value)}",
            hint=f"fix {key} in {where}; the commented default config (tqaforge init) shows every key",
        )
    return value


_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_string(value: str) -> str:
    r"""``value`` as a TOML basic string (double-quoted, escaped).

    >>> print(toml_string('say "hi"\n'))
    "say \"hi\"\n"
    """
    parts = ['"']
    for ch in value:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            parts.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            parts.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ConfigError(
                f"cannot write the lone surrogate U+{code:04X} to TOML",
                hint="seed texts must be valid Unicode",
            )
        else:
            parts.append(ch)
    parts.append('"')
    return "".join(parts)


# --- typed sections -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kind:
    """What a key holds: the TOML types it accepts and how an error message names them."""

    types: tuple[type, ...]
    expected: str


_STRING = _Kind((str,), "a string")
_INTEGER = _Kind((int,), "an integer")
_NUMBER = _Kind((int, float), "a number")  # an integer is taken as a float
_TABLE = _Kind((dict,), "a table")
_STRINGS = _Kind((list,), "a list of strings")


def _key(kind: _Kind, doc: str) -> Any:
    """A section field: None when the file does not set it (TOML has no null, so None is free)."""
    return field(default=None, metadata={"kind": kind, "doc": doc})


def _section(raw: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    value = raw.get(name, {})
    return expect(value, dict, where=where, key=name, expected=f"a table ([{name}])")


@dataclass(frozen=True)
class Section:
    """One ``[NAME]`` table of ``tqaforge.toml``, its keys checked and typed.

    A field is None when the file does not set that key; the defaults live with the code that
    uses the section (e.g. :class:`~tqaforge.generation.questions.GenerationOptions`), so a
    section says only what the file says.
    """

    NAME: ClassVar[str]

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str) -> Self:
        """``raw[NAME]`` checked: a table, no unknown keys, every value of its key's type."""
        table = _section(raw, cls.NAME, where)
        known = {f.name: f for f in fields(cls)}
        for key in table:
            if key not in known:
                raise ConfigError(
                    f"{where}: unknown key {key!r} in [{cls.NAME}]",
                    hint=(f"known keys: {', '.join(known)}" if known else f"[{cls.NAME}] has no keys yet")
                    + f"; fix or remove {key!r} (tqaforge refuses keys it does not read, so a misspelt "
                    "one never goes unnoticed)",
                )
        values: dict[str, Any] = {}
        for key, value in table.items():
            kind: _Kind = known[key].metadata["kind"]
            value = expect(value, kind.types, where=where, key=f"[{cls.NAME}] {key}", expected=kind.expected)
            if kind is _STRINGS:
                for i, item in enumerate(value):
                    expect(item, str, where=where, key=f"[{cls.NAME}] {key}[{i}]", expected="a string")
            values[key] = float(value) if kind is _NUMBER else value
        return cls(**values)

    def values(self) -> dict[str, Any]:
        """The keys the file sets, with their values (unset keys left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class WorkspaceSection(Section):
    """``[workspace]``: what the workspace is called and which taxonomy it uses."""

    NAME: ClassVar[str] = "workspace"
    name: str | None = _key(_STRING, "display name; default: the directory's name")
    taxonomy: str | None = _key(_STRING, 'a built-in taxonomy or a custom one; default "tablebench"')


@dataclass(frozen=True)
class DatabaseSection(Section):
    """``[database]``: where the records live (``TQAFORGE_DATABASE_URL`` overrides it)."""

    NAME: ClassVar[str] = "database"
    url: str | None = _key(_STRING, "SQLAlchemy URL; empty or unset: the workspace's SQLite file")


@dataclass(frozen=True)
class LLMSection(Section):
    """``[llm]``: the endpoint and its limits, as the file writes them.

    :func:`tqaforge.llm.gateway.load_llm_settings` layers the environment and CLI options on top
    and checks the values (ranges, prices). The key names are the fields of ``LLMSettings``
    (a test keeps the two lists equal), plus ``api_key_env``.
    """

    NAME: ClassVar[str] = "llm"
    model: str | None = _key(_STRING, "model name")
    base_url: str | None = _key(_STRING, "OpenAI-compatible endpoint; unset: OpenAI")
    base_urls: list[str] | None = _key(_STRINGS, "several endpoints, requests spread over them (replaces base_url)")
    endpoint_concurrency: int | None = _key(_INTEGER, "requests in flight per endpoint; default: concurrency")
    endpoint_failures: int | None = _key(_INTEGER, "failures in a row that mark an endpoint down")
    endpoint_cooldown_s: float | None = _key(_NUMBER, "seconds a down endpoint is left alone before a probe")
    api_key_env: str | None = _key(_STRING, "the environment variable holding the API key")
    # Known so that load_llm_settings can refuse it with the fix (name a variable instead)
    # when the key is needed, rather than every command refusing the whole config.
    api_key: str | None = _key(_STRING, "refused: keys do not belong in files")
    concurrency: int | None = _key(_INTEGER, "requests in flight at once")
    requests_per_minute: float | None = _key(_NUMBER, "request rate limit")
    tokens_per_minute: float | None = _key(_NUMBER, "token rate limit")
    max_retries: int | None = _key(_INTEGER, "retries on 429, 5xx, timeouts and connection errors")
    timeout_s: float | None = _key(_NUMBER, "seconds a whole request may take")
    max_cost: float | None = _key(_NUMBER, "USD per run")
    backoff_s: float | None = _key(_NUMBER, "first retry's wait")
    backoff_max_s: float | None = _key(_NUMBER, "longest retry wait")
    malformed_retries: int | None = _key(_INTEGER, "retries of replies with no usable content")
    default_max_tokens: int | None = _key(_INTEGER, "max_tokens sent when a call sets none: its worst case for the budget")
    max_reply_bytes: int | None = _key(_INTEGER, "hard cap on a reply body")
    batch_discount: float | None = _key(_NUMBER, "Batch API price / online price for [llm.prices] entries")
    prices: dict[str, Any] | None = _key(_TABLE, "model -> {input, output, batch_input, batch_output} in USD per million tokens")


@dataclass(frozen=True)
class GenerationSection(Section):
    """``[generation]``: defaults of question generation (``generate questions`` options win).

    The key names are the fields of ``GenerationOptions`` that a file may set (a test keeps them
    equal); :func:`tqaforge.generation.questions.load_generation_options` checks the ranges.
    """

    NAME: ClassVar[str] = "generation"
    rounds: int | None = _key(_INTEGER, "rounds per run")
    per_round: int | None = _key(_INTEGER, "questions asked for per (round, subtype, table)")
    target: int | None = _key(_INTEGER, "accepted + seed questions per subtype before routing")
    few_shot: int | None = _key(_INTEGER, "seed questions shown per prompt")
    seed: int | None = _key(_INTEGER, "random seed")
    serialization: str | None = _key(_STRING, "table serialization in prompts")
    temperature: float | None = _key(_NUMBER, "sampling temperature")
    max_tokens: int | None = _key(_INTEGER, "reply length limit")
    rouge_threshold: float | None = _key(_NUMBER, "ROUGE-L at or above which a question is a duplicate")
    dedup_scope: str | None = _key(_STRING, '"subtype" or "table"')
    human_share: float | None = _key(_NUMBER, "share kept for people past the target")


@dataclass(frozen=True)
class LabelStudioSection(Section):
    """``[labelstudio]``: the local Label Studio server (``tqaforge labelstudio start``, ``tqaforge serve``).

    Its login is not configuration: it is drawn at random on the first start and kept in
    ``WORKSPACE/label-studio/credentials.json`` (see :mod:`tqaforge.annotation.labelstudio.manage`).
    """

    NAME: ClassVar[str] = "labelstudio"
    venv: str | None = _key(_STRING, "the virtualenv holding Label Studio; relative: to the workspace")
    port: int | None = _key(_INTEGER, "the port on 127.0.0.1; default 8080")
    overlap: dict[str, Any] | None = _key(_TABLE, "kind -> annotators per task; default 2 for every kind")

    def venv_path(self, root: Path) -> Path | None:
        """``venv`` as a path, a relative one taken from the workspace ``root``; None when unset."""
        return None if self.venv is None else root / Path(self.venv).expanduser()


@dataclass(frozen=True)
class SandboxSection(Section):
    """``[sandbox]``: limits of the sandbox that runs model-written code (PoT answers, charts).

    The key names are the fields of ``tqaforge.sandbox.Limits`` plus ``workers`` (a test keeps the
    lists equal); ``Limits`` checks the ranges.
    """

    NAME: ClassVar[str] = "sandbox"
    workers: int | None = _key(_INTEGER, "warm worker processes; default 2")
    cpu_seconds: float | None = _key(_NUMBER, "CPU seconds a program may use")
    wall_seconds: float | None = _key(_NUMBER, "seconds a program may take")
    memory_mb: int | None = _key(_INTEGER, "memory a program may add, MiB")
    file_mb: int | None = _key(_INTEGER, "largest file a program may write, MiB")
    open_files: int | None = _key(_INTEGER, "files a program may hold open")
    processes: int | None = _key(_INTEGER, "processes a program may run at once")
    output_bytes: int | None = _key(_INTEGER, "bytes of stdout (and of stderr) kept; more ends the program")


@dataclass(frozen=True)
class AnswersSection(Section):
    """``[answers]``: defaults of answer annotation (``generate answers`` options win).

    The key names are the fields of ``AnswerOptions`` that a file may set (a test keeps them
    equal); :func:`tqaforge.answers.annotate.load_answer_options` checks the values.
    """

    NAME: ClassVar[str] = "answers"
    methods: str | None = _key(_STRING, 'comma-separated reasoning methods; default "TCoT,SCoT,PoT"')
    samples: int | None = _key(_INTEGER, "replies per method and question")
    vote: str | None = _key(_STRING, '"unanimous" or "majority"')
    manual_share: float | None = _key(_NUMBER, "share of inconsistent answers routed to manual annotation")
    seed: int | None = _key(_INTEGER, "seed of the routing draw and of the requests")
    serialization: str | None = _key(_STRING, "table serialization in prompts")
    temperature: float | None = _key(_NUMBER, "sampling temperature")
    max_tokens: int | None = _key(_INTEGER, "reply length limit")


@dataclass(frozen=True)
class ReleaseSection(Section):
    """``[release]``: the agreement gate of ``release build`` (``tqaforge.release.build.thresholds``
    checks the values)."""

    NAME: ClassVar[str] = "release"
    min_agreement: float | None = _key(_NUMBER, "the threshold of every kind's gate statistic; default 0.6")
    min_agreement_by_kind: dict[str, Any] | None = _key(_TABLE, "kind -> its own threshold, e.g. relevant_cells = 0.5")


_SECTIONS: tuple[type[Section], ...] = (
    WorkspaceSection, DatabaseSection, LLMSection, GenerationSection,
    LabelStudioSection, SandboxSection, AnswersSection, ReleaseSection,
)
_TAXONOMY = "taxonomy"  # [[taxonomy.category]]: an array of tables, checked by _taxonomy_categories


def _taxonomy_categories(raw: Mapping[str, Any], where: str) -> tuple[dict[str, Any], ...]:
    """The ``[[taxonomy.category]]`` entries, each a table with non-empty ``type`` and ``subtype``."""
    taxonomy = _section(raw, _TAXONOMY, where)
    for key in taxonomy:
        if key != "category":
            raise ConfigError(
                f"{where}: unknown key {key!r} in [taxonomy]",
                hint='[taxonomy] holds only [[taxonomy.category]] entries with type = "..." and subtype = "..."',
            )
    categories = expect(
        taxonomy.get("category", []), list, where=where, key="[taxonomy] category",
        expected='an array of tables ([[taxonomy.category]] with type = "..." and subtype = "...")',
    )
    for n, entry in enumerate(categories, start=1):
        key = f"[[taxonomy.category]] {n}"
        expect(entry, dict, where=where, key=key, expected='a table with type = "..." and subtype = "..."')
        for field_name in ("type", "subtype"):
            if field_name not in entry:
                raise ConfigError(
                    f"{where}: {key}: missing {field_name!r}",
                    hint='write each category as [[taxonomy.category]] with type = "..." and subtype = "..."',
                )
            value = expect(entry[field_name], str, where=where, key=f"{key} {field_name}", expected="a string")
            if not value.strip():
                raise ConfigError(f"{where}: {key} {field_name}: expected a non-empty string, got ''")
    return tuple(categories)


def _refuse_unknown_sections(raw: Mapping[str, Any], where: str) -> None:
    known = [section.NAME for section in _SECTIONS] + [_TAXONOMY]
    for name in raw:
        if name not in known:
            raise ConfigError(
                f"{where}: unknown section or key {name!r}",
                hint=f"known sections: {', '.join(f'[{k}]' for k in known)}; fix or remove {name!r} "
                "(tqaforge refuses keys it does not read, so a misspelt one never goes unnoticed)",
            )


@dataclass(frozen=True)
class WorkspaceConfig:
    """The parsed ``tqaforge.toml``: one typed section per table (see :class:`Section`)."""

    name: str
    taxonomy_name: str
    database_url: str | None
    path: Path | None = None
    llm: LLMSection = field(default_factory=LLMSection)
    generation: GenerationSection = field(default_factory=GenerationSection)
    labelstudio: LabelStudioSection = field(default_factory=LabelStudioSection)
    sandbox: SandboxSection = field(default_factory=SandboxSection)
    answers: AnswersSection = field(default_factory=AnswersSection)
    release: ReleaseSection = field(default_factory=ReleaseSection)
    taxonomy_categories: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    def taxonomy(self) -> Taxonomy:
        """The workspace's taxonomy: a built-in one or the categories listed in the config."""
        if self.taxonomy_name in BUILTIN:
            return BUILTIN[self.taxonomy_name]
        where = str(self.path or CONFIG_NAME)
        if not self.taxonomy_categories:
            raise TaxonomyError(
                f"{where}: taxonomy {self.taxonomy_name!r} is not built in and the config lists no categories",
                hint="use one of " + ", ".join(BUILTIN) + " or add [[taxonomy.category]] entries",
            )
        return custom_taxonomy(self.taxonomy_name, self.taxonomy_categories, where=where)


def load_config(path: Path) -> WorkspaceConfig:
    """Read and check a ``tqaforge.toml``: UTF-8, valid TOML, no unknown section or key, every
    key of the right type (:class:`ConfigError` naming the file and key otherwise)."""
    raw = load_toml(path, what="config file")
    where = str(path)
    _refuse_unknown_sections(raw, where)
    workspace = WorkspaceSection.parse(raw, where)
    database = DatabaseSection.parse(raw, where)
    return WorkspaceConfig(
        name=workspace.name if workspace.name is not None else path.parent.name,
        taxonomy_name=workspace.taxonomy if workspace.taxonomy is not None else "tablebench",
        database_url=database.url or None,
        path=path,
        llm=LLMSection.parse(raw, where),
        generation=GenerationSection.parse(raw, where),
        labelstudio=LabelStudioSection.parse(raw, where),
        sandbox=SandboxSection.parse(raw, where),
        answers=AnswersSection.parse(raw, where),
        release=ReleaseSection.parse(raw, where),
        taxonomy_categories=_taxonomy_categories(raw, where),
    )


@dataclass(frozen=True)
class WorkspacePaths:
    """Where a workspace keeps each of its files: the one place that decides it.

    >>> WorkspacePaths(Path("/w")).reports
    PosixPath('/w/reports')
    """

    root: Path

    @property
    def config(self) -> Path:
        """``tqaforge.toml``."""
        return self.root / CONFIG_NAME

    @property
    def sqlite(self) -> Path:
        """The SQLite database file (used unless a database URL points elsewhere)."""
        return self.root / DB_NAME

    @property
    def seeds(self) -> Path:
        """The editable seed corpus, ``seeds.toml`` (written on first use)."""
        return self.root / "seeds.toml"

    @property
    def reports(self) -> Path:
        """Agreement reports (JSON and Markdown)."""
        return self.root / "reports"

    @property
    def prompts(self) -> Path:
        """Prompts files written for variants (``variants.jsonl`` and its metadata)."""
        return self.root / "prompts"

    @property
    def label_studio(self) -> Path:
        """The local Label Studio server's data directory (its database, uploads, log)."""
        return self.root / "label-studio"

    @property
    def releases(self) -> Path:
        """Frozen releases."""
        return self.root / "releases"

    @property
    def batches(self) -> Path:
        """Batch request files and the output and error files downloaded for them."""
        return self.root / "batches"

    @property
    def cache(self) -> Path:
        """What is computed from the store and kept to save time (the Agreement page's report):
        safe to delete, computed again when missing."""
        return self.root / ".cache"

    @property
    def app_users(self) -> Path:
        """The app's sign-in users (name, salt, scrypt hash; never a password), mode 0600."""
        return self.root / "app-users.json"

    @property
    def locks(self) -> Path:
        """Workspace-wide lock files (one per named lock)."""
        return self.root / ".locks"


def find_workspace_root(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` (default: cwd) holding ``tqaforge.toml``."""
    here = (start or Path.cwd()).resolve()
    if start is not None:
        # An explicit --workspace names the directory itself; don't wander upwards.
        if (here / CONFIG_NAME).is_file():
            return here
        raise WorkspaceNotFound(f"{here} is not a tqaforge workspace (no {CONFIG_NAME})")
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_NAME).is_file():
            return candidate
    raise WorkspaceNotFound(f"no {CONFIG_NAME} in {here} or any parent directory")


def resolve_database_url(paths: WorkspacePaths, config: WorkspaceConfig) -> str:
    """Environment first, then the config, then the workspace's SQLite file."""
    return os.environ.get(DATABASE_ENV) or config.database_url or f"sqlite:///{paths.sqlite}"


def write_default_config(
    root: Path, *, name: str, taxonomy: str = "tablebench", database_url: str | None = None
) -> Path:
    """Write a commented ``tqaforge.toml`` unless one exists; returns its path.

    A ``database_url`` with a password is refused: the file is no place for it (like API keys),
    and libpq takes it from ``PGPASSWORD`` or ``~/.pgpass``."""
    if taxonomy not in BUILTIN and taxonomy != "custom":
        raise ConfigError(
            f"unknown taxonomy {taxonomy!r}", hint="choose " + ", ".join([*BUILTIN, "custom"])
        )
    if database_url and url_has_secret(database_url):
        raise ConfigError(
            f"--database-url {redact_url(database_url)} holds a password, which would be written to {CONFIG_NAME}",
            hint=f"give the URL without it and the password in PGPASSWORD or ~/.pgpass, or set the whole URL in "
            f"{DATABASE_ENV} instead of passing --database-url",
        )
    path = WorkspacePaths(root).config
    if not path.exists():
        atomic_write_text(
            path,
            DEFAULT_CONFIG.format(
                # toml_string escapes quotes, backslashes and control characters, so any
                # directory name or URL gives a config that reads back as written.
                name=toml_string(name), taxonomy=toml_string(taxonomy), db=DB_NAME, env=DATABASE_ENV,
                url=toml_string(database_url or ""),
            ),
        )
    return path
