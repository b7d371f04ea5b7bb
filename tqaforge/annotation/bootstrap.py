"""A seeded bootstrap over items, vectorised over the resamples.

Every statistic in :mod:`tqaforge.annotation.agreement` is a function of *column sums of per-item
statistics* (Fleiss' kappa of the items' agreement and category counts, Cohen's kappa of the
cells of the confusion matrix, Krippendorff's alpha of the units' disagreements and value
counts...). A bootstrap resample of the items therefore needs no re-run of the statistic: it
needs only how many times each item was drawn, ``W`` (resamples x items), and ``W @ stats``.

Items with identical statistics are interchangeable, so they are grouped first: with ``U``
distinct rows among ``n`` items, how often each distinct row is drawn in a resample of ``n``
items is multinomial(``n``, counts / ``n``), ``U`` draws per resample instead of ``n``. Rating
data has few distinct rows (10,000 items by 5 raters into 3 categories have at most 21), which
makes a 1,000-sample bootstrap on 10,000 items take milliseconds. When most rows are distinct
(set-valued labels), the items are drawn directly, in chunks that bound the memory.

The interval is the percentile interval of the resampled values. Resamples in which the
statistic is undefined (all of a resample's ratings in one category) are counted and left out;
when they are the majority, no interval is given and the reason says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from tqaforge.errors import AgreementError

#: Values drawn per chunk (bounds the memory of the weight matrices).
_CHUNK_CELLS = 4_000_000
#: Pieces each chunk of item draws is drawn in (bounds the memory of drawing).
_DRAW_PIECES = 8


@dataclass(frozen=True, slots=True)
class BootstrapCI:
    """A percentile interval and how many resamples had no value."""

    ci: tuple[float, float] | None
    undefined: int
    reason: str | None = None


def group_rows(stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``stats`` in lexicographic order and how many items have each.

    What ``np.unique(stats, axis=0, return_counts=True)`` gives (the same rows in the same order,
    which the resampling depends on), without its sort of rows as opaque records: a lexsort of
    the columns, several times faster on tens of thousands of items. Rows with a NaN (never a
    statistic's) go to ``np.unique``.
    """
    stats = np.asarray(stats)
    if stats.ndim != 2 or stats.shape[0] == 0 or stats.dtype.kind != "f" or np.isnan(stats).any():
        patterns, counts = np.unique(stats, axis=0, return_counts=True)
        return patterns, counts
    ordered = stats[np.lexsort(stats.T[::-1])]  # by column 0, then 1, ...
    starts = np.flatnonzero(np.concatenate([[True], (ordered[1:] != ordered[:-1]).any(axis=1)]))
    counts = np.diff(np.append(starts, len(ordered)))
    return ordered[starts], counts


