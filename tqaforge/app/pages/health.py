"""Health: is a release any good before it is frozen? The same report as ``tqaforge health``
(:func:`tqaforge.health.run`, :func:`tqaforge.health.write_report`) on a release and the
evaluations made of it, with the same settings: the thresholds (:class:`~tqaforge.health.Thresholds`,
one number each), the IRT fit, the reference sets of the leakage section, a model asked the questions
with their tables withheld (when the workspace has an endpoint), and the suspect gold sent to the
adjudication queue (:func:`tqaforge.health.suspects.send_suspects`). A report written earlier is
shown without running again."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import streamlit as st

from tqaforge import queries
from tqaforge.annotation.reopen import ALREADY_QUEUED, ALREADY_SETTLED, QUEUED, SETTLED, UNKNOWN, SentSuspects
from tqaforge.app.common import attempt, md, require_login, show_summary, workspace_or_stop
from tqaforge.errors import ConfigError, HealthError
from tqaforge.health import FLAG_TEXT, THRESHOLD_TEXT, HealthOptions, HealthReport, Thresholds, run, write_report
from tqaforge.health.leakage import default_references
from tqaforge.health.report import MODEL_CHECK_TEXT, MODEL_CHECKS, default_health_dir
from tqaforge.health.saved import SavedHealth, find_saved_health, read_saved_health, scored_evaluations
from tqaforge.health.suspects import send_suspects
from tqaforge.llm.settings import configured_endpoint
from tqaforge.printable import escape_controls

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Health")
ws = workspace_or_stop()
releases = [r for r in queries.list_releases(ws) if r.path]
if not releases:
    st.info("No release yet: build one on the Releases page, score systems' predictions on it, then come back.")
    st.stop()
chosen = st.selectbox("release", [r.path or "" for r in releases], format_func=lambda p: Path(p).name)
root = Path(chosen)
out = default_health_dir(root, ws.root)  # where `tqaforge health` run in the workspace writes

evaluations_dir = ws.root / "evaluations"
found = scored_evaluations(evaluations_dir)
mine = [p for p in found if p.parent.name == root.name]


def label(path: str) -> str:
    """``RELEASE / PREDICTIONS`` of an evaluation folder (or of a reference file)."""
    return " / ".join(Path(path).parts[-2:])


if found:
    st.caption(md(f"{len(found)} evaluations found in {evaluations_dir}: " + ", ".join(label(str(p)) for p in found)))
else:
    st.caption("no evaluation of any release yet: score systems' predictions of this release on the Evaluations page "
               "(it writes evaluations/), then pick them here")
picked = st.multiselect("evaluations to report on (two or more systems)", [str(p) for p in found],
                        default=[str(p) for p in mine], format_func=label)
if found and not picked:
    st.caption("pick the evaluations of this release above to run the report")

with st.expander("thresholds: a check fails when its share is above the limit (0.05 = 5%; unticked: reported, not checked)"):
    limits: dict[str, float | int | None] = {}
    defaults = Thresholds()
    for f in fields(Thresholds):
        default = getattr(defaults, f.name)
        if f.name == "min_systems":
            limits[f.name] = st.number_input(f"{THRESHOLD_TEXT[f.name]} (default {default})", min_value=2, value=default,
                                             step=1, key=f"threshold_{f.name}")
            continue
        tick, number = st.columns([1, 5], vertical_alignment="bottom")
        checked = tick.checkbox("check it", value=default is not None, key=f"check_{f.name}")
        limit = number.number_input(f"{THRESHOLD_TEXT[f.name]} (default {'not checked' if default is None else default})",
                                    min_value=0.0, max_value=1.0, value=0.05 if default is None else default, step=0.01,
                                    format="%.3f", disabled=not checked, key=f"threshold_{f.name}")
        limits[f.name] = limit if checked else None

with st.expander("what else to compute"):
    irt = st.checkbox("fit the 2PL IRT model too (slow: minutes for hundreds of items)", key="irt",
                      help="girth's two-parameter IRT fit of the items: slow, minutes for hundreds of items")
    if irt:
        st.warning("The IRT fit is slow: minutes for hundreds of items. The page waits until the report is done.")
    shipped = [str(p) for p in default_references()]
    chosen_references = st.multiselect("reference sets to look for duplicated tables and questions in", shipped, default=shipped,
                                       format_func=label, key="references")
    more_references = st.text_area("more reference files, one path per line (TableBench or FREB-TQA .jsonl, or a table "
                                   "file; a relative path is read from the workspace)", key="references_more")
    references = tuple(Path(p) for p in chosen_references) + tuple(
        path if path.is_absolute() else ws.root / path
        for path in (Path(line.strip()) for line in more_references.splitlines() if line.strip()))

    model: str | None = None
    max_cost: float | None = None
    question_only_threshold = 0.5
    model_checks: tuple[str, ...] = MODEL_CHECKS
    memorisation_tables: int | None = None
    try:
        endpoint = configured_endpoint(ws)
        problem = ""
    except ConfigError as exc:
        endpoint, problem = None, f" ({exc})"
    if endpoint is None:
        st.caption(md("Asking a model each question with its table withheld (which subtypes it answers anyway), or probing "
                      "whether it has memorised the tables, needs an "
                      "LLM endpoint, and this workspace has none configured: set OPENAI_BASE_URL and OPENAI_API_KEY (or "
                      f"[llm] base_url and api_key_env in tqaforge.toml), then reload.{problem}"))
    else:
        st.caption(md(f"endpoint {endpoint}: a model named here is asked each base item's question with its table "
                      "withheld, and its memory of each table is probed (header, row and cell completion); its calls "
                      "are kept in this workspace's ledger (a second run is answered from it) and share one budget"))
        model = st.text_input("model to ask (empty: none asked)", key="model").strip() or None
        max_cost = st.number_input("budget of the model calls (USD; 0: the workspace's)", min_value=0.0, value=0.0, step=0.5,
                                   key="max_cost") or None
        question_only_threshold = st.number_input("flag a subtype the model answers right without the table more often "
                                                  "than this share", min_value=0.0, max_value=1.0, value=0.5, step=0.05,
                                                  key="question_only_threshold")
        model_checks = tuple(st.multiselect("what the model is asked", list(MODEL_CHECKS), default=list(MODEL_CHECKS),
                                            key="model_checks", format_func=lambda name: MODEL_CHECK_TEXT.get(name, name)))
        memorisation_tables = st.number_input("tables to probe for memorisation (0: every distinct table)", min_value=0,
                                              value=0, step=10, key="memorisation_tables") or None

left, right = st.columns(2)
run_now = left.button("run the health report", disabled=not picked, type="primary")
send_now = right.button("send suspect gold to adjudication", disabled=not picked,
                        help="Runs the report with the settings above, writes it, and puts its suspect gold in this "
                             "workspace's adjudication queue with the evidence. A decision a person made is never reopened.")


def show(verdict: str, passed: bool, check_lines: list[str], sections: list[tuple[str, list[str]]], plots: list[Path]) -> None:
    """The verdict, each check (pass/FAIL), each section's text and the plots."""
    (st.success if passed else st.error)(md(verdict))
    if check_lines:
        st.subheader("Checks")
        st.code(escape_controls("\n".join(check_lines)), language=None)
    for title, lines in sections:
        with st.expander(md(title), expanded=True):
            st.code(escape_controls("\n".join(lines)), language=None)
    for image in plots:
        st.image(str(image), caption=md(image.name))


