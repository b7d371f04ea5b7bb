"""Packaging: every data file the package reads at run time is declared as package data.

An editable install finds any file in the source tree, so a forgotten ``package-data`` glob only
breaks a wheel install (``pip install tqaforge``). This test catches that without building a wheel.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tqaforge"


def _declared_globs() -> list[str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    return pyproject["tool"]["setuptools"]["package-data"]["tqaforge"]


def test_every_non_python_file_in_the_package_is_package_data() -> None:
    globs = _declared_globs()
    data_files = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert data_files, "expected prompts and seed corpora inside the package"
    undeclared = [f for f in data_files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert undeclared == [], f"add these to [tool.setuptools.package-data]: {undeclared}"


def test_builtin_seed_corpora_are_inside_the_package() -> None:
    from tqaforge.generation.corpus import BUILTIN_SEEDS_DIR

    assert BUILTIN_SEEDS_DIR.is_relative_to(PACKAGE)
    assert {p.name for p in BUILTIN_SEEDS_DIR.glob("*.toml")} >= {"tablebench.toml", "freb-tqa.toml", "capability.toml"}
