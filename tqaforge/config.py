"""The workspace: a directory with ``tqaforge.toml`` and (by default) a SQLite database.

Every command works on the workspace in the current directory (or a parent of it), or the one
named by ``--workspace DIR``. ``TQAFORGE_DATABASE_URL`` (or ``[database] url`` in the config)
points the same workspace at PostgreSQL instead of the SQLite file.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from tqaforge.errors import ConfigError, TaxonomyError, WorkspaceNotFound
from tqaforge.files import atomic_write_text
from tqaforge.schemas.taxonomy import BUILTIN, Taxonomy, custom_taxonomy

CONFIG_NAME = "tqaforge.toml"
DB_NAME = "tqaforge.db"
DATABASE_ENV = "TQAFORGE_DATABASE_URL"

DEFAULT_CONFIG = """\
# tqaforge workspace configuration. Edit freely; unknown keys are kept for later versions.

[workspace]
name = {name}
# Built-in taxonomies: "tablebench" (4 types / 18 subtypes) and "freb-tqa" (extraction /
# reasoning). To use your own, set taxonomy = "custom" and list categories below:
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
# api_key_env = "OPENAI_API_KEY"         # the variable holding the key (never the key itself)
# concurrency = 8                        # requests in flight at once
# requests_per_minute = 500
# tokens_per_minute = 200000
# max_retries = 5                        # on 429, 5xx, timeouts and connection errors
# timeout_s = 60
# max_cost = 5.0                         # USD per run; the run stops before it would pass this
# Prices in USD per million tokens. A model without a price costs 0 and max_cost never stops it.
# [llm.prices."gpt-4o-mini"]
# input = 0.15
# output = 0.60

# [generation]              # question generation; `generate questions` options override these
# per_round = 5             # questions asked for per (round, subtype, table)
# target = 50               # accepted + seed questions per subtype before routing starts
# few_shot = 3              # seed questions shown per prompt (seed corpus: seeds.toml here)
# serialization = "markdown"
# rouge_threshold = 0.7     # ROUGE-L at or above which a new question is a duplicate
# dedup_scope = "subtype"   # or "table"
# human_share = 0.3         # past the target: share kept for people, the rest to the verifier
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


def _section(raw: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = raw.get(name, {})
    return expect(value, dict, where=where, key=name, expected=f"a table ([{name}])")


def _validate_config(raw: dict[str, Any], where: str) -> None:
    """Type-check every section and key tqaforge reads from ``tqaforge.toml``.

    Unknown keys are kept (later versions may read them); the [llm] and [generation] keys are
    checked by the functions that read them, here only that they are tables.
    """
    workspace = _section(raw, "workspace", where)
    for key in ("name", "taxonomy"):
        if key in workspace:
            expect(workspace[key], str, where=where, key=f"[workspace] {key}", expected="a string")
    database = _section(raw, "database", where)
    if "url" in database:
        expect(database["url"], str, where=where, key="[database] url", expected="a string")
    for name in ("llm", "generation"):
        _section(raw, name, where)
    taxonomy = _section(raw, "taxonomy", where)
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


@dataclass(frozen=True)
class WorkspaceConfig:
    """The parsed ``tqaforge.toml``."""

    name: str
    taxonomy_name: str
    database_url: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    path: Path | None = None

    def taxonomy(self) -> Taxonomy:
        """The workspace's taxonomy: a built-in one or the categories listed in the config."""
        if self.taxonomy_name in BUILTIN:
            return BUILTIN[self.taxonomy_name]
        where = str(self.path or CONFIG_NAME)
        section = self.raw.get("taxonomy", {})
        cats = section.get("category", []) if isinstance(section, dict) else []
        if not cats:
            raise TaxonomyError(
                f"{where}: taxonomy {self.taxonomy_name!r} is not built in and the config lists no categories",
                hint="use one of " + ", ".join(BUILTIN) + " or add [[taxonomy.category]] entries",
            )
        return custom_taxonomy(self.taxonomy_name, cats, where=where)


def load_config(path: Path) -> WorkspaceConfig:
    """Read and check a ``tqaforge.toml``: UTF-8, valid TOML, every known key of the right type."""
    raw = load_toml(path, what="config file")
    where = str(path)
    _validate_config(raw, where)
    ws = raw.get("workspace", {})
    url = raw.get("database", {}).get("url") or None
    return WorkspaceConfig(
        name=ws.get("name", path.parent.name),
        taxonomy_name=ws.get("taxonomy", "tablebench"),
        database_url=url,
        raw=raw,
        path=path,
    )


@dataclass(frozen=True)
class WorkspacePaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def sqlite(self) -> Path:
        return self.root / DB_NAME


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
    """Write a commented ``tqaforge.toml`` unless one exists; returns its path."""
    if taxonomy not in BUILTIN and taxonomy != "custom":
        raise ConfigError(
            f"unknown taxonomy {taxonomy!r}", hint="choose " + ", ".join([*BUILTIN, "custom"])
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
