"""The workspace: a directory with ``tqaforge.toml`` and (by default) a SQLite database.

Every command works on the workspace in the current directory (or a parent of it), or the one
named by ``--workspace DIR``. ``TQAFORGE_DATABASE_URL`` (or ``[database] url`` in the config)
points the same workspace at PostgreSQL instead of the SQLite file.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqaforge.errors import ConfigError, TaxonomyError, WorkspaceNotFound
from tqaforge.schemas.taxonomy import BUILTIN, Taxonomy, custom_taxonomy

CONFIG_NAME = "tqaforge.toml"
DB_NAME = "tqaforge.db"
DATABASE_ENV = "TQAFORGE_DATABASE_URL"

DEFAULT_CONFIG = """\
# tqaforge workspace configuration. Edit freely; unknown keys are kept for later versions.

[workspace]
name = "{name}"
# Built-in taxonomies: "tablebench" (4 types / 18 subtypes) and "freb-tqa" (extraction /
# reasoning). To use your own, set taxonomy = "custom" and list categories below:
# [[taxonomy.category]]
# type = "Lookup"
# subtype = "SingleCell"
taxonomy = "{taxonomy}"

[database]
# Empty: the SQLite file {db} in this directory. For PostgreSQL:
# url = "postgresql+psycopg://user@127.0.0.1:5432/dbname"
# The environment variable {env} overrides this.
url = "{url}"

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


@dataclass(frozen=True)
class WorkspaceConfig:
    """The parsed ``tqaforge.toml``."""

    name: str
    taxonomy_name: str
    database_url: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def taxonomy(self) -> Taxonomy:
        """The workspace's taxonomy: a built-in one or the categories listed in the config."""
        if self.taxonomy_name in BUILTIN:
            return BUILTIN[self.taxonomy_name]
        cats = self.raw.get("taxonomy", {}).get("category", [])
        if not cats:
            raise TaxonomyError(
                f"taxonomy {self.taxonomy_name!r} is not built in and the config lists no categories",
                hint="use one of " + ", ".join(BUILTIN) + " or add [[taxonomy.category]] entries",
            )
        return custom_taxonomy(self.taxonomy_name, cats)


def load_config(path: Path) -> WorkspaceConfig:
    """Read and check a ``tqaforge.toml``."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    ws = raw.get("workspace", {})
    if not isinstance(ws, dict):
        raise ConfigError(f"{path}: [workspace] must be a table")
    db = raw.get("database", {}) or {}
    return WorkspaceConfig(
        name=str(ws.get("name", path.parent.name)),
        taxonomy_name=str(ws.get("taxonomy", "tablebench")),
        database_url=(str(db.get("url")) or None) if db.get("url") else None,
        raw=raw,
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
        path.write_text(
            DEFAULT_CONFIG.format(
                name=name.replace('"', "'"), taxonomy=taxonomy, db=DB_NAME, env=DATABASE_ENV,
                url=(database_url or "").replace('"', '\\"'),
            ),
            encoding="utf-8",
        )
    return path
