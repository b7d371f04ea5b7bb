"""Build a frozen release: ``tqaforge release build --version X.Y.Z``.

>>> build_release(ws, ReleaseOptions(version="1.0.0")).lines()   # doctest: +SKIP

A release directory holds, for each subset (:mod:`tqaforge.release.contents`), ``data/SUBSET.jsonl``
and ``data/SUBSET.parquet``; ``agreement.json`` (the agreement over exactly the annotations that
fed it); ``README.md``, the dataset card with Hugging Face YAML metadata; ``croissant.json``; and
``manifest.json``: version, tool version, a hash of the store state it came from, counts per
subset and subtype, the sha256 of every other file, the models used and their cost.

**Agreement gates the build**: each annotation kind that fed the release is scored on the
annotations of its items only; a kind whose statistic (Fleiss' kappa for categories, MASI alpha
for cells, accuracy for blind re-answers) is below its threshold (``[release] min_agreement``,
0.6 by default) stops the build with the figures and the items to adjudicate, unless
``accept_low_agreement`` gives a reason, which the manifest and the card then carry.

**Frozen and deterministic**: nothing in it depends on the clock or the machine (no timestamps,
sorted rows and keys), so the same store gives the same bytes. Files are written read-only. A
version that exists is rebuilt in a temporary directory and compared: identical, nothing
happens; different, the build refuses (a release never changes under its version).

**Streamed**: rows are never all in memory: :func:`~tqaforge.release.contents.subset_rows` reads
them a chunk at a time and :class:`~tqaforge.release.stream.SubsetWriter` writes JSONL and
Parquet in bounded batches, hashing as it writes; the files go to a temporary folder next to the
release and are moved into place whole (or, for a version that exists, compared by sha256).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sqlalchemy import func
from sqlmodel import col, select

from tqaforge import __version__
from tqaforge.annotation.kinds import feeding_kinds
from tqaforge.annotation.rater_data import gold_answers, load_rater_data
from tqaforge.annotation.report import Settings, kind_report
from tqaforge.errors import ConfigError, ReleaseError, disk_error
from tqaforge.files import file_sha256
from tqaforge.ids import content_hash
from tqaforge.labels import NOT_OURS
from tqaforge.printable import escape_controls
from tqaforge.release.contents import SUBSET_SCHEMAS, SUBSETS, Contents, collect, subset_rows
from tqaforge.release.stream import EncodedRow, SubsetWriter, write_file
from tqaforge.release.workdir import Abandoned, BuildFolder, remove_abandoned
from tqaforge.schemas.records import Answer, LLMCall, Release
from tqaforge.store import Workspace, insert_new, refresh_planner_statistics
from tqaforge.tables.serialize import SERIALIZATIONS, TORR_SERIALIZATIONS

#: The default threshold of the gate. Which kinds gate a release (their labels make what it holds:
#: the item, its answer, its cells, its variants) and on which statistic is each kind's own
#: (:func:`~tqaforge.annotation.kinds.feeding_kinds`, ``KindSpec.gate_statistic``).
DEFAULT_MIN_AGREEMENT = 0.6
LICENCE_URLS = {"other": "https://spdx.org/licenses/", "apache-2.0": "https://www.apache.org/licenses/LICENSE-2.0",
                "cc-by-sa-4.0": "https://creativecommons.org/licenses/by-sa/4.0/"}
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


class LowAgreement(ReleaseError):
    """Agreement below the threshold stops the build (module docs)."""


@dataclass(frozen=True)
class ReleaseOptions:
    """What to build: ``version`` (X.Y.Z), the subsets (default all), where (default
    ``WORKSPACE/releases/NAME-VERSION``), thresholds per kind (``{"*": all, kind: ...}``; empty:
    the workspace's ``[release]`` config, :func:`thresholds`), and the reason to go on below them."""

    version: str
    subsets: tuple[str, ...] = SUBSETS
    out: Path | None = None
    name: str | None = None
    min_agreement: Mapping[str, float] = field(default_factory=dict)
    accept_low_agreement: str | None = None
    licence: str = "other"
    n_boot: int = 200
    #: The serializations of the configurations subset (ToRR's seven by default).
    serializations: tuple[str, ...] = TORR_SERIALIZATIONS
    #: Files computed from the rendered release (complete and verifiable, in its temporary folder)
    #: and carried by it: ``attach(root) -> {file name: bytes}``, listed and checksummed in the
    #: manifest (its ``attached``); an exception refuses the build. The health gate
    #: (``release build --require-health``) passes its report this way (release may not import health),
    #: as an :class:`AttachedReport`, which the dataset card and the Croissant metadata then describe.
    attach: Callable[[Path], "Mapping[str, bytes] | AttachedReport"] | None = None


@dataclass(frozen=True)
class AttachedReport:
    """A report ``ReleaseOptions.attach`` computed, with what the card and the Croissant metadata
    say of it: its ``files`` (``main`` first among them, e.g. ``health.json``), a ``title``,
    whether it ``passed``, its ``verdict`` and one line per check (``checks``). Plain data: the
    release does not know what a health report is, only how to describe one."""

    files: Mapping[str, bytes]
    main: str
    title: str
    passed: bool
    verdict: str
    checks: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line: "Health report (health.json): passed, healthy: all 7 checks pass"."""
        return f"{self.title} ({self.main}): {'passed' if self.passed else 'not passed'}, {self.verdict}"


@dataclass
class ReleaseSummary:
    """What a build did; ``lines()`` for the CLI."""

    path: str
    version: str
    counts: dict[str, int]
    identical_to_existing: bool = False
    low_agreement: list[str] = field(default_factory=list)
    accepted_reason: str | None = None
    #: Folders of killed builds removed before this one (:mod:`tqaforge.release.workdir`).
    abandoned: list[Abandoned] = field(default_factory=list)

    def lines(self) -> list[str]:
        state = "already built, identical: nothing written" if self.identical_to_existing else "built (read-only)"
        lines = [f"release {self.version} {state}: {self.path}"]
        lines += [f"  {name}: {n} rows" for name, n in self.counts.items()]
        if self.abandoned:
            size = sum(a.size for a in self.abandoned)
            lines.append(f"removed {len(self.abandoned)} folder(s) left by killed builds ({size:,} bytes): "
                         + ", ".join(escape_controls(a.name) for a in self.abandoned))
        if self.low_agreement:
            lines.append(f"agreement below the threshold, accepted ({self.accepted_reason}):")
            lines += [f"  {line}" for line in self.low_agreement]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def thresholds(ws: Workspace, min_agreement: float | None = None) -> dict[str, float]:
    """The gate's thresholds: ``{"*": default, kind: value, ...}`` from ``[release]`` in the
    config (``min_agreement``, ``min_agreement_by_kind``); ``min_agreement`` given here (the
    command line) sets every kind's threshold, the config's per-kind values included."""
    section = ws.config.release
    where = f"{ws.paths.config}: [release]"

    def check(value: object, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= float(value) <= 1.0:
            raise ConfigError(f"{where} {key} = {value!r} is not a number from -1 to 1", hint="agreement statistics lie in [-1, 1]; 0.6 is the default")
        return float(value)

    if min_agreement is not None:
        return {"*": check(min_agreement, "--min-agreement")}
    out = {"*": check(section.min_agreement, "min_agreement") if section.min_agreement is not None else DEFAULT_MIN_AGREEMENT}
    for kind, value in (section.min_agreement_by_kind or {}).items():
        if kind not in feeding_kinds():
            raise ConfigError(f"{where} min_agreement_by_kind names {kind!r}, which does not feed a release",
                              hint=f"kinds: {', '.join(feeding_kinds())}")
        out[kind] = check(value, f"min_agreement_by_kind.{kind}")
    return out


def _check_version(version: str) -> None:
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ReleaseError(f"version {version!r} is not X.Y.Z", hint="give --version like 1.0.0", app_hint="a version like 1.0.0")


# ---------------------------------------------------------------------------------------------
# The agreement gate


def gate(ws: Workspace, contents: Contents, options: ReleaseOptions) -> tuple[dict[str, Any], list[str]]:
    """Agreement per feeding kind over the annotations of the release's items; (the summary,
    lines naming each kind below its threshold with the items to adjudicate)."""
    targets = set(contents.question_ids) | set(contents.variant_ids)
    with ws.session() as s:  # an answer task counts for the question its answer belongs to
        answers = {aid for aid, qid in s.exec(select(Answer.id, Answer.question_id)).all() if qid in targets}
    targets |= answers
    summary: dict[str, Any] = {}
    low: list[str] = []
    for kind in feeding_kinds():
        data = load_rater_data(ws, kind, exclude_sources=NOT_OURS)
        keep = [t in targets for t in data.targets]
        if not any(keep):
            continue
        used = data.select(keep)
        if not used.items:
            continue
        shape = used.kind.strategy
        report = kind_report(used, Settings(n_boot=options.n_boot), gold=gold_answers(ws, used) if shape.scored_against_gold else None)
        statistic = used.kind.gate_statistic
        if statistic is None:  # pragma: no cover - feeding_kinds() keeps only kinds with a gate statistic
            continue
        result = report.overall.get(statistic)
        value = None if result is None else result.value
        threshold = options.min_agreement.get(kind, options.min_agreement.get("*", DEFAULT_MIN_AGREEMENT))
        summary[kind] = {
            "statistic": statistic, "value": None if value is None else round(value, 4), "threshold": threshold,
            "items": len(used.items), "annotations": used.n_annotations,
            "ci": None if result is None or result.ci is None else [round(x, 4) for x in result.ci],
        }
        if value is not None and value < threshold:
            disagree = [t for t, row in zip(used.targets, used.labels) if len({repr(x) for x in row if x is not None}) > 1]
            low.append(
                f"{kind}: {statistic} {value:.3f} < {threshold} over {len(used.items)} items; "
                f"{len(disagree)} items with disagreement, e.g. {', '.join(sorted(disagree)[:5])}"
            )
    return summary, low


# ---------------------------------------------------------------------------------------------
# Files


def _models(ws: Workspace) -> tuple[list[str], float]:
    with ws.session() as s:
        rows = s.exec(select(LLMCall.model, func.sum(LLMCall.cost)).group_by(col(LLMCall.model)).order_by(col(LLMCall.model))).all()
    return [m for m, _ in rows], round(float(sum(c or 0.0 for _, c in rows)), 6)


def _report_section(report: AttachedReport | None, md: Callable[[object], str]) -> str:
    """The card's section on an attached report (nothing without one: those cards stay byte for byte)."""
    if report is None:
        return ""
    files = ", ".join(f"`{md(f)}`" for f in sorted(report.files))
    checks = "\n".join(f"- {md(line)}" for line in report.checks) or "- (no threshold checked)"
    return f"""
## {md(report.title)}

This release carries its {md(report.title.lower())} ({files}), computed on these very files:
**{"passed" if report.passed else "not passed"}** ({md(report.verdict)}). Its checks:

{checks}
"""


