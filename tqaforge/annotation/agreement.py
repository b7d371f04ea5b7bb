"""Inter-rater agreement statistics: pure functions, each returning an :class:`AgreementResult`.

The statistics and the data each takes (the layouts of the libraries they are checked against):

- :func:`fleiss_kappa`, :func:`gwet_ac1`, :func:`percent_agreement`: a **count matrix**, items x
  categories, ``counts[i][j]`` raters put item ``i`` in category ``j`` (statsmodels' layout).
  :func:`category_counts` makes one from ratings.
- :func:`cohen_kappa`: two raters' labels, one per item (``None`` where a rater skipped it).
- :func:`cohen_kappa_matrix`, :func:`percent_agreement_matrix`, :func:`conger_kappa`: **ratings**,
  items x raters, ``None`` (or NaN) for a missing rating.
- :func:`krippendorff_alpha`, :func:`masi_alpha`: **reliability data**, raters x units, ``None``
  or NaN for a missing value (the ``krippendorff`` package's layout).

Each result carries the value, its components (observed and chance agreement, per-category
values...), the numbers of items and raters used and a seeded percentile bootstrap interval
over items (:mod:`tqaforge.annotation.bootstrap`). Data on which a statistic is undefined (all
ratings in one category, no item with two ratings) gives ``value=None`` and a ``reason``; data
of the wrong shape raises :class:`~tqaforge.errors.AgreementError`. No result holds a NaN.

Definitions (and the implementations the tests compare against):

- Fleiss (1971): ``P_i = sum_j n_ij (n_ij - 1) / (n (n - 1))``, ``P_bar = mean P_i``,
  ``p_j = sum_i n_ij / (N n)``, ``P_e = sum_j p_j^2``, ``kappa = (P_bar - P_e) / (1 - P_e)``;
  per category ``kappa_j = 1 - sum_i n_ij (n - n_ij) / (N n (n - 1) p_j (1 - p_j))``. Needs the
  same number ``n`` of raters on every item (statsmodels ``fleiss_kappa``).
- Cohen (1960, 1968): ``kappa = 1 - sum w O / sum w E`` with ``O`` the observed and ``E`` the
  chance (product of marginals) proportions and disagreement weights ``w_ij`` = ``[i != j]``,
  ``|i - j| / (k - 1)`` (linear) or its square (quadratic) over the category positions
  (statsmodels ``cohens_kappa``).
- Conger (1980) / Davies and Fleiss (1982): ``(P_a - P_e) / (1 - P_e)`` with ``P_e`` the mean
  over rater pairs of ``sum_k p_gk p_hk``, ``p_gk`` the share of rater ``g``'s ratings in ``k``
  (NLTK ``multi_kappa``; with missing ratings as in Gwet's irrCAC ``conger.kappa.raw``).
- Krippendorff's alpha (Krippendorff 2011): ``1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck``
  over the coincidences of pairable values, with the nominal, ordinal, interval or ratio
  difference ``d`` (the ``krippendorff`` package, NLTK ``AnnotationTask.alpha``); over sets with
  the MASI distance (Passonneau 2006; NLTK ``masi_distance``).
- Gwet's AC1 (Gwet 2008): ``P_a`` the mean ``P_i`` over items with two or more ratings,
  ``pi_k`` the mean over rated items of ``r_ik / r_i``, ``P_e = sum_k pi_k (1 - pi_k) / (q - 1)``.
  Robust when one category dominates, where kappa collapses (irrCAC ``gwet.ac1.raw``).
- Percent agreement: the mean ``P_i`` over items with two or more ratings (two raters: the share
  of items they label alike).

>>> r = fleiss_kappa([[0, 3], [3, 0], [1, 2], [0, 3]], n_boot=0)
>>> round(r.value, 3), r.band
(0.625, 'substantial')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations
from types import MappingProxyType
from typing import Any, Callable, Hashable, Iterable, Literal, Mapping, Sequence

import numpy as np

from tqaforge.annotation.bootstrap import SparseRows, bootstrap_ci, group_rows, group_sparse_rows
from tqaforge.errors import AgreementError

Weights = Literal["linear", "quadratic"]
Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")

DEFAULT_N_BOOT = 1000
DEFAULT_CI_LEVEL = 0.95
#: The most bootstrap resamples accepted: more buys no precision and only time and memory.
MAX_N_BOOT = 100_000

#: Landis and Koch (1977), Table 1: upper bound of each band (a value below 0 is "poor").
LANDIS_KOCH: tuple[tuple[float, str], ...] = (
    (0.20, "slight"),
    (0.40, "fair"),
    (0.60, "moderate"),
    (0.80, "substantial"),
    (1.00, "almost perfect"),
)

#: Chance-corrected statistics (name prefixes): only these get a Landis-Koch band.
_CHANCE_CORRECTED = ("fleiss_kappa", "cohen_kappa", "conger_kappa", "krippendorff_alpha", "masi_alpha", "gwet_ac1")

#: The most distinct labels (sets) the MASI alpha accepts: its distance matrix is labels^2.
MAX_SET_LABELS = 4000

_EPS = 1e-12


def landis_koch(value: float) -> str:
    """The Landis and Koch (1977) band of a kappa-like value.

    >>> landis_koch(0.85), landis_koch(0.53), landis_koch(-0.1)
    ('almost perfect', 'moderate', 'poor')
    """
    if value is None or not math.isfinite(value):
        raise AgreementError(f"no Landis-Koch band for {value!r}: the statistic has no value")
    if value < 0:
        return "poor"
    for upper, name in LANDIS_KOCH:
        if value <= upper + _EPS:
            return name
    return LANDIS_KOCH[-1][1]


def _plain(value: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python, mappings to dicts, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class AgreementResult:
    """One agreement statistic on one set of ratings.

    ``value`` is None exactly when the statistic is undefined on these ratings; ``reason`` then
    says why. ``ci`` is the seeded percentile bootstrap interval over items (None when
    ``n_boot`` is 0 or the value is undefined; ``ci_reason`` says which).
    """

    statistic: str
    value: float | None
    n_items: int
    n_raters: int
    components: Mapping[str, Any] = field(default_factory=dict)
    ci: tuple[float, float] | None = None
    ci_level: float = DEFAULT_CI_LEVEL
    n_boot: int = 0
    seed: int | None = None
    reason: str | None = None
    ci_reason: str | None = None
    boot_undefined: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", MappingProxyType(dict(self.components)))

    @property
    def band(self) -> str | None:
        """The Landis-Koch band (None for undefined values and statistics not corrected for chance)."""
        if self.value is None or not self.statistic.startswith(_CHANCE_CORRECTED):
            return None
        return landis_koch(self.value)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field plus the band."""
        return {
            "statistic": self.statistic,
            "value": self.value,
            "band": self.band,
            "ci": list(self.ci) if self.ci else None,
            "ci_level": self.ci_level,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "n_items": self.n_items,
            "n_raters": self.n_raters,
            "reason": self.reason,
            "ci_reason": self.ci_reason,
            "boot_undefined": self.boot_undefined,
            "components": _plain(self.components),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AgreementResult:
        """The result :meth:`as_dict` wrote (its ``band`` is derived, so not read back).

        Raises ``KeyError``, ``TypeError`` or ``ValueError`` on anything else: callers reading
        a file that may be damaged treat those as "not readable"."""
        ci = d["ci"]
        if ci is not None:
            low, high = ci
            ci = (float(low), float(high))
        value = d["value"]
        seed = d["seed"]
        return cls(
            str(d["statistic"]), None if value is None else float(value), int(d["n_items"]), int(d["n_raters"]),
            dict(d["components"]), ci, float(d["ci_level"]), int(d["n_boot"]), None if seed is None else int(seed),
            _optional_text(d["reason"]), _optional_text(d["ci_reason"]), int(d["boot_undefined"]),
        )


@dataclass(frozen=True)
class PairwiseResult:
    """One statistic for every pair of raters, and its mean over the pairs that have a value."""

    statistic: str
    raters: tuple[str, ...]
    pairs: Mapping[tuple[str, str], AgreementResult]
    mean: float | None
    reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", MappingProxyType(dict(self.pairs)))

    def get(self, a: str, b: str) -> AgreementResult:
        """The result for raters ``a`` and ``b`` (either order)."""
        return self.pairs[(a, b)] if (a, b) in self.pairs else self.pairs[(b, a)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "statistic": self.statistic,
            "raters": list(self.raters),
            "mean": self.mean,
            "reason": self.reason,
            "pairs": [{"raters": [a, b], **r.as_dict()} for (a, b), r in self.pairs.items()],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairwiseResult:
        """The result :meth:`as_dict` wrote (errors as :meth:`AgreementResult.from_dict`)."""
        pairs: dict[tuple[str, str], AgreementResult] = {}
        for entry in d["pairs"]:
            a, b = entry["raters"]
            pairs[(str(a), str(b))] = AgreementResult.from_dict(entry)
        mean = d["mean"]
        return cls(str(d["statistic"]), tuple(str(r) for r in d["raters"]), pairs,
                   None if mean is None else float(mean), _optional_text(d["reason"]))


def _optional_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"expected text or null, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------
# Input checks and encoding


def _is_whole(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_bootstrap(n_boot: int, ci_level: float, seed: int = 0) -> None:
    """Refuse bootstrap settings numpy would choke on (a negative seed, a float n_boot...)."""
    if not _is_whole(n_boot) or not 0 <= n_boot <= MAX_N_BOOT:
        raise AgreementError(
            f"n_boot (the number of bootstrap resamples) must be a whole number from 0 to {MAX_N_BOOT}, got {n_boot!r}",
            hint=f"pass --n-boot N with 0 <= N <= {MAX_N_BOOT} (0: no intervals)",
        )
    if not _is_whole(seed) or seed < 0:
        raise AgreementError(f"seed (of the bootstrap) must be a whole number 0 or more, got {seed!r}", hint="pass --seed N with N >= 0")
    if isinstance(ci_level, bool) or not isinstance(ci_level, (int, float, np.floating)) or not 0.0 < ci_level < 1.0:
        raise AgreementError(f"ci_level (the confidence level) must lie strictly between 0 and 1, got {ci_level!r}", hint="e.g. --ci-level 0.95")


def _as_counts(counts: Any) -> np.ndarray:
    try:
        c = np.asarray(counts, dtype=np.float64)
    except (TypeError, ValueError):
        raise AgreementError("the count matrix must be numbers (items x categories)") from None
    if c.ndim != 2:
        raise AgreementError(f"the count matrix must be 2-D (items x categories), got {c.ndim}-D")
    if c.shape[0] == 0:
        raise AgreementError("the count matrix has no items")
    if not np.isfinite(c).all() or (c < 0).any() or (c != np.round(c)).any():
        raise AgreementError("the count matrix must hold non-negative whole numbers (raters per item and category)")
    return c


def _is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _tidy(value: Any) -> Any:
    """A domain value as a plain Python value (integral floats as int)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass(frozen=True)
class Coded:
    """Labels already read into integer codes: ``codes[i][j]`` indexes ``values`` (-1: missing).

    Every statistic that takes ratings or reliability data takes one in their place and gives
    the same result as on the labels themselves (:func:`encode` recodes it to the domain asked
    for, exactly as it would the labels), without reading the labels one by one again: the
    report codes a kind's labels once and computes every statistic from the codes.
    """

    codes: np.ndarray
    values: tuple[Any, ...]

    @property
    def T(self) -> Coded:  # noqa: N802  (numpy's name: ratings <-> reliability data)
        """Transposed (items x raters <-> raters x units)."""
        return Coded(self.codes.T, self.values)

    def present(self) -> list[Any]:
        """The values given, in the order first seen reading the codes row by row."""
        flat = self.codes.ravel()
        found, first = np.unique(flat[flat >= 0], return_index=True)
        return [self.values[int(c)] for c in found[np.argsort(first, kind="stable")]]


def _encode_coded(rows: Coded, domain: Sequence[Any] | None) -> tuple[np.ndarray, tuple[Any, ...]]:
    """:func:`encode` of coded labels: what the labels themselves would give (object path)."""
    codes = np.asarray(rows.codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[0] == 0:
        raise AgreementError("no ratings given" if codes.size == 0 else f"ratings must be 2-D, got {codes.ndim}-D")
    labels = rows.present()
    if domain is not None:
        index = {v: i for i, v in enumerate(domain)}
        missing = [v for v in labels if v not in index]
        if missing:
            raise AgreementError(f"label {missing[0]!r} is not in the value domain {list(domain)!r}")
        target = list(domain)
    else:
        try:
            target = sorted(labels)
        except TypeError:
            target = labels  # labels of mixed kinds: first-seen order
        index = {v: i for i, v in enumerate(target)}
    remap = np.full(len(rows.values) + 1, -1, dtype=np.int64)  # the last entry: missing stays -1
    for code, value in enumerate(rows.values):
        if value in index:
            remap[code] = index[value]
    return remap[np.where(codes >= 0, codes, len(rows.values))], tuple(_tidy(v) for v in target)


def encode(rows: Any, domain: Sequence[Any] | None = None) -> tuple[np.ndarray, tuple[Any, ...]]:
    """Integer codes for a 2-D array of labels: (codes with -1 for missing, the value domain).

    Without ``domain`` the domain is the sorted distinct labels (first-seen order when they do
    not sort). Numeric arrays take a vectorised path (NaN is missing); other inputs are read
    element by element (None or NaN is missing; labels must be hashable); :class:`Coded` labels
    are recoded to the domain without being read again.
    """
    if isinstance(rows, Coded):
        return _encode_coded(rows, domain)
    arr = rows if isinstance(rows, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(rows)
        except ValueError:
            arr = None
    if arr is not None and arr.dtype.kind in "iuf":
        if arr.ndim != 2:
            raise AgreementError(f"ratings must be 2-D, got {arr.ndim}-D")
        values = arr.astype(np.float64, copy=False)
        present = ~np.isnan(values)
        codes = np.full(values.shape, -1, dtype=np.int64)
        if domain is None:
            dom, inverse = np.unique(values[present], return_inverse=True)
        else:
            try:
                dom = np.asarray(domain, dtype=np.float64)
            except (TypeError, ValueError):
                # Labels are numbers (or there are none) but the domain is not: compare as objects.
                return _encode_objects(rows, domain)
            if len(dom) == 0:
                raise AgreementError("the value domain is empty")
            order = np.argsort(dom, kind="stable")
            sorted_dom = dom[order]
            found = values[present]
            pos = np.clip(np.searchsorted(sorted_dom, found), 0, len(dom) - 1)
            bad = sorted_dom[pos] != found
            if bad.any():
                raise AgreementError(f"label {_tidy(found[bad][0])!r} is not in the value domain {list(domain)!r}")
            inverse = order[pos]
        codes[present] = inverse
        return codes, tuple(_tidy(v) for v in (dom if domain is None else domain))
    return _encode_objects(rows, domain)


def _encode_objects(rows: Any, domain: Sequence[Any] | None) -> tuple[np.ndarray, tuple[Any, ...]]:
    rows = [list(r) for r in rows]
    if not rows:
        raise AgreementError("no ratings given")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise AgreementError(
            "ratings are ragged: every row must have the same length (use None for a missing rating)"
        )
    index: dict[Any, int] = {} if domain is None else {v: i for i, v in enumerate(domain)}
    codes = np.full((len(rows), width), -1, dtype=np.int64)
    for r, row in enumerate(rows):
        for u, x in enumerate(row):
            if _is_missing(x):
                continue
            try:
                code = index.get(x)
            except TypeError:
                raise AgreementError(f"label {x!r} is not hashable (sets must be frozensets or use masi_alpha)") from None
            if code is None:
                if domain is not None:
                    raise AgreementError(f"label {x!r} is not in the value domain {list(domain)!r}")
                code = index[x] = len(index)
            codes[r, u] = code
    labels = list(index)
    if domain is None and labels:
        try:
            order = sorted(range(len(labels)), key=lambda i: labels[i])
        except TypeError:
            order = list(range(len(labels)))  # labels of mixed kinds: first-seen order
        remap = np.empty(len(labels), dtype=np.int64)
        remap[order] = np.arange(len(labels))
        codes = np.where(codes >= 0, remap[np.maximum(codes, 0)], -1).astype(np.int64)  # type: ignore[assignment]
        labels = [labels[i] for i in order]
    return codes, tuple(_tidy(v) for v in labels)


def category_counts(
    ratings: Any, categories: Sequence[Hashable] | None = None
) -> tuple[np.ndarray, tuple[Any, ...]]:
    """The items x categories count matrix of ratings given as items x raters (None = missing).

    >>> counts, cats = category_counts([["a", "b", "a"], ["b", "b", None]])
    >>> counts.tolist(), cats
    ([[2, 1], [0, 2]], ('a', 'b'))
    """
    codes, cats = encode(ratings, categories)
    n_items, k = codes.shape[0], len(cats)
    rows = np.repeat(np.arange(n_items), codes.shape[1])
    flat = codes.ravel()
    keep = flat >= 0
    counts = np.bincount(rows[keep] * k + flat[keep], minlength=n_items * k).reshape(n_items, k)
    return counts, cats


def _result(
    statistic: str,
    value: float,
    reason: str,
    *,
    n_items: int,
    n_raters: int,
    components: Mapping[str, Any],
    stats: np.ndarray | tuple[Any, np.ndarray] | None,
    from_sums: Callable[[np.ndarray], np.ndarray] | None,
    n_boot: int,
    seed: int,
    ci_level: float,
) -> AgreementResult:
    """Package a point value (NaN = undefined, explained by ``reason``) with its bootstrap."""
    if not math.isfinite(value):
        return AgreementResult(
            statistic, None, n_items, n_raters, components, None, ci_level, n_boot, seed,
            reason=reason, ci_reason="the statistic is undefined on these ratings",
        )
    ci_reason: str | None
    ci, undefined, ci_reason = None, 0, "no bootstrap requested (n_boot = 0)"
    if n_boot > 0 and stats is not None and from_sums is not None:
        patterns, counts = stats if isinstance(stats, tuple) else group_rows(stats)
        boot = bootstrap_ci(patterns, counts, from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level)
        ci, undefined, ci_reason = boot.ci, boot.undefined, boot.reason
    return AgreementResult(
        statistic, float(value), n_items, n_raters, components, ci, ci_level, n_boot, seed,
        ci_reason=ci_reason, boot_undefined=undefined,
    )


def _chance_corrected(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """(observed - expected) / (1 - expected), NaN where chance agreement is 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (observed - expected) / (1.0 - expected)
    return np.where(1.0 - expected > _EPS, value, np.nan)


# ---------------------------------------------------------------------------------------------
# Count-matrix statistics


def fleiss_kappa(
    counts: Any,
    *,
    categories: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """Fleiss' kappa of an items x categories count matrix, with P-bar, P-e and per-category kappas.

    Every item must have the same number of ratings (raises :class:`AgreementError` otherwise:
    use :func:`krippendorff_alpha` or :func:`gwet_ac1` for incomplete data).
    """
    check_bootstrap(n_boot, ci_level, seed)
    c = _as_counts(counts)
    n_items, k = c.shape
    names = tuple(categories) if categories is not None else tuple(range(k))
    if len(names) != k:
        raise AgreementError(f"{len(names)} category names for a count matrix with {k} columns")
    per_item = c.sum(axis=1)
    if (per_item != per_item[0]).any():
        sizes, freq = np.unique(per_item, return_counts=True)
        found = ", ".join(f"{int(f)} items with {int(s)}" for s, f in zip(sizes, freq))
        raise AgreementError(
            f"Fleiss' kappa needs the same number of ratings on every item; found {found}",
            hint="use Krippendorff's alpha or Gwet's AC1 (both accept missing ratings), "
            "or keep only the items with every rating",
        )
    n = int(per_item[0])
    if n < 2:
        return AgreementResult(
            "fleiss_kappa", None, n_items, n, {"raters_per_item": n}, reason="fewer than two ratings per item: no pair of ratings to compare",
        )

    def from_sums(s: np.ndarray) -> np.ndarray:
        p_bar = s[:, 0] / n_items
        p = s[:, 1:] / (n_items * n)
        return _chance_corrected(p_bar, (p * p).sum(axis=1))

    p_i = (c * (c - 1.0)).sum(axis=1) / (n * (n - 1))
    stats = np.column_stack([p_i, c])
    value = from_sums(stats.sum(axis=0)[None, :])[0]
    p = c.sum(axis=0) / (n_items * n)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa_j = 1.0 - (c * (n - c)).sum(axis=0) / (n_items * n * (n - 1) * p * (1.0 - p))
    per_category = {
        str(name): (float(kj) if 0 < pj < 1 else None) for name, kj, pj in zip(names, kappa_j, p)
    }
    components = {
        "P_bar": float(p_i.mean()),
        "P_e": float((p * p).sum()),
        "proportions": {str(name): float(pj) for name, pj in zip(names, p)},
        "per_category_kappa": per_category,
        "raters_per_item": n,
    }
    only = [str(name) for name, pj in zip(names, p) if pj > 0]
    reason = f"every rating is in one category ({only[0] if only else '?'}): chance agreement is 1, kappa is undefined"
    return _result(
        "fleiss_kappa", value, reason, n_items=n_items, n_raters=n, components=components,
        stats=stats, from_sums=from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


def _rated_items(c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item: ratings r_i, whether it has two or more, and its pairwise agreement P_i."""
    r = c.sum(axis=1)
    two = r >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        p_i = np.where(two, (c * (c - 1.0)).sum(axis=1) / (r * (r - 1.0)), 0.0)
    return r, two, p_i


def gwet_ac1(
    counts: Any,
    *,
    n_categories: int | None = None,
    categories: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """Gwet's AC1 of an items x categories count matrix; items may have different numbers of ratings.

    ``n_categories`` (default: the number of columns) is ``q``, the categories raters could
    choose from, which matters when some were never used.
    """
    check_bootstrap(n_boot, ci_level, seed)
    c = _as_counts(counts)
    q = n_categories if n_categories is not None else c.shape[1]
    if q < c.shape[1]:
        raise AgreementError(f"n_categories={q} but the count matrix has {c.shape[1]} columns")
    names = tuple(categories) if categories is not None else tuple(range(c.shape[1]))
    c = c[c.sum(axis=1) > 0]
    n_items = len(c)
    if q < 2:
        return AgreementResult("gwet_ac1", None, n_items, 0, {"q": q}, reason="only one category: AC1 needs two or more (chance agreement divides by q - 1)")
    if n_items == 0:
        return AgreementResult("gwet_ac1", None, 0, 0, {"q": q}, reason="no item has a rating")
    r, two, p_i = _rated_items(c)
    if not two.any():
        return AgreementResult("gwet_ac1", None, n_items, int(r.max()), {"q": q}, reason="no item has two or more ratings: nothing to compare")
    k = c.shape[1]

    def from_sums(s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            pa = s[:, 1] / s[:, 0]
            pi = s[:, 3:] / s[:, 2:3]
        pe = (pi * (1.0 - pi)).sum(axis=1) / (q - 1)
        return _chance_corrected(pa, pe)

    stats = np.column_stack([two, p_i, np.ones(n_items), c / r[:, None]])
    value = from_sums(stats.sum(axis=0)[None, :])[0]
    pi = (c / r[:, None]).mean(axis=0)
    components = {
        "P_a": float(p_i[two].mean()),
        "P_e": float((pi * (1 - pi)).sum() / (q - 1)),
        "pi": {str(name): float(v) for name, v in zip(names[:k], pi)},
        "q": q,
        "items_with_two_or_more": int(two.sum()),
    }
    return _result(
        "gwet_ac1", value, "chance agreement is 1: AC1 is undefined", n_items=n_items, n_raters=int(r.max()), components=components,
        stats=stats, from_sums=from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


def percent_agreement(
    counts: Any,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """The share of agreeing rating pairs, averaged over items with two or more ratings."""
    check_bootstrap(n_boot, ci_level, seed)
    c = _as_counts(counts)
    r, two, p_i = _rated_items(c)
    if not two.any():
        return AgreementResult("percent_agreement", None, 0, int(r.max(initial=0)), reason="no item has two or more ratings: nothing to compare")
    stats = np.column_stack([two[two], p_i[two]])

    def from_sums(s: np.ndarray) -> np.ndarray:
        return s[:, 1] / s[:, 0]

    value = float(p_i[two].mean())
    return _result(
        "percent_agreement", value, "no pair of ratings to compare", n_items=int(two.sum()), n_raters=int(r.max()),
        components={"items_with_two_or_more": int(two.sum())},
        stats=stats, from_sums=from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


def proportion(
    successes: Any,
    trials: Any = None,
    *,
    statistic: str = "accuracy",
    n_raters: int = 1,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """``sum(successes) / sum(trials)`` over items, with a bootstrap interval over items.

    One entry per item: ``successes`` may be fractional (a score in [0, 1] per trial) and
    ``trials`` (default 1 each) is how many judgements the item holds, so answers of several
    people to one item are resampled together (blind re-answering accuracy, agreement with the
    majority).
    """
    check_bootstrap(n_boot, ci_level, seed)
    try:
        num = np.asarray(successes, dtype=np.float64).ravel()
        den = np.ones_like(num) if trials is None else np.asarray(trials, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise AgreementError("successes and trials must be numbers, one of each per item") from None
    if not (np.isfinite(num).all() and np.isfinite(den).all()):
        raise AgreementError("successes and trials must be finite numbers (no NaN or infinity)")
    if num.shape != den.shape:
        raise AgreementError(f"{num.size} success counts for {den.size} trial counts: one of each per item")
    if (den < 0).any() or (num < 0).any() or (num > den + _EPS).any():
        raise AgreementError("successes must lie between 0 and the trials of their item")
    keep = den > 0
    num, den = num[keep], den[keep]  # type: ignore[assignment]  # still one dimension
    if num.size == 0:
        return AgreementResult(statistic, None, 0, n_raters, reason="nothing to score")
    stats = np.column_stack([den, num])
    return _result(
        statistic, float(num.sum() / den.sum()), "nothing to score", n_items=int(num.size), n_raters=n_raters,
        components={"successes": float(num.sum()), "trials": float(den.sum())}, stats=stats,
        from_sums=lambda s: s[:, 1] / s[:, 0], n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


# ---------------------------------------------------------------------------------------------
# Two raters, pairs of raters, many raters on ratings


def _disagreement_weights(k: int, weights: Weights | None) -> np.ndarray:
    i = np.arange(k)
    if weights is None:
        return (i[:, None] != i[None, :]).astype(np.float64)
    if weights not in ("linear", "quadratic"):
        raise AgreementError(f"unknown weights {weights!r}: use None, 'linear' or 'quadratic'")
    d = np.abs(i[:, None] - i[None, :]) / max(k - 1, 1)
    return d if weights == "linear" else d * d


def _cohen_from_codes(
    a: np.ndarray,
    b: np.ndarray,
    cats: tuple[Any, ...],
    weights: Weights | None,
    *,
    n_boot: int,
    seed: int,
    ci_level: float,
    statistic: str = "cohen_kappa",
) -> AgreementResult:
    both = (a >= 0) & (b >= 0)
    a, b = a[both], b[both]
    n_items, k = len(a), len(cats)
    if n_items == 0:
        return AgreementResult(statistic, None, 0, 2, {"weights": weights}, reason="the two raters share no rated item")
    w = _disagreement_weights(k, weights)
    confusion = np.bincount(a * k + b, minlength=k * k).astype(np.float64)

    def from_sums(s: np.ndarray) -> np.ndarray:
        o = s.reshape(-1, k, k) / n_items
        e = o.sum(axis=2)[:, :, None] * o.sum(axis=1)[:, None, :]
        do = (o * w).sum(axis=(1, 2))
        de = (e * w).sum(axis=(1, 2))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(de > _EPS, 1.0 - do / de, np.nan)

    value = from_sums(confusion[None, :])[0]
    o = confusion.reshape(k, k) / n_items
    e = np.outer(o.sum(axis=1), o.sum(axis=0))
    components = {
        "P_o": float(np.trace(o)),
        "P_e": float(np.trace(e)),
        "weights": weights,
        "categories": [str(x) for x in cats],
        "confusion": confusion.reshape(k, k).astype(int).tolist(),
    }
    occupied = np.flatnonzero(confusion)
    patterns = np.eye(k * k)[occupied]
    used = sorted({cats[i] for i in np.concatenate([a, b])}, key=str)
    reason = f"both raters put every item in {used[0]!r}: chance agreement is 1, kappa is undefined" if len(used) == 1 else "chance agreement is 1: kappa is undefined"
    return _result(
        statistic, value, reason, n_items=n_items, n_raters=2, components=components,
        stats=(patterns, confusion[occupied]), from_sums=from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


def _ordered_domain(labels: Iterable[Any], categories: Sequence[Any] | None, weights: Weights | None) -> Sequence[Any] | None:
    if categories is not None or weights is None:
        return categories
    present = [x for x in labels if not _is_missing(x)]
    if all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in present):
        return None  # numbers sort into their own order
    raise AgreementError(
        "weighted kappa needs the order of the categories",
        hint="pass categories=[...] from lowest to highest",
    )


def cohen_kappa(
    a: Sequence[Any],
    b: Sequence[Any],
    *,
    weights: Weights | None = None,
    categories: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """Cohen's kappa of two raters' labels (items where either is None are left out).

    ``weights``: None (unweighted), ``"linear"`` or ``"quadratic"`` over the positions of
    ``categories`` (required for weighted kappa unless the labels are numbers).
    """
    check_bootstrap(n_boot, ci_level, seed)
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise AgreementError(f"the two raters have {len(a)} and {len(b)} labels: one per item each")
    domain = _ordered_domain(a + b, categories, weights)
    codes, cats = encode([a, b], domain)
    return _cohen_from_codes(codes[0], codes[1], cats, weights, n_boot=n_boot, seed=seed, ci_level=ci_level)


def _rater_names(n: int, raters: Sequence[str] | None) -> tuple[str, ...]:
    names = tuple(str(r) for r in raters) if raters is not None else tuple(f"rater{i + 1}" for i in range(n))
    if len(names) != n:
        raise AgreementError(f"{len(names)} rater names for {n} columns of ratings")
    if len(set(names)) != n:
        raise AgreementError("rater names must be distinct")
    return names


def _pairwise(
    statistic: str,
    ratings: Any,
    raters: Sequence[str] | None,
    categories: Sequence[Any] | None,
    weights: Weights | None,
    one: Callable[[np.ndarray, np.ndarray, tuple[Any, ...]], AgreementResult],
) -> PairwiseResult:
    rows = ratings if isinstance(ratings, (np.ndarray, Coded)) else [list(r) for r in ratings]
    given = rows.present() if isinstance(rows, Coded) else (x for r in rows for x in r)
    domain = _ordered_domain(given, categories, weights)
    codes, cats = encode(rows, domain)
    names = _rater_names(codes.shape[1], raters)
    if len(names) < 2:
        return PairwiseResult(statistic, names, {}, None, "fewer than two raters")
    pairs = {(names[i], names[j]): one(codes[:, i], codes[:, j], cats) for i, j in combinations(range(len(names)), 2)}
    values = [r.value for r in pairs.values() if r.value is not None]
    reason = None if values else "no pair of raters has a value"
    if values and len(values) < len(pairs):
        reason = f"mean over the {len(values)} of {len(pairs)} pairs that have a value"
    return PairwiseResult(statistic, names, pairs, float(np.mean(values)) if values else None, reason)


def cohen_kappa_matrix(
    ratings: Any,
    *,
    raters: Sequence[str] | None = None,
    weights: Weights | None = None,
    categories: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> PairwiseResult:
    """Cohen's kappa for every pair of raters (columns of items x raters ``ratings``).

    Each pair uses the items both rated. ``mean`` is Light's kappa (the mean over pairs; NLTK's
    ``AnnotationTask.kappa`` on complete data).
    """
    check_bootstrap(n_boot, ci_level, seed)
    return _pairwise(
        "cohen_kappa", ratings, raters, categories, weights,
        lambda a, b, cats: _cohen_from_codes(a, b, cats, weights, n_boot=n_boot, seed=seed, ci_level=ci_level),
    )


def _pair_agreement(a: np.ndarray, b: np.ndarray, *, n_boot: int, seed: int, ci_level: float) -> AgreementResult:
    both = (a >= 0) & (b >= 0)
    same = (a[both] == b[both]).astype(np.float64)
    if same.size == 0:
        return AgreementResult("percent_agreement", None, 0, 2, reason="the two raters share no rated item")
    stats = np.column_stack([np.ones_like(same), same])
    return _result(
        "percent_agreement", float(same.mean()), "the two raters share no rated item", n_items=int(same.size), n_raters=2,
        components={"agreements": int(same.sum())}, stats=stats,
        from_sums=lambda s: s[:, 1] / s[:, 0], n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


def percent_agreement_matrix(
    ratings: Any,
    *,
    raters: Sequence[str] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> PairwiseResult:
    """The share of items two raters label alike, for every pair (items both rated)."""
    check_bootstrap(n_boot, ci_level, seed)
    return _pairwise(
        "percent_agreement", ratings, raters, None, None,
        lambda a, b, cats: _pair_agreement(a, b, n_boot=n_boot, seed=seed, ci_level=ci_level),
    )


def conger_kappa(
    ratings: Any,
    *,
    categories: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """Conger's (Davies and Fleiss') multi-rater kappa of items x raters ratings.

    Chance agreement is the mean over rater pairs of ``sum_k p_gk p_hk``, each rater's
    category shares taken over the items that rater rated; observed agreement is the mean
    ``P_i`` over items with two or more ratings (Gwet 2014; irrCAC ``conger.kappa.raw``).
    """
    check_bootstrap(n_boot, ci_level, seed)
    codes, cats = encode(ratings, categories)
    n_items, n_raters = codes.shape
    k = len(cats)
    if n_raters < 2:
        return AgreementResult("conger_kappa", None, n_items, n_raters, reason="fewer than two raters")
    onehot = np.zeros((n_items, n_raters, k))
    rated = codes >= 0
    ii, rr = np.nonzero(rated)
    onehot[ii, rr, codes[ii, rr]] = 1.0
    c = onehot.sum(axis=1)
    r, two, p_i = _rated_items(c)
    if not two.any():
        return AgreementResult("conger_kappa", None, n_items, n_raters, reason="no item has two or more ratings: nothing to compare")
    pairs = np.array(list(combinations(range(n_raters), 2)))

    def from_sums(s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            pa = s[:, 1] / s[:, 0]
            share = s[:, 2 + n_raters:].reshape(-1, n_raters, k) / s[:, 2:2 + n_raters, None]
        share = np.nan_to_num(share)  # a rater with no item in a resample adds no chance agreement
        pe = (share[:, pairs[:, 0], :] * share[:, pairs[:, 1], :]).sum(axis=2).mean(axis=1)
        return _chance_corrected(pa, pe)

    stats = np.column_stack([two, p_i, rated.astype(np.float64), onehot.reshape(n_items, -1)])
    value = from_sums(stats.sum(axis=0)[None, :])[0]
    share = onehot.sum(axis=0) / np.maximum(rated.sum(axis=0), 1)[:, None]
    pe = float((share[pairs[:, 0]] * share[pairs[:, 1]]).sum(axis=1).mean())
    components = {"P_a": float(p_i[two].mean()), "P_e": pe, "categories": [str(x) for x in cats]}
    return _result(
        "conger_kappa", value, "chance agreement is 1 (every rating in one category): kappa is undefined",
        n_items=int(two.sum()), n_raters=n_raters, components=components,
        stats=stats[two | (r > 0)], from_sums=from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


# ---------------------------------------------------------------------------------------------
# Krippendorff's alpha


def _metric(level: str, domain: tuple[Any, ...], totals: np.ndarray) -> np.ndarray:
    """The squared difference d_ck between domain values for a level of measurement."""
    v = len(domain)
    if level == "nominal":
        return 1.0 - np.eye(v)
    try:
        x = np.asarray(domain, dtype=np.float64)
    except (TypeError, ValueError):
        x = None
    if x is not None and x.shape != (v,):
        x = None  # values that are sequences (pairs, tuples) are not numbers, even if numpy reads them
    if level == "ordinal":
        # Krippendorff (2011): (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2 over the ranks; the
        # domain order is the ranks' order (sorted values, or the value_domain given).
        cum = np.concatenate([[0.0], np.cumsum(totals)])
        lo = np.minimum.outer(np.arange(v), np.arange(v))
        hi = np.maximum.outer(np.arange(v), np.arange(v))
        span = cum[hi + 1] - cum[lo] - (totals[:, None] + totals[None, :]) / 2.0
        return span * span
    if x is None or not np.isfinite(x).all():
        raise AgreementError(f"{level} alpha needs numeric values, got {list(domain)[:5]!r}")
    diff = x[:, None] - x[None, :]
    if level == "interval":
        return diff * diff
    if (x < 0).any():
        raise AgreementError("ratio alpha needs non-negative values")
    total = x[:, None] + x[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(total > 0, diff / total, 0.0)
    return ratio * ratio


def _alpha_from_codes(
    statistic: str,
    codes: np.ndarray,
    domain: tuple[Any, ...],
    delta: Callable[[np.ndarray], "np.ndarray | BlockDistance"],
    describe: Callable[[int], str],
    *,
    n_boot: int,
    seed: int,
    ci_level: float,
    components: Mapping[str, Any] | None = None,
) -> AgreementResult:
    """Alpha from raters x units codes (-1 missing); ``delta(totals)`` gives the V x V differences."""
    n_rows, n_units = codes.shape
    v = len(domain)
    present = codes >= 0
    m_u = present.sum(axis=0)
    pairable = m_u >= 2
    codes = codes[:, pairable]
    present = present[:, pairable]
    m = m_u[pairable].astype(np.float64)
    n_pairable = int(pairable.sum())
    raters_used = int(present.any(axis=1).sum())
    if n_pairable == 0:
        return AgreementResult(statistic, None, 0, raters_used, components or {}, reason="no unit has two or more values: nothing to compare")
    unit_index = np.broadcast_to(np.arange(n_pairable), codes.shape)
    flat = unit_index[present] * v + codes[present]
    totals = np.bincount(codes[present], minlength=v).astype(np.float64)
    made = delta(totals)
    d = made if isinstance(made, BlockDistance) else DenseDistance(made)
    dense = n_pairable * v <= 50_000_000
    if not dense and not isinstance(d, BlockDistance):
        raise AgreementError(
            f"{v} distinct values over {n_pairable} units: too many for the units x values table",
            hint="round or bin interval values first, or compute alpha on a subset",
        )
    # The units x values counts, held only where they are used: by few values' quadratic form.
    counts = np.bincount(flat, minlength=n_pairable * v).reshape(n_pairable, v).astype(np.float64) if dense and v <= 64 else None
    if counts is not None:
        within = d.quadratic(counts)
    else:
        # Many distinct values (sets): sum over pairs of raters instead of V x V per unit.
        within = np.zeros(n_pairable)
        for r, s in combinations(range(n_rows), 2):
            both = present[r] & present[s]
            within[both] += 2.0 * d.pairs(codes[r, both], codes[s, both])
    do_u = within / (m - 1.0)
    boot_stats: np.ndarray | tuple[Any, np.ndarray] | None
    if counts is not None:
        boot_stats = np.column_stack([do_u, counts])
    elif dense:
        # Many values (sets): the units' rows grouped from their few entries, the same distinct
        # rows as grouping the dense units x values statistics, which are never held (with their
        # sorted copy they were four times the distinct rows, the peak of the whole report).
        keys, per = np.unique(flat, return_counts=True)
        boot_stats = group_sparse_rows(do_u, keys // v, keys % v + 1, per, 1 + v) if n_boot > 0 else None
    else:
        # Too wide to hold densely (thousands of tables' sets): one sparse row per unit.
        keys, per = np.unique(flat, return_counts=True)
        units = np.arange(n_pairable)
        boot_stats = (
            SparseRows(n_pairable, 1 + v, np.concatenate([units, keys // v]), np.concatenate([np.zeros(n_pairable, dtype=np.int64), keys % v + 1]),
                       np.concatenate([do_u, per])),
            np.ones(n_pairable, dtype=np.int64),
        )

    def from_sums(s: np.ndarray) -> np.ndarray:
        n_c = s[:, 1:]
        n = n_c.sum(axis=1)
        de = d.quadratic(n_c)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(de > _EPS, 1.0 - (n - 1.0) * s[:, 0] / de, np.nan)

    sums = np.concatenate([[do_u.sum()], totals])
    value = from_sums(sums[None, :])[0]
    n = totals.sum()
    de_total = float(d.quadratic(totals[None, :])[0])
    comp = dict(components or {})
    comp.update({
        "D_o": float(sums[0] / n),
        "D_e": de_total / (n * (n - 1.0)),
        "pairable_values": int(n),
        "units": n_units,
        "pairable_units": n_pairable,
        "values": int(v),
    })
    only = int(np.flatnonzero(totals)[0]) if (totals > 0).sum() == 1 else -1
    reason = describe(only)
    return _result(
        statistic, value, reason, n_items=n_pairable, n_raters=raters_used, components=comp,
        stats=boot_stats, from_sums=from_sums, n_boot=n_boot, seed=seed, ci_level=ci_level,
    )


def krippendorff_alpha(
    reliability_data: Any,
    level: Level = "nominal",
    *,
    value_domain: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """Krippendorff's alpha of raters x units data (None or NaN = missing), at a level of measurement.

    ``value_domain`` fixes the values (and, for ``ordinal``, their order); by default it is the
    sorted distinct values. Units with fewer than two values are not pairable and are left out.
    For ``ordinal``, the rank differences come from the whole sample's value frequencies and are
    held fixed in the bootstrap resamples.
    """
    check_bootstrap(n_boot, ci_level, seed)
    if level not in LEVELS:
        raise AgreementError(f"unknown level of measurement {level!r}: use one of {', '.join(LEVELS)}")
    codes, domain = encode(reliability_data, value_domain)

    def describe(only: int) -> str:
        if only >= 0:
            return f"every pairable value is {domain[only]!r}: expected disagreement is 0, alpha is undefined"
        return "expected disagreement is 0: alpha is undefined"

    result = _alpha_from_codes(
        f"krippendorff_alpha_{level}", codes, domain, lambda totals: _metric(level, domain, totals), describe,
        n_boot=n_boot, seed=seed, ci_level=ci_level, components={"level": level},
    )
    if result.value is None:
        return result
    # The point value comes from the `krippendorff` package (the reference implementation);
    # the per-unit sums above give the bootstrap interval, which the package does not offer.
    value = _alpha_by_package(codes, domain, level)
    if abs(value - result.value) > 1e-7 * max(1.0, abs(value)):  # the two must agree; a gap is a bug, never a choice
        raise AgreementError(f"alpha {result.value!r} differs from the krippendorff package's {value!r}")
    return replace(result, value=value, components={**result.components, "point_value_by": "krippendorff package"})


def _alpha_by_package(codes: np.ndarray, domain: tuple[Any, ...], level: Level) -> float:
    import krippendorff

    if level in ("interval", "ratio"):
        values = np.asarray(domain, dtype=np.float64)
        data = np.where(codes >= 0, values[np.clip(codes, 0, None)], np.nan)
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    # Nominal and ordinal depend only on the order of the values: their codes keep it.
    data = np.where(codes >= 0, codes.astype(np.float64), np.nan)
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level,
                                    value_domain=np.arange(len(domain), dtype=np.float64)))


def as_label_set(label: Any) -> frozenset:
    """A set-valued label as a frozenset; list-like members (``[row, col]``) become tuples."""
    if isinstance(label, (str, bytes)):
        raise AgreementError(f"a set-valued label must be a collection of members, got the string {label!r}")
    try:
        return frozenset(tuple(x) if isinstance(x, (list, tuple)) else x for x in label)
    except TypeError:
        raise AgreementError(f"a set-valued label must be a collection of hashable members, got {label!r}") from None


def masi_distance(a: Iterable[Hashable], b: Iterable[Hashable]) -> float:
    """The MASI distance of two sets (see :func:`masi_distance_matrix`).

    >>> round(masi_distance({1, 2}, {1, 2, 3, 4}), 4)
    0.6667
    """
    a, b = frozenset(a), frozenset(b)
    inter, union = len(a & b), len(a | b)
    if union == 0:
        return 0.0
    if a == b:
        m = 1.0
    elif inter == min(len(a), len(b)):
        m = 2.0 / 3.0
    else:
        m = 1.0 / 3.0 if inter else 0.0
    return 1.0 - inter / union * m


class DenseDistance:
    """A V x V distance matrix, as alpha uses it."""

    def __init__(self, d: np.ndarray) -> None:
        self.d = d

    def quadratic(self, n: np.ndarray) -> np.ndarray:
        """Row by row, ``n @ d @ n`` (n: rows x V counts)."""
        return ((n @ self.d) * n).sum(axis=1)

    def pairs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The distance of each pair of value codes."""
        return self.d[a, b]


class BlockDistance:
    """A distance between values that each belong to a block (the table a set of cells is on):
    1 between values of different blocks (cells of different tables are never the same cell, so
    their sets are disjoint: MASI distance 1), a dense matrix within each block. Memory and time
    grow with the sum of the blocks' squares, not with the square of all values: this is what
    lets MASI alpha run over a study of thousands of questions."""

    def __init__(self, blocks: Sequence[np.ndarray], matrices: Sequence[np.ndarray], n_values: int) -> None:
        self.blocks = [np.asarray(b, dtype=np.int64) for b in blocks]
        self.matrices = list(matrices)
        self.block_of = np.full(n_values, -1, dtype=np.int64)
        self.local = np.zeros(n_values, dtype=np.int64)
        for k, members in enumerate(self.blocks):
            self.block_of[members] = k
            self.local[members] = np.arange(len(members))

    def quadratic(self, n: np.ndarray) -> np.ndarray:
        """Row by row, ``n @ d @ n`` without forming ``d``."""
        total = n.sum(axis=1)
        out = total * total  # every pair at distance 1 ...
        for members, d in zip(self.blocks, self.matrices):
            part = n[:, members]
            within = part.sum(axis=1)
            out = out - within * within + ((part @ d) * part).sum(axis=1)  # ... but pairs within a block
        return out

    def pairs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The distance of each pair of value codes."""
        out = np.ones(len(a), dtype=np.float64)
        same = self.block_of[a] == self.block_of[b]
        for k in np.unique(self.block_of[a][same]):
            pick = same & (self.block_of[a] == k)
            out[pick] = self.matrices[k][self.local[a[pick]], self.local[b[pick]]]
        return out


def masi_distance_matrix(sets: Sequence[frozenset]) -> np.ndarray:
    """The MASI distance between every two sets, vectorised (Passonneau 2006, as in NLTK).

    ``1 - J * M`` with ``J`` the Jaccard index and ``M`` 1 for equal sets, 2/3 when one is a
    subset of the other, 1/3 when they overlap otherwise, 0 when disjoint. Two empty sets are
    equal (distance 0; NLTK divides by zero there).
    """
    sets = [frozenset(s) for s in sets]
    members = {e: i for i, e in enumerate(dict.fromkeys(e for s in sets for e in s))}
    incidence = np.zeros((len(sets), max(len(members), 1)), dtype=np.float32)
    for i, s in enumerate(sets):
        incidence[i, [members[e] for e in s]] = 1.0
    inter = np.rint(incidence @ incidence.T).astype(np.float64)
    size = np.array([len(s) for s in sets], dtype=np.float64)
    a, b = size[:, None], size[None, :]
    union = a + b - inter
    jaccard = np.divide(inter, union, out=np.ones_like(inter), where=union > 0)
    monotonicity = np.where(
        (inter == a) & (inter == b), 1.0,
        np.where(inter == np.minimum(a, b), 2.0 / 3.0, np.where(inter > 0, 1.0 / 3.0, 0.0)),
    )
    return 1.0 - jaccard * monotonicity


def masi_alpha(
    reliability_data: Sequence[Sequence[Any]],
    *,
    blocks: Sequence[Hashable] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> AgreementResult:
    """Krippendorff's alpha over set-valued labels (relevant cells) with the MASI distance.

    ``reliability_data`` is raters x units; each value is a collection (``[[r, c], ...]`` or a
    set) or None when the rater did not label the unit. An empty collection is a label ("no
    cell"), not a missing value.

    ``blocks`` (one per unit: the table its cells are on) keeps the sets of different tables
    apart: a set on one table and a set on another are different values at MASI distance 1 (no
    cell is shared), and distances are computed within each table only (:class:`BlockDistance`),
    so that thousands of questions work. At most :data:`MAX_SET_LABELS` distinct sets per block;
    without ``blocks`` every unit is in one block, as in the textbook formula.
    """
    check_bootstrap(n_boot, ci_level, seed)
    rows = [list(r) for r in reliability_data]
    if not rows:
        raise AgreementError("no ratings given")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise AgreementError("reliability data are ragged: every rater needs one entry per unit (None = missing)")
    if blocks is not None and len(blocks) != width:
        raise AgreementError(f"{len(blocks)} blocks for {width} units: give one block (table) per unit")
    index: dict[tuple[Any, frozenset], int] = {}
    codes = np.full((len(rows), width), -1, dtype=np.int64)
    as_set: dict[Any, frozenset] = {}  # labels repeat (one object per distinct label): read each once
    for r, row in enumerate(rows):
        for u, label in enumerate(row):
            if label is None:
                continue
            if isinstance(label, frozenset):
                cells = as_set.get(label)
                if cells is None:
                    cells = as_set[label] = as_label_set(label)
            else:
                cells = as_label_set(label)
            key = (blocks[u] if blocks is not None else None, cells)
            codes[r, u] = index.setdefault(key, len(index))
    members: dict[Any, list[int]] = {}
    for (block, _), code in index.items():
        members.setdefault(block, []).append(code)
    largest = max((len(m) for m in members.values()), default=0)
    if largest > MAX_SET_LABELS:
        raise AgreementError(
            f"{largest} distinct label sets in one block: the MASI alpha keeps a distance matrix of sets x sets "
            f"per block and accepts at most {MAX_SET_LABELS}",
            hint="give blocks (the table of each unit), or compute it per subtype",
        )
    domain = tuple(index)
    sets = [cells for _, cells in domain]

    def distance(_totals: np.ndarray) -> BlockDistance:
        groups = [np.array(m) for m in members.values()]
        return BlockDistance(groups, [masi_distance_matrix([sets[i] for i in g]) for g in groups], len(domain))

    def describe(only: int) -> str:
        if only >= 0:
            return f"every pairable label is the same set {sorted(sets[only], key=str)!r}: expected disagreement is 0, alpha is undefined"
        return "expected disagreement is 0: alpha is undefined"

    return _alpha_from_codes(
        "masi_alpha", codes, domain, distance, describe,
        n_boot=n_boot, seed=seed, ci_level=ci_level, components={"distance": "masi", "blocks": len(members)},
    )
