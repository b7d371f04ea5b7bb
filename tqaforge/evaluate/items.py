"""Item analysis (issue 28, item 1): which items of a release measure something, from the scores
of several systems on it.

The input is the per-item scores :func:`~tqaforge.evaluate.harness.evaluate` computes from
predictions files (:class:`~tqaforge.evaluate.scoring.Scored`: a system is ``model/method``; its
normalised ``score`` is 0 or 1 on exact-match subtypes and graded, ROUGE-L, on prose ones; a row
without a prediction in a group that has predictions is already scored 0). :func:`item_scores`
turns them into an items x systems matrix (base items by default); :func:`item_matrix` builds
one from plain ``(system, item, score)`` rows. A system with no score at all for an item (it was
run on another dataset) leaves a hole, which every statistic below skips.

Per item, :func:`analyse_items` computes

- **difficulty**: the mean score over the systems that scored it (the share of systems right
  when scores are 0/1; classical test theory's *p*-value, high = easy);
- **discrimination**: the corrected item-total correlation: Pearson's r (the point-biserial r on
  0/1 scores) of the item's scores with each system's mean score over the *other* items, with its
  one-sided p-value for r < 0 (t = r sqrt((n-2)/(1-r^2)), n-2 degrees of freedom);
- a **two-parameter logistic IRT fit** (discrimination *a*, difficulty *b*, each system's ability)
  by girth's marginal maximum likelihood (:func:`girth.twopl_mml`) on right (score >=
  ``right_at``) / wrong, when ``irt_min_systems`` (10) or more systems are scored. Each item's two
  parameters are estimated from one answer per system; below about ten systems every item has
  fewer answers than a logistic curve with two free parameters can be told from noise. Even at
  10-40 systems the recovered parameters are rough (measured on simulated 2PL data with 300 items:
  difficulty correlates 0.6-0.8 with the truth, discrimination 0.3-0.5); they are reported beside
  the classical statistics, never used for a flag. girth bounds *a* to [0.2, 5], so a negative
  discrimination shows only in the classical statistic. Items everyone (or no one) got right have
  no finite parameters and are left out of the fit. The fit is slow (girth optimises each item
  in Python: 886 items x 15 systems took 461 s on two shared cores); ``irt=False`` skips it.

Flags: ``solved_by_all``, ``solved_by_none`` (every scoring system right, none right; two systems
at least) and ``suspect_gold``: a significantly negative discrimination (r < 0 and p <
``suspect_alpha``): the systems that are strong elsewhere fail the item together while weak ones
pass, which is what a wrong gold answer looks like. Per subtype, the share of flagged items.

:class:`ItemAnalysis` renders itself (``lines()``, ``as_dict()``) with each flagged item's
evidence (which systems got it right and wrong, strongest first); :func:`adjudication_requests`
lists the suspect-gold items with that evidence for the adjudication queue.

>>> analysis = analyse_items(item_scores(scored))            # doctest: +SKIP
>>> print("\\n".join(analysis.lines()))                       # doctest: +SKIP
>>> [r.item_id for r in adjudication_requests(analysis)]     # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from tqaforge.errors import EvaluateError
from tqaforge.evaluate.predictions import BASE_CONFIG
from tqaforge.evaluate.scoring import Scored
from tqaforge.printable import escape_controls

__all__ = [
    "IRT_MIN_SYSTEMS", "MIN_SYSTEMS", "SOLVED_BY_ALL", "SOLVED_BY_NONE", "SUSPECT_GOLD",
    "AdjudicationRequest", "IrtFit", "ItemAnalysis", "ItemAnalysisOptions", "ItemScores", "ItemStats", "SubtypeShare",
    "adjudication_requests", "analyse_items", "corrected_item_total", "difficulty", "fit_2pl", "item_matrix", "item_scores",
]

#: Fewer systems than this: no item analysis (one system has no "share of systems", nor a rest score).
MIN_SYSTEMS = 2
#: The fewest systems for the 2PL fit (module docs: why).
IRT_MIN_SYSTEMS = 10
SOLVED_BY_ALL = "solved_by_all"
SOLVED_BY_NONE = "solved_by_none"
SUSPECT_GOLD = "suspect_gold"
FLAGS = (SOLVED_BY_ALL, SOLVED_BY_NONE, SUSPECT_GOLD)


@dataclass(frozen=True)
class ItemScores:
    """An items x systems matrix of scores in [0, 1]; NaN where a system has no score for an item.
    ``subtypes[i]`` is item i's subtype ('' when unknown)."""

    items: tuple[str, ...]
    systems: tuple[str, ...]
    subtypes: tuple[str, ...]
    scores: np.ndarray

    def __post_init__(self) -> None:
        if self.scores.shape != (len(self.items), len(self.systems)) or len(self.subtypes) != len(self.items):
            raise EvaluateError(f"an item matrix of shape {self.scores.shape} for {len(self.items)} items "
                                f"({len(self.subtypes)} subtypes) and {len(self.systems)} systems",
                                hint="give one row per item and one column per system")