def _card(name: str, version: str, manifest: dict[str, Any], subsets: Sequence[str], licence: str,
          report: AttachedReport | None = None) -> str:
    # The card is Markdown read on a hub and in editors: the workspace's name, the model names, the
    # reason for a low agreement and the kinds are data, shown as written (an image link in a
    # model name would be fetched by every viewer); the YAML header takes them as quoted strings.
    def md(value: object) -> str:
        return escape_controls(str(value), lines=False, markdown=True)

    configs = "\n".join(
        f"- config_name: {sub}\n  data_files:\n  - split: test\n    path: data/{sub}.parquet" for sub in subsets
    )
    counts = "\n".join(f"| {sub} | {manifest['counts'][sub]} |" for sub in subsets)
    accepted = manifest.get("accepted_low_agreement")
    agreement = "\n".join(
        f"| {md(kind)} | {md(a['statistic'])} | {a['value']} | {a['threshold']} | {a['items']} |"
        for kind, a in sorted(manifest["agreement"].items())
    ) or "| (no annotations fed this release) | | | | |"
    title = md(f"{name} {version}")
    models = md(", ".join(manifest["models"]))
    return f"""---
license: {json.dumps(escape_controls(licence, lines=False))}
pretty_name: {json.dumps(escape_controls(f"{name} {version}", lines=False))}
task_categories:
- table-question-answering
configs:
{configs}
---

# {title}

A table question answering benchmark built with tqaforge {manifest['tool_version']}: questions about
real tables whose gold answers people verified (or that came verified with a curated benchmark),
and robustness variants of them. Every file's sha256 is in `manifest.json`; `tqaforge release verify`
checks them.

| subset | rows |
|---|---|
{counts}

Subsets: `base` (the items), `structure` (rows and columns moved, transposed, empty rows),
`relevant_cells` (relevant cells removed or moved), `values` (shortened tables and people's value
modifications with their new gold), `realistic` (missing values, duplicate rows), `configurations`
(ToRR's grid: each item and its structure variants as prompts in each serialization; `config` is
`SERIALIZATION/PERTURBATION`).

Score predictions with `tqaforge evaluate --release DIR --predictions FILE.jsonl` (one line per
row: `id`, `prediction`; TableBench's inference format is read as it is).

## Agreement

| kind | statistic | value | threshold | items |
|---|---|---|---|---|
{agreement}

{"Accepted below the threshold: " + md(accepted) if accepted else "Every kind met its threshold."}
{_report_section(report, md)}
## Provenance

Models: {models or "none"}; LLM cost {manifest["llm_cost_usd"]} USD. Annotators appear
only as pseudonymous ids. Licences follow the sources (TableBench: Apache-2.0; FREB-TQA and
WikiTableQuestions: CC-BY-SA-4.0).
"""


