"""Label quality: per-item agreement and a latent-truth estimate of each item's label (Dawid-Skene).

For every category kind (:mod:`tqaforge.annotation.kinds`), the labels of all annotators
(:func:`~tqaforge.annotation.rater_data.load_rater_data`: each annotator's latest label) are
aggregated by the model of Dawid & Skene (1979): each annotator has a confusion matrix
``e[w][observed, true]``, each item a latent true label with prior ``p``; both are estimated by
EM started from the majority vote. The report gives

- per item: its agreement (the share of its labels equal to the most frequent one), the latent-
  truth estimate and its posterior probability;
- the items whose estimate disagrees with the adjudicated gold (a resolved
  :class:`~tqaforge.schemas.records.Adjudication`), with the evidence: every vote, how the gold was
  decided and by whom, the posterior of the gold;
- per annotator: the number of labels given and the estimated accuracy
  ``sum_c p[c] * e[w][c, c]`` (the probability that their label is the true one, by the model);
  an annotator is *poor* below :attr:`LabelQualityOptions.poor_accuracy` (default 0.7) when they
  gave at least :attr:`LabelQualityOptions.min_labels` labels (fewer: listed, not judged).

It REPORTS only: people outrank machines, and nothing here writes a label or an adjudication.

The EM is implemented here in numpy (no pandas, no heavy import): ``crowd-kit``'s ``DawidSkene``
(1.4.2) computes the same, but importing it takes about 2 s and pulls scikit-learn and
transformers (about 190 MB). It follows crowd-kit step for step (majority-vote start, the
M-step's 1e-10 floor on the rows an annotator used, the stopping rule on the change of the
expected log-likelihood per label below ``tol``), and tests/test_label_quality.py checks labels
and probabilities against crowd-kit (a development dependency) on crowd-kit's own example data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tqaforge.annotation.adjudication import final_labels
from tqaforge.annotation.kinds import KINDS, LabelError, kind_spec
from tqaforge.annotation.rater_data import RaterData, load_rater_data
from tqaforge.errors import AgreementError
from tqaforge.store import Workspace

#: The floor of a probability (crowd-kit's ``_EPS``): no log of zero.
EPS = 1e-10

#: In the text: items whose estimate's posterior is below this are listed (at most SHOWN of them).
UNCERTAIN = 0.9
SHOWN = 20

#: The kinds whose labels are one category each: the ones Dawid-Skene applies to.
CATEGORY_KINDS: tuple[str, ...] = tuple(k for k, spec in KINDS.items() if spec.shape == "category")


@dataclass(frozen=True)
class DawidSkeneFit:
    """The result of :func:`dawid_skene` on coded labels with ``k`` values.

    ``posteriors[i, c]``: the probability that item i's true label is value c; ``priors[c]``;
    ``errors[w, l, c]``: the probability that annotator w labels l an item whose true label is c
    (zero on the values w never used); ``iterations`` run; ``converged``: the stopping rule held."""

    posteriors: np.ndarray
    priors: np.ndarray
    errors: np.ndarray
    iterations: int
    converged: bool

    @property
    def labels(self) -> np.ndarray:
        """Per item the most probable value (the first of equals)."""
        return self.posteriors.argmax(axis=1) if self.posteriors.size else np.zeros(0, dtype=np.int64)

    def accuracy(self) -> np.ndarray:
        """Per annotator ``sum_c priors[c] * errors[w, c, c]``: how often, by the model, their label is the true one."""
        if not self.errors.size:
            return np.zeros(self.errors.shape[0])
        diagonal = np.diagonal(self.errors, axis1=1, axis2=2)  # annotators x values
        return np.asarray(diagonal @ self.priors, dtype=np.float64)


def dawid_skene(codes: np.ndarray, k: int | None = None, *, max_iter: int = 100, tol: float = 1e-5) -> DawidSkeneFit:
    """Dawid-Skene EM (Dawid & Skene 1979) on ``codes``: items x annotators, the value of each
    label as 0..k-1, -1 where none was given. Every item must have a label (the caller leaves the
    others out). Starts from the majority vote (each item's shares of its labels), then repeats
    M-step (priors and confusion matrices from the posteriors) and E-step (posteriors from them)
    at most ``max_iter`` times, stopping when the expected log-likelihood per label (crowd-kit's
    ``loss_history_``) rises by less than ``tol``."""
    raw = np.asarray(codes)
    if raw.size and raw.dtype.kind not in "iu":
        raise AgreementError(
            f"Dawid-Skene takes integer codes, got values of type {raw.dtype}",
            hint="code the labels as integers 0..k-1 (-1: none), e.g. with RaterData.coded()",
        )
    codes = raw.astype(np.int64)
    if codes.ndim != 2 or (codes.size and codes.min() < -1):
        raise AgreementError(
            f"Dawid-Skene takes items x annotators codes, got an array of shape {codes.shape}"
            + (f" with code {int(codes.min())}" if codes.ndim == 2 and codes.size and codes.min() < -1 else ""),
            hint="give a 2-D array of integer codes (-1 where an annotator gave no label)",
        )
    n_items, n_raters = codes.shape
    k = int(codes.max(initial=-1)) + 1 if k is None else k
    ii, ww = np.nonzero(codes >= 0)
    ll = codes[ii, ww]
    if n_items and np.bincount(ii, minlength=n_items).min() == 0:
        empty = int(np.flatnonzero(np.bincount(ii, minlength=n_items) == 0)[0])
        raise AgreementError(f"Dawid-Skene: item {empty} (row) has no label", hint="leave items without labels out")
    if ll.size and ll.max() >= k:
        raise AgreementError(
            f"Dawid-Skene: a label's code {int(ll.max())} is not below the number of values {k}",
            hint="number the values 0..k-1 and give k (or leave it out: the largest code + 1)",
        )
    if not ll.size:
        return DawidSkeneFit(np.zeros((n_items, k)), np.zeros(k), np.zeros((n_raters, k, k)), 0, True)
    pair = ww * k + ll  # (annotator, label given) as one index
    used = np.bincount(pair, minlength=n_raters * k).reshape(n_raters, k) > 0

    def m_step(post: np.ndarray) -> np.ndarray:
        sums = np.stack([np.bincount(pair, weights=post[ii, c], minlength=n_raters * k) for c in range(k)], axis=1)
        floored: np.ndarray = np.where(used[:, :, None], np.maximum(sums.reshape(n_raters, k, k), EPS), 0.0)
        total = floored.sum(axis=1, keepdims=True)
        return floored / np.where(total > 0, total, 1.0)  # an annotator with no label keeps zeros

    def log_of(errors: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(errors[ww, ll])  # per label: the log probabilities of that label under each true value

    # Majority vote: each item's shares of its labels.
    counts = np.zeros((n_items, k))
    np.add.at(counts, (ii, ll), 1.0)
    post = counts / counts.sum(axis=1, keepdims=True)
    priors = post.mean(axis=0)
    errors = m_step(post)
    loss = -np.inf
    iterations, converged = 0, False
    for _ in range(max_iter):
        iterations += 1
        log_prior = np.log(np.maximum(priors, EPS))
        per_label = log_of(errors)
        log_like = log_prior + np.stack([np.bincount(ii, weights=per_label[:, c], minlength=n_items) for c in range(k)], axis=1)
        log_like -= log_like.max(axis=1, keepdims=True)
        post = np.exp(log_like)
        post /= post.sum(axis=1, keepdims=True)
        priors = post.mean(axis=0)
        errors = m_step(post)
        # crowd-kit's loss: per label, the expected log-probability of the label and of the prior
        # under the posterior of its item, plus the posteriors' entropy, over the number of labels.
        clipped = np.maximum(post, EPS)
        joint = float((post[ii] * (log_of(errors) + np.log(np.maximum(priors, EPS)))).sum())
        entropy = float(-(np.log(clipped) * clipped).sum())
        new_loss = (joint + entropy) / ll.size
        if new_loss - loss < tol:
            converged = True
            post = clipped
            break
        loss = new_loss
        post = clipped
    return DawidSkeneFit(post, priors, errors, iterations, converged)


@dataclass(frozen=True)
class LabelQualityOptions:
    """What :func:`label_quality` reports on and its thresholds."""

    #: The kinds (default: every category kind with labels).
    kinds: tuple[str, ...] | None = None
    #: An annotator with at least ``min_labels`` labels is poor below this estimated accuracy.
    poor_accuracy: float = 0.7
    #: Fewer labels than this: the annotator's accuracy is listed, not judged.
    min_labels: int = 5
    max_iter: int = 100
    tol: float = 1e-5
    #: Annotation sources left out (as the agreement report's).
    exclude_sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ItemQuality:
    """One item (task): its labels' agreement and the latent-truth estimate."""

    task_id: str
    n_labels: int
    majority: str | None  # the most frequent label (None: a tie)
    agreement: float  # share of the labels equal to the most frequent one
    estimate: str
    posterior: float
    gold: str | None = None  # the adjudicated final label, when resolved


@dataclass(frozen=True)
class SuspectGold:
    """An item whose latent-truth estimate disagrees with its adjudicated gold, with the evidence."""

    task_id: str
    gold: str
    gold_posterior: float
    estimate: str
    posterior: float
    method: str | None
    decided_by: str | None
    votes: dict[str, str]


@dataclass(frozen=True)
class AnnotatorQuality:
    """One annotator's estimated confusion: labels given, accuracy, the matrix (observed -> true -> p)."""

    annotator: str
    n_labels: int
    accuracy: float
    confusion: dict[str, dict[str, float]]
    judged: bool  # enough labels (``min_labels``) to be called poor
    poor: bool


@dataclass(frozen=True)
class KindLabelQuality:
    """One kind's label quality."""

    kind: str
    values: tuple[str, ...]
    items: tuple[ItemQuality, ...]
    annotators: tuple[AnnotatorQuality, ...]
    suspect_gold: tuple[SuspectGold, ...]
    n_gold: int
    iterations: int
    converged: bool
    problems: tuple[str, ...] = ()

    @property
    def n_labels(self) -> int:
        return sum(i.n_labels for i in self.items)

    @property
    def poor_annotators(self) -> tuple[AnnotatorQuality, ...]:
        return tuple(a for a in self.annotators if a.poor)

    def lines(self) -> list[str]:
        """The kind as text lines."""
        if not self.items:
            return [f"{self.kind}: no labels"]
        mean_agreement = sum(i.agreement for i in self.items) / len(self.items)
        out = [
            f"{self.kind}: {len(self.items)} items, {self.n_labels} labels by {len(self.annotators)} annotators; "
            f"mean agreement {mean_agreement:.3f}; Dawid-Skene {'converged' if self.converged else 'stopped'} "
            f"after {self.iterations} iterations",
            f"  gold: {self.n_gold} adjudicated items, {len(self.suspect_gold)} where the estimate disagrees",
        ]
        for g in self.suspect_gold:
            votes = ", ".join(f"{who}={v}" for who, v in sorted(g.votes.items()))
            how = f"{g.method} by {g.decided_by}" if g.decided_by else (g.method or "?")
            out.append(
                f"    {g.task_id}: gold {g.gold} ({how}; posterior {g.gold_posterior:.3f}) "
                f"vs estimate {g.estimate} ({g.posterior:.3f}); votes {votes}"
            )
        uncertain = sorted((i for i in self.items if i.posterior < UNCERTAIN), key=lambda i: (i.posterior, i.task_id))
        out.append(f"  items whose estimate has posterior below {UNCERTAIN:g}: {len(uncertain)}")
        for i in uncertain[:SHOWN]:
            out.append(
                f"    {i.task_id}: {i.estimate} ({i.posterior:.3f}); agreement {i.agreement:.2f} of {i.n_labels} labels"
            )
        if len(uncertain) > SHOWN:
            out.append(f"    ... {len(uncertain) - SHOWN} more (every item is in as_dict())")
        poor = self.poor_annotators
        out.append(f"  annotators: {len(poor)} poor" + (":" if poor else ""))
        for a in poor:
            out.append(f"    {a.annotator}: estimated accuracy {a.accuracy:.3f} over {a.n_labels} labels")
        unjudged = [a for a in self.annotators if not a.judged]
        if unjudged:
            out.append("  too few labels to judge: " + ", ".join(f"{a.annotator} ({a.n_labels})" for a in unjudged))
        out += [f"  problem: {p}" for p in self.problems]
        return out

    def as_dict(self) -> dict[str, Any]:
        """The kind as plain data (JSON-ready)."""
        return {
            "kind": self.kind,
            "values": list(self.values),
            "n_items": len(self.items),
            "n_labels": self.n_labels,
            "n_gold": self.n_gold,
            "iterations": self.iterations,
            "converged": self.converged,
            "items": [vars(i).copy() for i in self.items],
            "suspect_gold": [vars(g).copy() for g in self.suspect_gold],
            "annotators": [vars(a).copy() for a in self.annotators],
            "poor_annotators": [a.annotator for a in self.poor_annotators],
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class LabelQualityReport:
    """:func:`label_quality`'s summary: one :class:`KindLabelQuality` per kind; renders itself."""

    kinds: dict[str, KindLabelQuality]
    options: LabelQualityOptions = field(default_factory=LabelQualityOptions)

    def lines(self) -> list[str]:
        """The report as text lines."""
        out = [
            f"Label quality (Dawid-Skene; an annotator is poor below estimated accuracy "
            f"{self.options.poor_accuracy:g} with at least {self.options.min_labels} labels)"
        ]
        if not self.kinds:
            out.append("no category labels")
        for kq in self.kinds.values():
            out += kq.lines()
        return out

    def text(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (JSON-ready)."""
        return {
            "poor_accuracy": self.options.poor_accuracy,
            "min_labels": self.options.min_labels,
            "kinds": {k: kq.as_dict() for k, kq in self.kinds.items()},
        }


def kind_label_quality(
    data: RaterData, gold: dict[str, tuple[str, str | None, str | None]] | None = None,
    options: LabelQualityOptions | None = None,
) -> KindLabelQuality:
    """Label quality of one kind's rater data; ``gold``: per task id the adjudicated value, how it
    was decided and by whom. Pure: reads nothing, writes nothing."""
    options = options or LabelQualityOptions()
    gold = gold or {}
    coded = data.coded()
    codes = coded.codes
    values = tuple(str(v) for v in coded.values)
    given = (codes >= 0).sum(axis=1) if codes.size else np.zeros(len(data.items), dtype=np.int64)
    keep = given > 0
    fit = dawid_skene(codes[keep], len(values), max_iter=options.max_iter, tol=options.tol)
    kept = [i for i, k in enumerate(keep) if k]
    estimates = fit.labels
    items: list[ItemQuality] = []
    suspects: list[SuspectGold] = []
    index = {v: c for c, v in enumerate(values)}
    for row, i in enumerate(kept):
        task = data.items[i]
        labels = [values[c] for c in codes[i] if c >= 0]
        counted = Counter(labels).most_common()
        top = counted[0][1]
        majority = counted[0][0] if len(counted) == 1 or counted[1][1] < top else None
        estimate = values[int(estimates[row])]
        posterior = float(fit.posteriors[row, estimates[row]])
        held = gold.get(task)
        items.append(ItemQuality(task, len(labels), majority, top / len(labels), estimate, posterior, held[0] if held else None))
        if held is not None and held[0] != estimate:
            g = index.get(held[0])  # a gold value no annotator gave has posterior 0
            suspects.append(SuspectGold(
                task, held[0], float(fit.posteriors[row, g]) if g is not None else 0.0, estimate, posterior,
                held[1], held[2], {data.raters[w]: values[c] for w, c in enumerate(codes[i]) if c >= 0},
            ))
    suspects.sort(key=lambda g: (g.gold_posterior, g.task_id))
    n_given = (codes >= 0).sum(axis=0) if codes.size else np.zeros(len(data.raters), dtype=np.int64)
    accuracy = fit.accuracy()
    annotators = []
    for w, who in enumerate(data.raters):
        confusion = {
            values[observed]: {values[true]: float(fit.errors[w, observed, true]) for true in range(len(values))}
            for observed in range(len(values)) if fit.errors[w, observed].any()
        }
        judged = int(n_given[w]) >= options.min_labels
        acc = float(accuracy[w])
        annotators.append(AnnotatorQuality(who, int(n_given[w]), acc, confusion, judged, judged and acc < options.poor_accuracy))
    annotators.sort(key=lambda a: (a.accuracy, a.annotator))
    n_gold = sum(1 for t in data.items if t in gold)
    return KindLabelQuality(
        data.kind.name, values, tuple(items), tuple(annotators), tuple(suspects), n_gold,
        fit.iterations, fit.converged, data.problems,
    )


def label_quality(ws: Workspace, options: LabelQualityOptions | None = None) -> LabelQualityReport:
    """Label quality of the workspace's category kinds (:class:`LabelQualityOptions`): per item
    agreement and the Dawid-Skene estimate, items whose estimate disagrees with the adjudicated
    gold, annotators whose estimated accuracy is poor. Reads only."""
    options = options or LabelQualityOptions()
    if options.poor_accuracy < 0 or options.poor_accuracy > 1:
        raise AgreementError(
            f"label quality: poor_accuracy {options.poor_accuracy} is not between 0 and 1",
            hint="an estimated accuracy is a probability: give e.g. 0.7",
        )
    if options.min_labels < 1 or options.max_iter < 1 or not options.tol >= 0:
        raise AgreementError(
            f"label quality: min_labels {options.min_labels} and max_iter {options.max_iter} must be at least 1, "
            f"tol {options.tol} at least 0",
            hint="leave them at their defaults (5, 100, 1e-5) unless you mean otherwise",
        )
    names = options.kinds if options.kinds is not None else CATEGORY_KINDS
    out: dict[str, KindLabelQuality] = {}
    for kind in names:
        spec = kind_spec(kind)
        if spec.shape != "category":
            raise AgreementError(
                f"label quality: kind {kind!r} has {spec.shape} labels; Dawid-Skene takes one category per label "
                f"(category kinds: {', '.join(CATEGORY_KINDS)})",
                hint=f"give kinds among: {', '.join(CATEGORY_KINDS)}",
            )
        data = load_rater_data(ws, kind, exclude_sources=options.exclude_sources)
        if not data.items and options.kinds is None:
            continue
        out[kind] = kind_label_quality(data, _gold(ws, kind), options)
    return LabelQualityReport(out, options)


def _gold(ws: Workspace, kind: str) -> dict[str, tuple[str, str | None, str | None]]:
    """Per task the resolved adjudication's value (as the kind reads it), method and decider."""
    spec = kind_spec(kind)
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for task_id, row in final_labels(ws, kind).items():
        try:
            value = spec.read(row.label)
        except LabelError:
            continue  # an unreadable final label is no gold to compare with
        method = row.method.value if row.method is not None and hasattr(row.method, "value") else row.method
        out[task_id] = (str(value), None if method is None else str(method), row.decided_by)
    return out