def group_sparse_rows(
    first: np.ndarray, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`group_rows` of the rows ``[first[i], 0, ..., 0]`` with ``values`` at ``(rows, cols)``
    (columns from 1, at most one entry per place, values positive), without holding them densely
    more than once: the same distinct rows in the same order, and the same counts.

    Rows are compared by keys of their few entries: ``first``, then per entry in column order
    the negated column and the value (a row with an entry in an earlier column is the greater:
    the other has 0 there), a row's end marked by a key below every column's. Their lexsort is
    the lexsort of the dense rows; only the distinct rows are then written out densely.
    """
    first = np.asarray(first, dtype=np.float64)
    n = len(first)
    order = np.lexsort((cols, rows))  # entries by row, then column
    rows, cols, values = rows[order], cols[order], np.asarray(values, dtype=np.float64)[order]
    per_row = np.bincount(rows, minlength=n)
    width_keys = int(per_row.max(initial=0))
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(per_row) - per_row, per_row)  # an entry's place in its row
    column_key = np.full((n, width_keys), -float(width + 1))  # past a row's last entry: below any column
    value_key = np.zeros((n, width_keys))
    column_key[rows, slot] = -cols.astype(np.float64)
    value_key[rows, slot] = values
    keys = [first] + [k for j in range(width_keys) for k in (column_key[:, j], value_key[:, j])]
    ordered = np.lexsort(keys[::-1])  # by first, then the first entry's column and value, ...
    sorted_keys = np.column_stack([k[ordered] for k in keys]) if keys else np.zeros((n, 0))
    starts = np.flatnonzero(np.concatenate([[True], (sorted_keys[1:] != sorted_keys[:-1]).any(axis=1)])) if n else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.append(starts, n))
    kept = ordered[starts]  # one row of each kind
    patterns = np.zeros((len(kept), width))
    patterns[:, 0] = first[kept]
    position = np.full(n, -1, dtype=np.int64)
    position[kept] = np.arange(len(kept))
    mine = position[rows] >= 0
    patterns[position[rows[mine]], cols[mine]] = values[mine]
    return patterns, counts


def item_counts(counts: np.ndarray) -> np.ndarray:
    """``counts`` as whole numbers of items (int64), whatever dtype the caller built them in.

    Callers build counts as sums (a confusion matrix is float), but drawing items needs
    integers: ``np.repeat`` and ``multinomial`` refuse float counts.
    """
    values = np.asarray(counts, dtype=np.float64).ravel()
    if values.size == 0 or not np.isfinite(values).all() or (values < 0).any() or (values != np.round(values)).any():
        raise AgreementError(
            f"bootstrap item counts must be non-negative whole numbers, got {values[:5].tolist()!r}",
            hint="this is a bug in the statistic that called the bootstrap; please report it",
        )
    return values.astype(np.int64)


class SparseRows:
    """A rows x columns matrix of few non-zero entries (``rows[i], cols[i]`` holds ``values[i]``),
    for bootstrap statistics too wide to hold densely (one column per distinct set of cells):
    ``weights @ SparseRows`` gives the dense (resamples x columns) sums."""

    __array_ufunc__ = None  # numpy hands ``ndarray @ SparseRows`` to __rmatmul__

    def __init__(self, n_rows: int, n_cols: int, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        self.shape = (n_rows, n_cols)
        self.rows, self.cols, self.values = rows, cols, values.astype(np.float64)

    def __rmatmul__(self, weights: np.ndarray) -> np.ndarray:
        """Exactly the sums of ``np.add.at`` entry by entry (the bootstrap depends on every bit).

        Item draws are whole numbers, and so are most columns' values (counts): those columns'
        sums are whole numbers too, exact in any order, so they are summed as integers, a column
        at a time (entries sorted by column, ``np.add.reduceat``). A column with a fraction (a
        unit's disagreement) is summed entry by entry in order (``np.cumsum``), as ``add.at``
        sums it: the same roundings, so the same bits."""
        weights = np.atleast_2d(weights)
        b = weights.shape[0]
        out = np.zeros((b, self.shape[1]))
        if len(self.values) == 0 or b == 0:
            return out
        whole_values = self.values == np.round(self.values)
        exact = _whole(weights) and _largest(weights) * float(np.abs(self.values).sum()) < 2.0**53
        fractional = np.zeros(self.shape[1], dtype=bool)
        fractional[self.cols[~whole_values] if exact else self.cols] = True
        by_sum = np.flatnonzero(~fractional[self.cols])
        if by_sum.size:
            order = by_sum[np.argsort(self.cols[by_sum], kind="stable")]
            cols = self.cols[order]
            starts = np.flatnonzero(np.concatenate([[True], cols[1:] != cols[:-1]]))
            rows, values = self.rows[order], self.values[order].astype(np.int64)
            step = max(1, _CHUNK_CELLS // _DRAW_PIECES // len(order))  # bounds the (resamples x entries) products
            for start in range(0, b, step):
                part = weights[start:start + step].astype(np.int64)[:, rows] * values
                out[start:start + step, cols[starts]] = np.add.reduceat(part, starts, axis=1)
        for col in np.flatnonzero(fractional):
            entries = np.flatnonzero(self.cols == col)
            step = max(1, _CHUNK_CELLS // _DRAW_PIECES // len(entries))
            for start in range(0, b, step):  # row by row, so in pieces of rows: the same sums
                terms = weights[start:start + step][:, self.rows[entries]] * self.values[entries]
                out[start:start + step, col] = np.cumsum(terms, axis=1)[:, -1]
        return out


def _pieces(a: np.ndarray) -> Iterator[np.ndarray]:
    """Rows of ``a`` a piece at a time (checks on the weights without a copy of them)."""
    step = max(1, _CHUNK_CELLS // _DRAW_PIECES // max(a.shape[1], 1))
    for start in range(0, a.shape[0], step):
        yield a[start:start + step]


def _whole(a: np.ndarray) -> bool:
    """Whether every entry is a finite whole number."""
    return all(bool(np.isfinite(p).all()) and bool((p == np.round(p)).all()) for p in _pieces(a))


def _largest(a: np.ndarray) -> float:
    """The largest absolute entry."""
    return max(float(np.abs(p).max()) for p in _pieces(a))


def resampled_sums(
    patterns: np.ndarray, counts: np.ndarray, n_boot: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Column sums of ``patterns`` weighted by bootstrap draws, yielded in chunks of resamples.

    ``patterns[u]`` is the statistic row shared by ``counts[u]`` items; each resample draws
    ``counts.sum()`` items with replacement.
    """
    counts = item_counts(counts)
    n = int(counts.sum())
    u = len(counts)
    if u * 4 <= n:
        # Few distinct rows: multinomial counts per row, U draws per resample.
        p = counts / n
        step = max(1, _CHUNK_CELLS // max(u, 1))
        for start in range(0, n_boot, step):
            b = min(step, n_boot - start)
            yield rng.multinomial(n, p, size=b).astype(np.float64) @ patterns
        return
    # Mostly distinct rows: draw item indices and count them per resample.
    item_pattern = np.repeat(np.arange(u), counts)
    step = max(1, _CHUNK_CELLS // max(n, 1))
    # Drawn a few resamples at a time into the chunk's weights: the generator hands out the same
    # numbers in the same order whatever the pieces, so the weights are the same, in a fraction
    # of the memory (one chunk's draws and their counting held several copies of b x n).
    draw = max(1, step // _DRAW_PIECES)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        # Sparse sums are row by row (SparseRows.__rmatmul__): summed a piece at a time, without
        # the chunk's whole weights; dense ones take the chunk's weights in one product, as before.
        sparse = isinstance(patterns, SparseRows)
        weights = np.empty((draw if sparse else b, u))
        sums = np.empty((b, patterns.shape[1])) if sparse else None
        for first in range(0, b, draw):
            k = min(draw, b - first)
            drawn = item_pattern[rng.integers(0, n, size=(k, n))]
            drawn += (np.arange(k) * u)[:, None]
            at = 0 if sparse else first
            weights[at:at + k] = np.bincount(drawn.ravel(), minlength=k * u).reshape(k, u)
            if sums is not None:
                sums[first:first + k] = weights[:k] @ patterns
        yield sums if sums is not None else weights @ patterns


def bootstrap_ci(
    patterns: np.ndarray,
    counts: np.ndarray,
    from_sums: Callable[[np.ndarray], np.ndarray],
    *,
    n_boot: int,
    seed: int,
    ci_level: float,
) -> BootstrapCI:
    """The percentile interval of ``from_sums`` over ``n_boot`` resamples of the items.

    ``from_sums`` maps a (resamples x statistics) array of column sums to one value per
    resample, NaN where the statistic is undefined in that resample.
    """
    if n_boot <= 0:
        return BootstrapCI(None, 0, "no bootstrap requested (n_boot = 0)")
    rng = np.random.default_rng(seed)
    values = np.concatenate([from_sums(s) for s in resampled_sums(patterns, counts, n_boot, rng)])
    finite = values[np.isfinite(values)]
    undefined = int(n_boot - finite.size)
    if finite.size * 2 < n_boot:
        return BootstrapCI(
            None, undefined,
            f"the statistic is undefined in {undefined} of {n_boot} resamples (too few items or too little variety)",
        )
    tail = (1.0 - ci_level) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return BootstrapCI((float(low), float(high)), undefined)