_FORMATS = {".json": "application/json", ".md": "text/markdown", ".png": "image/png", ".jsonl": "application/jsonlines"}


def _croissant(name: str, version: str, subsets: Sequence[str], hashes: Mapping[str, str], licence_url: str,
               report: AttachedReport | None = None) -> dict[str, Any]:
    files = [
        {"@type": "cr:FileObject", "@id": f"{sub}-jsonl", "name": f"{sub}-jsonl", "contentUrl": f"data/{sub}.jsonl",
         "encodingFormat": "application/jsonlines", "sha256": hashes[f"data/{sub}.jsonl"]}
        for sub in subsets
    ]
    description = f"{name} {version}: table question answering items and robustness variants (tqaforge)."
    if report is not None:
        # The report's files are part of the distribution (checksummed like the data); what it found is
        # in the description, which every Croissant reader shows.
        description += f" {escape_controls(report.summary(), lines=False)}."
        files += [{"@type": "cr:FileObject", "@id": f"attached-{rel}", "name": f"attached-{rel}", "contentUrl": rel,
                   "encodingFormat": _FORMATS.get(Path(rel).suffix, "application/octet-stream"), "sha256": hashes[rel],
                   "description": escape_controls(f"{report.title}: {'passed' if report.passed else 'not passed'}", lines=False)}
                  for rel in sorted(report.files)]
    records = [
        {"@type": "cr:RecordSet", "@id": sub, "name": sub, "field": [
            {"@type": "cr:Field", "@id": f"{sub}/{key}", "name": key, "dataType": "sc:Text",
             "source": {"fileObject": {"@id": f"{sub}-jsonl"}, "extract": {"column": key}}}
            for key in ("id", "question")
        ]}
        for sub in subsets
    ]
    context = {
        "@language": "en", "@vocab": "https://schema.org/", "sc": "https://schema.org/",
        "cr": "http://mlcommons.org/croissant/", "dct": "http://purl.org/dc/terms/",
        "citeAs": "cr:citeAs", "column": "cr:column", "conformsTo": "dct:conformsTo",
        "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
        "extract": "cr:extract", "field": "cr:field", "fileObject": "cr:fileObject", "fileSet": "cr:fileSet",
        "format": "cr:format", "includes": "cr:includes", "jsonPath": "cr:jsonPath", "key": "cr:key",
        "recordSet": "cr:recordSet", "references": "cr:references", "source": "cr:source", "subField": "cr:subField",
        "transform": "cr:transform",
    }
    return {
        "@context": context, "@type": "sc:Dataset", "name": name, "version": version,
        "conformsTo": "http://mlcommons.org/croissant/1.0", "license": licence_url,
        "url": "https://github.com/tqaforge", "citeAs": f"{name} {version}, built with tqaforge",
        "description": description,
        "distribution": files, "recordSet": records,
    }


