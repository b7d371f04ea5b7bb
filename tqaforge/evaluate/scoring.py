"""Score each prediction twice: TableBench's way and ours.

**TableBench-compatible** (:mod:`tqaforge.evaluate.tablebench`): its parse (the first
``Final Answer: `` line; for PoT and charts the last ```` ```python ```` block, run), its
normalisation and metrics, so the numbers compare with published TableBench scores.

**Normalised** (ours): the answer parser the agents use (:mod:`tqaforge.answers.parse`: markdown,
``**Final Answer:**``, lists, PoT's last printed line) and the answer matcher votes use
(:func:`tqaforge.tables.matching.same_answer`: numbers as numbers, ``12.5`` equal to ``12.50``,
``-3`` different from ``3``, lists in order or as sets by subtype, TableBench's 10% tolerance where
it has one); prose subtypes keep ROUGE-L. TableBench's quirks (notes in the module docs of
:mod:`tqaforge.evaluate.tablebench`) are fixed here.

**Commanding** items (table editing; the capability-based TableBench): when the gold answer is a
table (subtype ``commanding``, or a gold in the canonical table text of
:func:`tqaforge.tables.commanding.canonical_table_text`), the reply's table is read in any of our
serializations (:func:`tqaforge.tables.parse_table.parse_table`) and scored by TEDS
(:mod:`tqaforge.tables.teds`) both ways; ``correct`` is TEDS 1 (the target exactly), Parse@1 whether
a table was found, and structure-only TEDS is kept beside it. A reply without a table scores 0; so
does one whose table is too large for the tree edit distance (:class:`~tqaforge.tables.teds.TedsTooLarge`).

Code (PoT programs, chart code) runs only in the sandbox, never in this process, with the table
as ``table.csv``; a chart passes when the drawn data equals the references (Pass@1,
:func:`tqaforge.sandbox.charts.chart_matches`). Identical programs on identical tables run once,
in batches (several programs a sandbox run, each as it would run alone: :mod:`tqaforge.evaluate.batches`);
the sandbox starts while the release is read and the text is scored (:class:`SandboxStart`).
One departure from TableBench's own run, kept on purpose: TableBench executes chart code twice into
the same figure and PoT code in-process (where functions cannot see the program's top-level names),
which fails correct programs; the sandbox runs each program once, as a script.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from tqaforge.answers.parse import answer_from_output, last_python_block, parse_reply, split_answer
from tqaforge.errors import SandboxError
from tqaforge.evaluate.batches import BATCH_SIZE, Program, run_batched
from tqaforge.evaluate.predictions import Prediction, Reference
from tqaforge.evaluate.tablebench import (
    metric_of,
    parse_prediction,
    parse_program_output,
    program_of,
    rouge_l,
    score_item,
)
from tqaforge.progress import Progress
from tqaforge.sandbox import Outcome, RunResult, Sandbox
from tqaforge.sandbox.charts import chart_matches, chart_type_of, parse_y_references
from tqaforge.tables.commanding import COMMANDING, table_of_gold
from tqaforge.tables.matching import answer_rule, same_answer
from tqaforge.tables.parse_table import TableParseError, parse_table
from tqaforge.tables.table import Table
from tqaforge.tables.teds import TedsTooLarge, teds_scores
from tqaforge.tables.writers import write_csv

CHART_SUBTYPE = "ChartGeneration"
#: The metric of items whose gold is a table.
TEDS_METRIC = "TEDS"
#: Program results by (reference id, code).
Results = dict[tuple[str, str], RunResult]


@dataclass(frozen=True)
class Scored:
    """One prediction's scores (``answered`` False: a row without a prediction, scored as wrong).
    ``tb``: TableBench's value of its subtype's metric (EM, EM within 10%, ROUGE-L or Pass@1; a
    fraction) and ``tb_parsed`` its Parse@1; ``score``: ours, the same metric on our parse and
    matcher, ``correct`` ours exact; ``executed``: whether its code ran as TableBench runs it
    (ECR@1; None when the method runs no code)."""

    ref: Reference
    model: str
    method: str
    answered: bool
    tb: float = 0.0
    tb_parsed: bool = False
    score: float = 0.0
    correct: bool = False
    executed: bool | None = None
    teds_structure: float | None = None  # structure-only TEDS, for items whose gold is a table

    @property
    def system(self) -> str:
        return f"{self.model}/{self.method}"


def is_chart(ref: Reference) -> bool:
    return ref.qsubtype == CHART_SUBTYPE or ref.qtype == "Visualization"


def gold_table(ref: Reference) -> Table | None:
    """The gold answer as a table when it is one (module docs), else None."""
    if len(ref.answer) > 1:
        return None
    return table_of_gold(ref.answer_text, ref.qsubtype == COMMANDING)


def metric_name(ref: Reference) -> str:
    """The metric of a reference: Pass@1 for charts, TEDS for a table gold, else TableBench's of its subtype."""
    if is_chart(ref):
        return "Pass@1"
    if gold_table(ref) is not None:
        return TEDS_METRIC
    return metric_of(ref.qtype, ref.qsubtype)