def show_report(report: HealthReport) -> None:
    """A report just computed, and what its model calls cost (not in the report: its bytes must not
    depend on the cache)."""
    show(f"health of release {report.release}: {report.verdict()}", report.passed, [c.line() for c in report.checks],
         [(s.title, s.lines()[1:]) for s in report.sections], [Path(p) for p in report.outputs if p.endswith(".png")])
    st.caption(md("written: " + ", ".join(report.outputs)))
    show_flagged(report)
    for _, calls in report.calls():
        show_summary(calls)


def show_flagged(report: HealthReport) -> None:
    """Every item some section flags, with its reasons: the items to look at first."""
    flagged = report.flagged_items()
    st.subheader("Items flagged")
    st.caption(md(report.flagged_line() + ". " + "; ".join(f"{name}: {text}" for name, text in FLAG_TEXT.items())))
    if flagged:
        st.dataframe([{"item": item, "reasons": ", ".join(why)} for item, why in flagged.items()], hide_index=True)


def show_saved(saved: SavedHealth) -> None:
    """A report read back from its health.json (the text from the health.md beside it)."""
    st.caption(md(f"the report written earlier: {saved.path} (the button above runs it again)"))
    body = [("report (health.md)", saved.markdown.splitlines())] if saved.markdown is not None else []
    show(f"health of release {saved.release}: {saved.verdict}", saved.passed, [c.line() for c in saved.checks], body, list(saved.plots))


def show_sent(sent: SentSuspects) -> None:
    """What became of the suspect gold: queued, already queued, settled by a person, unknown."""
    c = sent.counts()
    st.subheader("Suspect gold sent to adjudication")
    (st.success if c[QUEUED] else st.info)(
        f"{c[QUEUED]} queued, {c[ALREADY_QUEUED]} already queued, {c[SETTLED] + c[ALREADY_SETTLED]} settled by a person "
        f"(kept as evidence only), {c[UNKNOWN]} unknown to this workspace"
        + ("" if sent.flags else ": the report found no suspect gold"))
    if sent.flags:
        show_summary(sent)
        st.caption("a person decides them on the Agreement page (adjudication queue)")


def run_and_write() -> HealthReport:
    """The report of the picked evaluations with the settings above (and the workspace's label
    quality), written to ``out``."""
    options = HealthOptions(release=root, evaluations=tuple(Path(p) for p in picked), workspace=ws.root,
                            thresholds=Thresholds.from_values(limits), irt=irt, references=references, model=model,
                            max_cost=max_cost, question_only_threshold=question_only_threshold,
                            model_checks=model_checks, memorisation_tables=memorisation_tables)
    report = run(options)
    try:
        write_report(report, out)
    except HealthError as exc:  # its hint names the CLI's --out: this page's own words instead
        raise HealthError(str(exc.args[0]), hint=f"make {out} writable, then run the report again") from None
    return report


if run_now or send_now:
    with st.spinner("computing the health report"):
        report = attempt(run_and_write)
    if report is not None:
        show_report(report)
        if send_now:
            done = report
            sent = attempt(lambda: send_suspects(done, ws.root))
            if sent is not None:
                show_sent(sent)
else:
    existing = find_saved_health(root, out)
    if existing is None:
        st.caption(md(f"no health report of {root.name} yet: pick its evaluations and run it"))
    else:
        found_at: Path = existing
        saved = attempt(lambda: read_saved_health(found_at))  # a damaged file is a message, not a traceback
        if saved is not None:
            show_saved(saved)