def _prepare(ws: Workspace, options: ReleaseOptions) -> tuple[ReleaseOptions, Contents, dict[str, Any], list[str]]:
    """The options checked, what the release holds (ids) and the agreement gate passed."""
    _check_version(options.version)
    unknown = [s for s in options.subsets if s not in SUBSETS]
    if unknown:
        raise ReleaseError(f"unknown subset(s): {', '.join(unknown)}", hint=f"choose from {', '.join(SUBSETS)}")
    unknown = [x for x in options.serializations if x not in SERIALIZATIONS]
    if unknown or not options.serializations:
        raise ReleaseError(f"unknown serialization(s): {', '.join(unknown) or '(none given)'}", hint=f"choose from {', '.join(SERIALIZATIONS)}")
    with ws.session() as s:
        contents = collect(s, tuple(options.subsets), tuple(options.serializations))
    if not contents.question_ids:
        raise ReleaseError(
            "nothing to release: no question has an answer verified by people or imported as gold",
            hint="verify answers (`tqaforge labelstudio push answer_verification`, then pull and adjudicate) or import a benchmark",
        )
    if not options.min_agreement:
        options = replace(options, min_agreement=thresholds(ws))
    agreement, low = gate(ws, contents, options)
    if low and not options.accept_low_agreement:
        raise LowAgreement(
            "agreement is below the threshold:\n  " + "\n  ".join(low),
            hint="adjudicate the items (`tqaforge agreement queue`), or build with --accept-low-agreement \"REASON\"",
            app_hint="adjudicate the items (Agreement page), or say why you accept it in the reason field and build again",
        )
    return options, contents, agreement, low