def uses_code(ref: Reference, method: str) -> bool:
    """Whether a prediction of ``method`` for ``ref`` is scored by running code (PoT, charts; not
    an item whose gold is a table, scored on the reply's table)."""
    return is_chart(ref) or (method == "PoT" and gold_table(ref) is None)


def _key(job: Program) -> str:
    text = "\0".join((job.code, job.table_csv, job.chart_type or "", "again" if job.again else ""))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _programs(ref: Reference, p: Prediction) -> tuple[str, str]:
    """(TableBench's program, ours) of a prediction that runs code; '' where none.

    TableBench runs chart code, then the same code again into the figure it left (with its check
    after it): code that draws without a new figure draws everything twice. Its compatible program
    is therefore the code twice over; a chart whose code prints anything fails there too
    (:func:`_chart_pass`)."""
    tb = program_of(p.text)
    if is_chart(ref):
        ours = last_python_block(p.text) or tb
        tb = f"{tb}\n{tb}" if tb else ""
    else:
        ours = parse_reply("PoT", p.text).code or ""
    return tb, ours


#: Programs worth a sandbox worker of their own: a worker's start (pandas, numpy and matplotlib
#: imported, a figure drawn) costs about what sixty programs in batches cost.
PROGRAMS_PER_WORKER = 64


def code_predictions(predictions: Sequence[Prediction]) -> int:
    """How many of ``predictions`` may run a program, known before the release is read: PoT
    predictions and replies that hold a program (TableBench's ```` ```python ```` block, or ours:
    a Python-tagged block or an untagged one that parses as Python). A reply whose fences hold a
    table (```` ```csv ````, a markdown table: a commanding item's reply) runs nothing. 0: no
    sandbox is needed at all. (Which predictions do run is known once the release is read:
    :func:`uses_code`.)"""
    return sum(p.method == "PoT" or _holds_program(p.text) for p in predictions)


def _holds_program(text: str) -> bool:
    return ("```" in text or "~~~" in text) and bool(program_of(text) or last_python_block(text))