def item_matrix(rows: Iterable[tuple[str, str, float]], *, items: Sequence[str] | None = None,
                subtypes: Mapping[str, str] | None = None) -> ItemScores:
    """The matrix of ``(system, item, score)`` rows; ``items`` (e.g. every item of the release, in
    its order) adds the items nobody scored, as holes. A score must be a number in [0, 1]: a NaN,
    an infinity or one outside is refused (a missing prediction is a missing row, or a 0 when
    it counts as wrong), and so is a second score of one system for one item."""
    values: dict[tuple[str, str], float] = {}
    systems: dict[str, None] = {}
    order: dict[str, None] = dict.fromkeys(items or ())
    for system, item, score in rows:
        where = f"system {escape_controls(str(system), lines=False)}, item {escape_controls(str(item), lines=False)}"
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise EvaluateError(f"{where}: the score {score!r} is not a number", hint="give scores in [0, 1]") from None
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise EvaluateError(f"{where}: the score {value!r} is not in [0, 1]",
                                hint="give scores in [0, 1]; leave out the rows of items a system was not run on") from None
        if (system, item) in values:
            raise EvaluateError(f"{where}: scored twice", hint="keep one score per system and item")
        values[(system, item)] = value
        systems.setdefault(system, None)
        order.setdefault(item, None)
    item_ids, system_ids = tuple(order), tuple(sorted(systems))
    row = {item: i for i, item in enumerate(item_ids)}
    col = {system: j for j, system in enumerate(system_ids)}
    matrix = np.full((len(item_ids), len(system_ids)), np.nan)
    for (system, item), value in values.items():
        matrix[row[item], col[system]] = value
    kinds = subtypes or {}
    return ItemScores(item_ids, system_ids, tuple(kinds.get(item, "") for item in item_ids), matrix)


def item_scores(scored: Iterable[Scored], *, subset: str = "base", config: str = BASE_CONFIG) -> ItemScores:
    """The matrix of the harness's per-item scores (normalised ``score``) of one subset and
    configuration (the base items by default); items by row id, subtypes as ``qtype_qsubtype``."""
    rows, subtypes = [], {}
    for s in scored:
        if s.ref.subset == subset and s.ref.config == config:
            rows.append((s.system, s.ref.id, s.score))
            subtypes[s.ref.id] = f"{s.ref.qtype}_{s.ref.qsubtype}"
    return item_matrix(rows, subtypes=subtypes)