def render(ws: Workspace, options: ReleaseOptions, root: Path, *, row_group_bytes: int | None = None) -> tuple[dict[str, str], bytes, ReleaseSummary]:
    """Check the options, pass the gate, and write every file of the release into ``root``
    (rows streamed: :mod:`tqaforge.release.stream`); (the sha256 of every file, the manifest's
    bytes, the summary). ``row_group_bytes``: Parquet's batch size (tests make it small)."""
    options, contents, agreement, low = _prepare(ws, options)
    return _render(ws, options, contents, agreement, low, root, row_group_bytes)


def _render(ws: Workspace, options: ReleaseOptions, contents: Contents, agreement: dict[str, Any], low: list[str],
            root: Path, row_group_bytes: int | None) -> tuple[dict[str, str], bytes, ReleaseSummary]:
    name = options.name or ws.config.name
    hashes: dict[str, str] = {}
    counts: dict[str, int] = {}
    by_subtype: dict[str, dict[str, int]] = {}
    spill = root / ".spill"
    with ws.session() as s:
        for sub in options.subsets:
            with SubsetWriter(root, sub, spill, row_group_bytes, schema=SUBSET_SCHEMAS.get(sub)) as writer:
                for row in subset_rows(s, contents, sub, spill):
                    if isinstance(row, EncodedRow):
                        writer.add_encoded(row)
                    else:
                        writer.add(row)
            hashes.update(writer.hashes)
            counts[sub] = writer.count
            by_subtype[sub] = dict(sorted(writer.by_subtype.items()))
    shutil.rmtree(spill, ignore_errors=True)
    hashes["agreement.json"] = write_file(root, "agreement.json", (json.dumps(agreement, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    models, cost = _models(ws)
    manifest: dict[str, Any] = {
        "name": name, "version": options.version, "tool_version": __version__,
        "store_state": content_hash([hashes[k] for k in sorted(hashes)]),
        "counts": counts, "by_subtype": by_subtype,
        "models": models, "llm_cost_usd": cost, "agreement": agreement,
        "accepted_low_agreement": options.accept_low_agreement if low else None, "below_threshold": low,
    }

    def describe(report: AttachedReport | None) -> None:
        """The card and the Croissant metadata (again, with an attached report: they describe it)."""
        for rel in ("README.md", "croissant.json"):
            (root / rel).unlink(missing_ok=True)
        hashes["README.md"] = write_file(root, "README.md", _card(name, options.version, manifest, options.subsets, options.licence,
                                                                  report).encode("utf-8"))
        croissant = _croissant(name, options.version, options.subsets, hashes, LICENCE_URLS.get(options.licence, options.licence), report)
        hashes["croissant.json"] = write_file(root, "croissant.json", (json.dumps(croissant, indent=2, sort_keys=True) + "\n").encode("utf-8"))

    describe(None)
    manifest["files"] = dict(sorted(hashes.items()))
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    hashes["manifest.json"] = write_file(root, "manifest.json", manifest_bytes)
    if options.attach is not None:
        manifest_bytes = _attach(root, options.attach, manifest, hashes, describe)
    for rel in hashes:
        os.chmod(root / rel, READ_ONLY)
    summary = ReleaseSummary("", options.version, counts, low_agreement=low, accepted_reason=options.accept_low_agreement if low else None)
    return hashes, manifest_bytes, summary


def _attach(root: Path, attach: Callable[[Path], Mapping[str, bytes] | AttachedReport], manifest: dict[str, Any],
            hashes: dict[str, str], describe: Callable[[AttachedReport | None], None]) -> bytes:
    """The files ``attach`` computes from the rendered release, written beside it and listed in a
    rewritten manifest (``files`` and ``attached``); an :class:`AttachedReport` is also described
    in a rewritten card and Croissant metadata (``describe``); the new manifest's bytes."""
    made = attach(root)
    report = made if isinstance(made, AttachedReport) else None
    extra = made.files if isinstance(made, AttachedReport) else made
    if report is not None and report.main not in extra:
        raise ReleaseError(f"the attached {report.title!r} names {report.main!r}, which it does not attach",
                           hint="attach the report's main file with it")
    for rel, data in sorted(extra.items()):
        if not isinstance(rel, str) or "/" in rel or "\\" in rel or rel.startswith(".") or rel in hashes or not isinstance(data, bytes):
            raise ReleaseError(f"cannot attach {rel!r} to the release: a plain new file name and bytes are needed",
                               hint="attach files such as health.json beside the manifest")
        hashes[rel] = write_file(root, rel, data)
    if report is not None:
        describe(report)  # after the report's files: the Croissant metadata carries their sha256
    del hashes["manifest.json"]
    manifest["files"] = dict(sorted(hashes.items()))
    manifest["attached"] = sorted(extra)
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    (root / "manifest.json").unlink()
    hashes["manifest.json"] = write_file(root, "manifest.json", manifest_bytes)
    return manifest_bytes


def _record(ws: Workspace, name: str, version: str, out: Path, manifest_bytes: bytes) -> None:
    """The release in the store (the funnel and the app list it): once per name and version."""
    manifest = json.loads(manifest_bytes)
    with ws.session() as s:
        insert_new(s, Release, [{
            "id": content_hash({"name": name, "version": version}), "name": name, "version": version, "path": str(out),
            "checksum": hashlib.sha256(manifest_bytes).hexdigest(), "manifest": {k: v for k, v in manifest.items() if k != "files"},
            "frozen": True,
        }])


def _compare_with_existing(out: Path, hashes: Mapping[str, str], summary: ReleaseSummary, version: str) -> None:
    """The release at ``out`` against the files just built (their sha256): identical, the summary
    says so; different, :class:`ReleaseError` naming what would change."""
    held = {str(p.relative_to(out)): file_sha256(p) for p in sorted(out.rglob("*")) if p.is_file()}
    if held == hashes:
        summary.identical_to_existing = True
        return
    changed = sorted(k for k in set(held) | set(hashes) if held.get(k) != hashes.get(k))
    raise ReleaseError(
        f"release {version} exists at {out} and building it again would change {', '.join(changed[:6])}"
        + (f" and {len(changed) - 6} more" if len(changed) > 6 else ""),
        hint="a release never changes under its version: give a new --version",
        app_hint="a release never changes under its version: give a new version",
    )


def build_release(ws: Workspace, options: ReleaseOptions, *, row_group_bytes: int | None = None) -> ReleaseSummary:
    """Build (or confirm) a release (module docs). The files are written into a temporary folder
    next to ``out`` and moved into place whole; a version that exists is rebuilt there and
    compared file by file (sha256), then the temporary folder goes."""
    refresh_planner_statistics(ws)  # the build reads every released variant, a page at a time
    options, contents, agreement, low = _prepare(ws, options)
    name = options.name or ws.config.name
    out = options.out or ws.paths.releases / f"{name}-{options.version}"
    folder: BuildFolder | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        abandoned = remove_abandoned(out.parent)
        folder = BuildFolder.claim(out.parent, out.name)  # locked while this build runs
        tmp = folder.root
        hashes, manifest_bytes, summary = _render(ws, options, contents, agreement, low, tmp, row_group_bytes)
        summary.path = str(out)
        summary.abandoned = abandoned
        if out.exists():
            _compare_with_existing(out, hashes, summary, options.version)
        else:
            try:
                os.replace(tmp, out)  # all or nothing: a killed build leaves no half release under the name
            except OSError as exc:
                # Another build of this version (another command, at the same time) moved its
                # release into place since the check above: compared like one found there.
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not out.is_dir():
                    raise
                _compare_with_existing(out, hashes, summary, options.version)
    except BaseException as exc:
        if folder is not None:
            folder.remove()
            folder = None
        # A full or read-only disk names the release, not its temporary folder (removed above).
        problem = disk_error(exc, out) if isinstance(exc, OSError) else None
        if problem is not None:
            raise problem from None
        raise
    finally:
        if folder is not None:
            folder.remove()  # what is left of it: the marker, or the rebuilt copy compared above
    _record(ws, name, options.version, out, manifest_bytes)
    return summary