def sandbox_workers(most: int, programs: int) -> int:
    """The workers to start for about ``programs`` programs: one per :data:`PROGRAMS_PER_WORKER`,
    at least one, at most ``most``."""
    return max(1, min(most, -(-programs // PROGRAMS_PER_WORKER)))


class SandboxStart:
    """A sandbox started in the background (``now``; else on the first :meth:`get`): its workers
    import pandas and matplotlib, a second or two, while this process reads the release and scores
    the text. :meth:`get` waits for it; :meth:`close` stops it (idempotent).

    One thread owns it from start to stop: a worker dies with the *thread* that started it (the
    parent-death signal, ``PR_SET_PDEATHSIG``, follows the thread), so that thread starts it, waits
    until it is closed, and closes it."""

    def __init__(self, factory: Callable[[], Sandbox], *, now: bool = True) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._box: Sandbox | None = None
        self._error: BaseException | None = None
        self._owner: threading.Thread | None = None
        if now:
            self._start()

    def _start(self) -> None:
        self._owner = threading.Thread(target=self._own, name="sandbox", daemon=True)
        self._owner.start()

    def _own(self) -> None:
        try:
            box = self._factory()
        except BaseException as exc:  # handed to get(); nobody may need it
            self._error = exc
            self._ready.set()
            return
        self._box = box
        self._ready.set()
        self._stop.wait()
        box.close()

    def get(self) -> Sandbox:
        """The sandbox, once started; its start's error (SandboxError) if it could not start."""
        with self._lock:
            if self._stop.is_set():
                raise SandboxError("sandbox: used after close()")
            if self._owner is None:
                self._start()
        self._ready.wait()
        if self._box is None:
            assert self._error is not None
            raise self._error
        return self._box

    def close(self, *, wait: bool = True) -> None:
        """Stop the sandbox (its workers take a moment to exit); ``wait`` False: in the background,
        :meth:`close` again to wait for it."""
        with self._lock:
            self._stop.set()
            owner = self._owner
        if owner is not None and wait:
            owner.join()


class PendingPrograms:
    """The programs of some pairs, running in the sandbox (:func:`start_programs`)."""

    def __init__(self, jobs: Mapping[str, Program], wanted: Mapping[tuple[str, str], tuple[str, int]],
                 sandbox: Callable[[], Sandbox], workers: int, per_run: int = BATCH_SIZE) -> None:
        self._wanted = wanted
        # Batches of programs (tqaforge.evaluate.batches), as many as the workers at least, each run
        # in a thread that waits for the sandbox to have started (the caller scores the text meanwhile).
        keys = list(jobs)
        size = max(1, min(per_run, -(-len(keys) // max(1, workers))))
        chunks = [keys[i:i + size] for i in range(0, len(keys), size)]
        self._total = len(keys)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-run") if chunks else None

        def run(chunk: list[str]) -> list[tuple[RunResult, ...]]:
            return run_batched([jobs[k] for k in chunk], sandbox(), batch_size=size)

        self._futures = [(chunk, self._pool.submit(run, chunk)) for chunk in chunks] if self._pool is not None else []

    def wait(self, on_progress: Progress | None = None) -> Results:
        """The results by (reference id, code), once every program has run."""
        done_jobs: dict[str, tuple[RunResult, ...]] = {}
        try:
            for chunk, future in self._futures:
                done_jobs.update(zip(chunk, future.result()))
                if on_progress is not None:
                    on_progress(len(done_jobs), self._total, "programs run in the sandbox")
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
        return {pair: done_jobs[key][phase] for pair, (key, phase) in self._wanted.items()}


def start_programs(
    pairs: Sequence[tuple[Reference, Prediction]], table_of: Callable[[Reference], Mapping[str, Any]],
    sandbox: Callable[[], Sandbox], *, workers: int = 2, per_run: int = BATCH_SIZE,
) -> PendingPrograms:
    """Start every distinct program of ``pairs`` (by code, table and chart type) in the sandbox
    ``sandbox()`` gives, once each, in batches of ``per_run`` at most (:mod:`tqaforge.evaluate.batches`;
    1: each program a sandbox run of its own), ``workers`` at a time; :meth:`PendingPrograms.wait` for them."""
    jobs: dict[str, Program] = {}
    wanted: dict[tuple[str, str], tuple[str, int]] = {}  # (reference id, code) -> (job, which of its results)
    csv_of: dict[str, str] = {}
    for ref, p in pairs:
        if not uses_code(ref, p.method):
            continue
        tb, ours = _programs(ref, p)
        chart_type = (chart_type_of(ref.chart_type) or "line") if is_chart(ref) else None
        # A chart's TableBench program is most often ours twice over (ours may lack the final
        # newline, which changes nothing a script does): one job gives both results.
        half = tb[:len(tb) // 2]
        programs = [(half, True, ((ours, 0), (tb, 1)))] if ours and tb == f"{half}\n{half}" and ours in (half, half.removesuffix("\n")) else [
            (code, False, ((code, 0),)) for code in {tb, ours} if code]
        for code, again, results in programs:
            table_csv = csv_of.get(ref.id)
            if table_csv is None:
                table_csv = csv_of[ref.id] = write_csv(Table.from_dict(dict(table_of(ref))))
            job = Program(code, table_csv, chart_type, again=again)
            key = _key(job)
            jobs.setdefault(key, job)
            for result_code, phase in results:
                wanted[(ref.id, result_code)] = (key, phase)
    return PendingPrograms(jobs, wanted, sandbox, workers, per_run)


def _result_of(ref: Reference, code: str, results: Results) -> RunResult | None:
    return results.get((ref.id, code)) if code else None


def _chart_pass(ref: Reference, result: RunResult | None, *, silent: bool = False) -> bool:
    """Pass@1 of a chart run; ``silent``: TableBench's rule that the program prints nothing (its
    check reads stdout, which must be exactly ``True``)."""
    if result is None or result.outcome != Outcome.OK or result.chart is None:
        return False
    if silent and result.stdout.strip():
        return False
    try:
        wanted = parse_y_references(ref.answer_text)
    except ValueError:
        return False
    return chart_matches(result.chart, wanted)


def _gold_items(ref: Reference) -> list[str]:
    """The gold answer as items: imported golds are often one text (``"spain, france, uk"``),
    split by the same rules as a model's final answer so both sides are lists alike."""
    if len(ref.answer) == 1:
        return list(split_answer(ref.answer[0]) or ref.answer)
    return list(ref.answer)


def _ours_text(ref: Reference, values: Sequence[str]) -> tuple[float, bool]:
    correct = same_answer(list(values), _gold_items(ref), answer_rule(ref.qsubtype))
    if metric_of(ref.qtype, ref.qsubtype) == "ROUGE-L":
        return (1.0 if correct else rouge_l(", ".join(ref.answer), ", ".join(values))), correct
    return float(correct), correct


def _ran(result: RunResult | None) -> bool:
    return result is not None and result.outcome == Outcome.OK


def score_one(ref: Reference, p: Prediction, results: Results) -> Scored:
    """One prediction scored both ways (its programs already run: :func:`start_programs`)."""
    head = (ref, p.model, p.method, True)
    target = gold_table(ref) if not is_chart(ref) else None
    if target is not None:
        return _score_table(head, target, p.text)
    if is_chart(ref):
        tb_code, our_code = _programs(ref, p)
        tb_result, our_result = _result_of(ref, tb_code, results), _result_of(ref, our_code, results)
        our_pass = _chart_pass(ref, our_result)
        return Scored(*head, float(_chart_pass(ref, tb_result, silent=True)), bool(tb_code), float(our_pass), our_pass, _ran(tb_result))
    executed: bool | None = None
    if p.method == "PoT":
        tb_code, our_code = _programs(ref, p)
        tb_result, our_result = _result_of(ref, tb_code, results), _result_of(ref, our_code, results)
        executed = _ran(tb_result)
        tb_text = parse_program_output(tb_result.stdout) if tb_result is not None and executed else ""
        values = answer_from_output(our_result.stdout) if our_result is not None and _ran(our_result) else ()
    else:
        tb_text = parse_prediction(p.text)
        values = parse_reply(p.method, p.text).values
    items = score_item(ref.answer_text, tb_text)
    score, correct = _ours_text(ref, values)
    return Scored(*head, items.metric(metric_of(ref.qtype, ref.qsubtype)), items.parsed, score, correct, executed)


def _score_table(head: tuple[Reference, str, str, bool], target: Table, reply: str) -> Scored:
    """A reply to an item whose gold is a table, scored by TEDS (module docs)."""
    try:
        returned = parse_table(reply).layout
    except TableParseError:
        return Scored(*head, teds_structure=0.0)
    try:
        scores = teds_scores(returned, target)
    except TedsTooLarge:
        return Scored(*head, tb_parsed=True, teds_structure=0.0)
    exact = scores.teds == 1.0
    return Scored(*head, scores.teds, True, scores.teds, exact, None, scores.structure)


def unanswered(ref: Reference, model: str, method: str) -> Scored:
    """A reference without a prediction in a group that has others: it counts, as wrong (and, where
    code would run, as not executed)."""
    return Scored(ref, model, method, False, executed=False if uses_code(ref, method) else None,
                  teds_structure=0.0 if not is_chart(ref) and gold_table(ref) is not None else None)