def difficulty(matrix: ItemScores) -> np.ndarray:
    """Each item's mean score over the systems that scored it (NaN for an item nobody scored)."""
    counts = np.sum(~np.isnan(matrix.scores), axis=1)
    sums = np.nansum(matrix.scores, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def corrected_item_total(matrix: ItemScores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item: Pearson's r of its scores with the systems' mean score over the other items
    (NaN where either side is constant or fewer than three systems have both), the one-sided
    p-value of r < 0, and the number of systems used."""
    x = matrix.scores
    present = ~np.isnan(x)
    filled = np.where(present, x, 0.0)
    total, count = filled.sum(axis=0), present.sum(axis=0)
    n_items = x.shape[0]
    r = np.full(n_items, np.nan)
    p = np.full(n_items, np.nan)
    used = np.zeros(n_items, dtype=int)
    for i in range(n_items):
        others = count - present[i]
        ok = present[i] & (others > 0)
        n = int(ok.sum())
        used[i] = n
        if n < 3:
            continue
        item = x[i, ok]
        rest = (total[ok] - filled[i, ok]) / others[ok]
        if np.ptp(item) == 0 or np.ptp(rest) <= 1e-12:
            continue
        value = float(np.clip(np.corrcoef(item, rest)[0, 1], -1.0, 1.0))
        r[i], p[i] = value, _p_below_zero(value, n)
    return r, p, used


def _p_below_zero(r: float, n: int) -> float:
    """One-sided p-value of a Pearson r this low or lower when the true correlation is 0."""
    from scipy.stats import t as student

    if r <= -1.0:
        return 0.0
    if r >= 1.0:
        return 1.0
    stat = r * math.sqrt((n - 2) / (1.0 - r * r))
    return float(student.cdf(stat, n - 2))


@dataclass(frozen=True)
class IrtFit:
    """girth's 2PL fit (module docs): per fitted item its discrimination ``a`` and difficulty
    ``b``; per system its ability (EAP); the items left out (solved by all or none, unscored)."""

    items: tuple[str, ...]
    a: tuple[float, ...]
    b: tuple[float, ...]
    systems: tuple[str, ...]
    ability: tuple[float, ...]
    left_out: tuple[str, ...]

    def item(self, item_id: str) -> tuple[float, float] | None:
        """(a, b) of one item, None when it was left out."""
        try:
            i = self.items.index(item_id)
        except ValueError:
            return None
        return self.a[i], self.b[i]


def fit_2pl(matrix: ItemScores, *, right_at: float = 1.0, min_systems: int = IRT_MIN_SYSTEMS) -> IrtFit | None:
    """girth's 2PL marginal-maximum-likelihood fit of right (score >= ``right_at``) / wrong; None
    with fewer than ``min_systems`` systems or fewer than two items some systems get right and
    others wrong (holes are girth's missing responses)."""
    if len(matrix.systems) < max(min_systems, 2):
        return None
    from girth import twopl_mml
    from girth.utilities import INVALID_RESPONSE

    present = ~np.isnan(matrix.scores)
    right = (np.nan_to_num(matrix.scores, nan=0.0) >= right_at) & present
    n_right, n_present = right.sum(axis=1), present.sum(axis=1)
    keep = (n_right > 0) & (n_right < n_present) & (n_present >= 2)
    if keep.sum() < 2:
        return None
    data = np.where(present, right.astype(int), INVALID_RESPONSE)[keep]
    result = twopl_mml(data)
    items = tuple(item for item, k in zip(matrix.items, keep) if k)
    left_out = tuple(item for item, k in zip(matrix.items, keep) if not k)
    return IrtFit(items, tuple(float(v) for v in np.atleast_1d(result["Discrimination"])),
                  tuple(float(v) for v in np.atleast_1d(result["Difficulty"])),
                  matrix.systems, tuple(float(v) for v in np.atleast_1d(result["Ability"])), left_out)


@dataclass(frozen=True)
class ItemAnalysisOptions:
    """``right_at``: a score counts as right from this value (1.0: exactly right; ROUGE-L items
    score 1.0 when the normaliser matches); ``suspect_alpha``: the one-sided level below which a
    negative discrimination flags suspect gold; ``irt``: fit the 2PL model when there are
    ``irt_min_systems`` systems or more; ``evidence_systems``: how many systems each side an
    item's evidence names."""

    right_at: float = 1.0
    suspect_alpha: float = 0.05
    irt: bool = True
    irt_min_systems: int = IRT_MIN_SYSTEMS
    evidence_systems: int = 5


@dataclass(frozen=True)
class ItemStats:
    """One item's statistics and flags. ``right``/``wrong``: the systems that got it right and
    wrong, strongest first (by mean score over the other items); ``rest_right``/``rest_wrong``:
    the mean strength of each side (None when that side is empty)."""

    item_id: str
    subtype: str
    systems: int
    difficulty: float | None
    discrimination: float | None
    p_negative: float | None
    irt_a: float | None
    irt_b: float | None
    flags: tuple[str, ...]
    right: tuple[str, ...]
    wrong: tuple[str, ...]
    rest_right: float | None
    rest_wrong: float | None

    def evidence(self, most: int = 5) -> str:
        """Why it is flagged, in one line: difficulty, discrimination, who got it right and wrong."""
        parts = [f"{len(self.right)} of {self.systems} systems right"]
        if self.discrimination is not None:
            parts.append(f"item-rest r {self.discrimination:+.2f} (one-sided p {self.p_negative:.3g})")
        if self.rest_right is not None and self.rest_wrong is not None:
            parts.append(f"mean strength of those right {self.rest_right:.2f}, of those wrong {self.rest_wrong:.2f}")
        if SUSPECT_GOLD in self.flags:
            parts.append(f"strongest failing: {_names(self.wrong, most)}; weakest passing: {_names(self.right[::-1], most)}")
        elif self.wrong and self.right:
            parts.append(f"right: {_names(self.right, most)}; wrong: {_names(self.wrong, most)}")
        return escape_controls("; ".join(parts), lines=False)


def _names(systems: Sequence[str], most: int) -> str:
    shown = ", ".join(systems[:most])
    return shown + (f" (+{len(systems) - most} more)" if len(systems) > most else "")


@dataclass(frozen=True)
class SubtypeShare:
    """The flagged items of one subtype: per flag and any flag."""

    subtype: str
    items: int
    flagged: int
    by_flag: dict[str, int]

    @property
    def share(self) -> float:
        return self.flagged / self.items if self.items else 0.0


@dataclass
class ItemAnalysis:
    """What :func:`analyse_items` found (module docs); ``lines()`` for the terminal, ``as_dict()`` for JSON."""

    systems: tuple[str, ...]
    strength: tuple[float, ...]  # each system's mean score over the items it has scores for
    items: list[ItemStats]
    subtypes: list[SubtypeShare]
    irt: IrtFit | None
    irt_note: str
    options: ItemAnalysisOptions = field(default_factory=ItemAnalysisOptions)

    def flagged(self, flag: str | None = None) -> list[ItemStats]:
        """The items with ``flag`` (any flag when None)."""
        return [s for s in self.items if (flag in s.flags if flag else s.flags)]

    def unscored(self) -> list[str]:
        """The items no system has a score for."""
        return [s.item_id for s in self.items if s.systems == 0]

    def lines(self) -> list[str]:
        scored = [s for s in self.items if s.systems]
        out = [f"item analysis: {len(scored)} items scored by {len(self.systems)} systems"
               + (f"; {len(self.items) - len(scored)} items nobody scored" if len(scored) < len(self.items) else "")]
        for flag in FLAGS:
            out.append(f"  {flag.replace('_', ' ')}: {len(self.flagged(flag))}")
        out.append(f"  2PL IRT: {self.irt_note}")
        if self.subtypes:
            out += ["", f"  {'subtype':<44} {'items':>6} {'flagged':>8} {'share':>7}   " + "  ".join(f.replace('_', ' ') for f in FLAGS)]
            for sub in self.subtypes:
                counts = "  ".join(f"{sub.by_flag.get(f, 0):>{len(f)}}" for f in FLAGS)
                out.append(f"  {sub.subtype or '(none)':<44} {sub.items:>6} {sub.flagged:>8} {sub.share:>7.1%}   {counts}")
        suspects = self.flagged(SUSPECT_GOLD)
        if suspects:
            out += ["", "Suspect gold (strong systems fail together while weak ones pass): back to adjudication"]
            out += [f"  {s.item_id}: {s.evidence(self.options.evidence_systems)}" for s in suspects]
        for flag, title in ((SOLVED_BY_ALL, "Solved by every system"), (SOLVED_BY_NONE, "Solved by no system")):
            found = self.flagged(flag)
            if found:
                shown = ", ".join(s.item_id for s in found[:20]) + (f" (+{len(found) - 20} more)" if len(found) > 20 else "")
                out += ["", f"{title} ({len(found)}): {shown}"]
        # Item ids, subtypes and system names come from the release and the predictions files.
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["subtypes"] = [dict(asdict(s), share=round(s.share, 6)) for s in self.subtypes]
        # JSON has no NaN: a statistic that does not exist is None already; strengths of systems
        # with no score at all are the only NaN left.
        data["strength"] = [None if math.isnan(v) else v for v in self.strength]
        return data


def _value(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 6)


def analyse_items(matrix: ItemScores, options: ItemAnalysisOptions | None = None) -> ItemAnalysis:
    """Difficulty, discrimination, the 2PL fit (when enough systems) and the flags of every item
    of ``matrix`` (module docs). Fewer than :data:`MIN_SYSTEMS` systems is an error."""
    options = options or ItemAnalysisOptions()
    if len(matrix.systems) < MIN_SYSTEMS:
        named = ", ".join(matrix.systems) or "none"
        raise EvaluateError(f"item analysis compares systems, and {len(matrix.systems)} is scored ({named})",
                            hint=f"score {MIN_SYSTEMS} or more systems (models or methods) on the release; "
                                 f"{IRT_MIN_SYSTEMS} or more for the IRT fit")
    if not 0.0 < options.right_at <= 1.0 or not 0.0 < options.suspect_alpha < 1.0:
        raise EvaluateError(f"right_at {options.right_at!r} must be in (0, 1] and suspect_alpha {options.suspect_alpha!r} in (0, 1)",
                            hint="the defaults are right_at 1.0 and suspect_alpha 0.05")
    x = matrix.scores
    present = ~np.isnan(x)
    strength_all = np.where(present.any(axis=0), np.nansum(x, axis=0) / np.maximum(present.sum(axis=0), 1), np.nan)
    diff = difficulty(matrix)
    r, p, _ = corrected_item_total(matrix)
    irt: IrtFit | None = None
    if not options.irt:
        note = "not asked for"
    elif len(matrix.systems) < options.irt_min_systems:
        note = f"not fitted: {len(matrix.systems)} systems, {options.irt_min_systems} or more needed"
    else:
        irt = fit_2pl(matrix, right_at=options.right_at, min_systems=options.irt_min_systems)
        note = (f"girth 2PL (marginal ML) on {len(irt.items)} items; {len(irt.left_out)} left out (solved by all or none, or unscored)"
                if irt else "not fitted: fewer than two items that some systems get right and others wrong")
    filled = np.where(present, x, 0.0)
    totals, counts = filled.sum(axis=0), present.sum(axis=0)
    stats: list[ItemStats] = []
    for i, item in enumerate(matrix.items):
        here = present[i]
        others = counts - here
        rest = np.where(others > 0, (totals - filled[i]) / np.maximum(others, 1), np.nan)
        is_right = here & (filled[i] >= options.right_at)
        is_wrong = here & ~is_right
        order = sorted(np.flatnonzero(here), key=lambda j: (-(rest[j] if not math.isnan(rest[j]) else -1.0), matrix.systems[j]))
        right = tuple(matrix.systems[j] for j in order if is_right[j])
        wrong = tuple(matrix.systems[j] for j in order if is_wrong[j])
        flags: list[str] = []
        n = int(here.sum())
        if n >= MIN_SYSTEMS and not wrong:
            flags.append(SOLVED_BY_ALL)
        if n >= MIN_SYSTEMS and not right:
            flags.append(SOLVED_BY_NONE)
        if not math.isnan(r[i]) and r[i] < 0 and p[i] < options.suspect_alpha:
            flags.append(SUSPECT_GOLD)
        ab = irt.item(item) if irt else None
        stats.append(ItemStats(
            item, matrix.subtypes[i], n, _value(diff[i]), _value(r[i]), _value(p[i]),
            None if ab is None else round(ab[0], 6), None if ab is None else round(ab[1], 6), tuple(flags), right, wrong,
            _mean(rest, is_right), _mean(rest, is_wrong)))
    return ItemAnalysis(matrix.systems, tuple(float(v) for v in strength_all), stats, _shares(stats), irt, note, options)


def _mean(values: np.ndarray, mask: np.ndarray) -> float | None:
    picked = values[mask & ~np.isnan(values)]
    return round(float(picked.mean()), 6) if picked.size else None


def _shares(stats: Sequence[ItemStats]) -> list[SubtypeShare]:
    """Per subtype (items anybody scored): items, flagged items, and the count of each flag."""
    groups: dict[str, list[ItemStats]] = {}
    for s in stats:
        if s.systems:
            groups.setdefault(s.subtype, []).append(s)
    return [SubtypeShare(name, len(group), sum(1 for s in group if s.flags),
                         {f: sum(1 for s in group if f in s.flags) for f in FLAGS})
            for name, group in sorted(groups.items())]


@dataclass(frozen=True)
class AdjudicationRequest:
    """A suspect-gold item to send back to adjudication, with the evidence a person reads first."""

    item_id: str
    subtype: str
    evidence: str
    right: tuple[str, ...]
    wrong: tuple[str, ...]
    discrimination: float
    p_negative: float


def adjudication_requests(analysis: ItemAnalysis) -> list[AdjudicationRequest]:
    """The suspect-gold items of ``analysis`` with their evidence, most suspect (lowest r) first.

    The adjudication queue (:mod:`tqaforge.annotation.adjudication`) holds annotation tasks of
    the workspace, and an item a person settled is never reopened by a rule; so this list is
    plain data, not a write to the store: ``tqaforge health --send-suspects`` files it
    (:mod:`tqaforge.health.suspects`, :mod:`tqaforge.annotation.reopen`)."""
    suspects = sorted(analysis.flagged(SUSPECT_GOLD), key=lambda s: (s.discrimination or 0.0, s.item_id))
    return [AdjudicationRequest(s.item_id, s.subtype, s.evidence(analysis.options.evidence_systems), s.right, s.wrong,
                                float(s.discrimination or 0.0), float(s.p_negative or 0.0)) for s in suspects]
