"""Reading the y data of a drawn chart and comparing it with TableBench's ``y_references`` (Pass@1).

A chart program runs in a sandboxed child (matplotlib's Agg backend, the figure left open). The child
then calls :func:`read_chart` and sends ``reading.to_dict()`` to the host, which rebuilds it with
:meth:`ChartReading.from_dict` (validating it: the dict comes from an untrusted process) and scores it
with :func:`chart_matches` against the references parsed by :func:`parse_y_references`.

Only :func:`read_chart` needs matplotlib and imports it when called, so the host imports this module
cheaply (stdlib only at the top).

What is read (always from the *current* axes of the *current* pyplot figure, as TableBench does with
``plt.gca()``; with several axes that is the last one created or made current, e.g. the twin of
``ax.twinx()``; other axes are ignored). One series per drawing call, in drawing order:

==========  ==========================================================================================
line        every ``Line2D`` of the axes (``ax.lines``, so an ``axhline`` counts too): its ``ydata``
radar       as line, each line without its last point (the point that closes the loop). The last point
            is dropped whether or not it repeats the first, as TableBench does
bar         every ``BarContainer`` of the axes (one per ``bar`` call or pandas column): patch heights
waterfall   as bar (heights, i.e. the signed steps of bars drawn with ``bottom=``)
hbar        as bar, patch widths (the type asked for decides, not the bars' orientation, as in TableBench)
pie         the ``Wedge`` patches of the axes: (theta2 - theta1) / 360; one series per pie (a new
            series where the centre or radius changes, e.g. the inner ring of a donut)
area        every ``PolyCollection`` (``fill_between``, ``stackplot``, pandas ``kind='area'``): the y of
            the vertices of its first path, exact zeros dropped. That is TableBench's rule and it is
            kept although it reads more than the curve: pandas ``kind='area'`` and ``stackplot`` fill
            from a zero baseline given as the *first* curve, so the path's start, end and closing
            points repeat the first and last values (``[1, 2, 3]`` reads as ``[1, 3, 3, 2, 1, 1]``),
            and a stacked series' path holds its lower boundary too. Only ``fill_between(x, y)``
            reads as exactly ``y``
scatter     every ``PathCollection`` (``scatter``): the y of its offsets
==========  ==========================================================================================

Bars are read from the axes' containers and not from ``ax.patches`` (TableBench reads every patch), so
the axes' background patch, legend handles, ``axvspan`` rectangles or ``fill`` polygons are never
counted; pie reads only wedges, area only polygon collections, scatter only path collections (a
``fill_between`` in a scatter chart does not add a zero). Lines are all of ``ax.lines``, as in TableBench.

Comparison (:func:`chart_matches`), as TableBench's: drawn values and references are each flattened,
rounded to 2 decimals, sorted and compared exactly (same length, same values); for pie charts the
references are first turned into shares of their sum. The rounding is TableBench's to the bit: the
drawn values it reads are numpy scalars, which numpy rounds as ``rint(x * 100) / 100`` (half to even
on the scaled value), while the references are Python numbers, which ``round`` rounds correctly; so a
drawn 1.685 rounds to 1.68 but a reference 1.685 to 1.69 and they do not match. NaN matches NaN at
the same sorted position (TableBench's data has one ``np.nan`` reference). Drawing twice into one
figure (TableBench runs chart code twice) is the runner's business, not this module's.
"""

from __future__ import annotations

import ast
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from tqaforge.errors import TqaforgeError

__all__ = [
    "CHART_TYPES",
    "MAX_CHART_VALUES",
    "ChartReading",
    "chart_matches",
    "chart_type_of",
    "parse_y_references",
    "read_chart",
]

CHART_TYPES: tuple[str, ...] = ("line", "bar", "hbar", "pie", "area", "scatter", "radar", "waterfall")

# A reading with more values than this is refused (read_chart reports an error, from_dict raises):
# no TableBench chart comes near it, and the dict crosses a process boundary.
MAX_CHART_VALUES = 1_000_000
_MAX_TEXT = 2_000  # longest chart_type / error string accepted from the child

# TableBench's own values are the CHART_TYPES; a few spellings of the same types are accepted too.
_CHART_TYPE_ALIASES: dict[str, str] = {
    **{name: name for name in CHART_TYPES},
    "barh": "hbar",
    "horizontal bar": "hbar",
    "horizontal_bar": "hbar",
    "horizontalbar": "hbar",
    "lines": "line",
    "bars": "bar",
}


class _ReadError(TqaforgeError):
    """Internal: why a chart could not be read (becomes ChartReading.error)."""


@dataclass(frozen=True)
class ChartReading:
    """What was read from a chart: ``y`` (one list per drawn series, in drawing order) or ``error``.

    Exactly one of ``y`` and ``error`` is set. ``chart_type`` is the type asked for (an unknown one is
    kept, with an error, so that the reading says what was asked).
    """

    chart_type: str
    y: list[list[float]] | None
    error: str | None

    def __post_init__(self) -> None:
        _check_reading(self.chart_type, self.y, self.error)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (str, None, lists of floats; NaN and infinities may occur in ``y``)."""
        return {
            "chart_type": self.chart_type,
            "y": None if self.y is None else [list(series) for series in self.y],
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChartReading:
        """Rebuild a reading sent by the child; ValueError on anything but what :meth:`to_dict` makes."""
        if not isinstance(d, Mapping):
            raise ValueError(f"chart reading: expected a mapping, got {type(d).__name__}")
        keys = set(d)
        expected = {"chart_type", "y", "error"}
        if keys != expected:
            missing, extra = sorted(expected - keys), sorted(map(repr, keys - expected))
            raise ValueError(f"chart reading: keys must be {sorted(expected)} (missing {missing}, unexpected {extra})")
        y = d["y"]
        if y is not None:
            if not isinstance(y, list):
                raise ValueError(f"chart reading: 'y' must be a list of lists of numbers or null, got {type(y).__name__}")
            rebuilt: list[list[float]] = []
            for i, series in enumerate(y):
                if not isinstance(series, list):
                    raise ValueError(f"chart reading: series {i} must be a list of numbers, got {type(series).__name__}")
                values: list[float] = []
                for value in series:
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise ValueError(f"chart reading: series {i} holds a non-number: {type(value).__name__}")
                    try:
                        values.append(float(value))
                    except OverflowError:
                        raise ValueError(f"chart reading: series {i} holds an integer too large for a float") from None
                rebuilt.append(values)
            y = rebuilt
        try:
            return cls(chart_type=d["chart_type"], y=y, error=d["error"])
        except TypeError as exc:
            raise ValueError(f"chart reading: {exc}") from None


def _check_reading(chart_type: object, y: object, error: object) -> None:
    """TypeError unless the fields have the shapes a reading may have."""
    if not isinstance(chart_type, str) or len(chart_type) > _MAX_TEXT:
        raise TypeError(f"chart_type must be a string of at most {_MAX_TEXT} characters")
    if (y is None) == (error is None):
        raise TypeError("exactly one of y and error must be set")
    if error is not None and (not isinstance(error, str) or not error or len(error) > _MAX_TEXT):
        raise TypeError(f"error must be a non-empty string of at most {_MAX_TEXT} characters")
    if y is not None:
        if not isinstance(y, list) or not y:
            raise TypeError("y must be a non-empty list of series")
        total = 0
        for series in y:
            if not isinstance(series, list) or not all(type(v) is float for v in series):
                raise TypeError("each series of y must be a list of floats")
            total += len(series)
        if total > MAX_CHART_VALUES:
            raise TypeError(f"y holds {total} values, more than {MAX_CHART_VALUES}")


# --- reading the current figure (the only part that needs matplotlib) ------------------------------


def read_chart(chart_type: str) -> ChartReading:
    """Read the y data of the current pyplot figure's current axes as a ``chart_type`` chart.

    Never creates a figure or axes and never raises for a bad chart: the reading's ``error`` says why
    nothing was read (unknown chart type, no figure, no axes, nothing of that kind drawn, non-numeric
    data).
    """
    if chart_type not in CHART_TYPES:
        shown = str(chart_type)[:80]
        return ChartReading(str(chart_type)[:_MAX_TEXT], None, f"unknown chart type {shown!r}; expected one of {', '.join(CHART_TYPES)}")
    # A program that never imported pyplot drew no pyplot figure: no need to import it (and pick a backend).
    if "matplotlib.pyplot" not in sys.modules:
        return ChartReading(chart_type, None, "no figure: the program drew nothing with matplotlib.pyplot")
    import matplotlib.pyplot as plt

    if not plt.get_fignums():
        return ChartReading(chart_type, None, "no figure: the program drew nothing (or closed its figures)")
    fig = plt.gcf()
    if not fig.axes:
        return ChartReading(chart_type, None, "no axes: the current figure is empty")
    ax = fig.gca()
    try:
        series = _READERS[chart_type](ax)
    except _ReadError as exc:
        return ChartReading(chart_type, None, str(exc)[:_MAX_TEXT])
    except Exception as exc:  # an artist the program made that does not behave: still a reading
        return ChartReading(chart_type, None, f"could not read the chart: {type(exc).__name__}: {exc}"[:_MAX_TEXT])
    if not series:
        return ChartReading(chart_type, None, f"nothing drawn: no {_WHAT[chart_type]} on the current axes")
    total = sum(len(s) for s in series)
    if total > MAX_CHART_VALUES:
        return ChartReading(chart_type, None, f"too many values: {total} (more than {MAX_CHART_VALUES})")
    return ChartReading(chart_type, series, None)


_WHAT = {
    "line": "lines",
    "radar": "lines",
    "bar": "bar containers",
    "waterfall": "bar containers",
    "hbar": "bar containers",
    "pie": "pie wedges",
    "area": "filled areas (PolyCollection)",
    "scatter": "scatter collections (PathCollection)",
}


def _floats(values: Any, what: str) -> list[float]:
    """The values as Python floats (masked entries as NaN); _ReadError when they are not numbers."""
    import numpy as np

    if isinstance(values, np.ma.MaskedArray):
        if values.dtype.kind in "biuf":
            values = np.ma.filled(values.astype(float), np.nan)
        else:
            values = np.ma.filled(values.astype(object), None)
    arr = np.asarray(values)
    if arr.dtype.kind in "biuf":
        return [float(v) for v in arr.astype(float).ravel()]
    out: list[float] = []
    for v in arr.ravel():
        if isinstance(v, (str, bytes)) or not isinstance(v, (int, float, np.number)):
            raise _ReadError(f"{what} holds non-numeric data: {str(v)[:80]!r}")
        try:
            out.append(float(v))
        except (TypeError, ValueError, OverflowError):
            raise _ReadError(f"{what} holds non-numeric data: {str(v)[:80]!r}") from None
    return out


def _read_lines(ax: Any) -> list[list[float]]:
    return [_floats(line.get_ydata(), f"line {i + 1}") for i, line in enumerate(ax.get_lines())]


def _read_radar(ax: Any) -> list[list[float]]:
    return [ys[:-1] for ys in _read_lines(ax)]


def _bar_containers(ax: Any) -> Iterable[list[Any]]:
    """The patches of each BarContainer still on the axes, one list per container."""
    from matplotlib.container import BarContainer

    on_axes = {id(p) for p in ax.patches}
    for container in ax.containers:
        if isinstance(container, BarContainer):
            patches = [p for p in container.patches if id(p) in on_axes]
            if patches:
                yield patches


def _read_bar_heights(ax: Any) -> list[list[float]]:
    return [_floats([p.get_height() for p in patches], f"bar series {i + 1}") for i, patches in enumerate(_bar_containers(ax))]


def _read_bar_widths(ax: Any) -> list[list[float]]:
    return [_floats([p.get_width() for p in patches], f"bar series {i + 1}") for i, patches in enumerate(_bar_containers(ax))]


def _read_pie(ax: Any) -> list[list[float]]:
    """Wedge shares in patch order; a new series starts where the centre or radius changes (a second pie)."""
    from matplotlib.patches import Wedge

    series: list[list[float]] = []
    last_key: tuple[float, float, float] | None = None
    for patch in ax.patches:
        if isinstance(patch, Wedge):
            key = (float(patch.center[0]), float(patch.center[1]), float(patch.r))
            if key != last_key:
                series.append([])
                last_key = key
            series[-1].extend(_floats([(patch.theta2 - patch.theta1) / 360.0], "pie wedge"))
    return series


def _read_area(ax: Any) -> list[list[float]]:
    import numpy as np
    from matplotlib.collections import PolyCollection

    series: list[list[float]] = []
    for i, collection in enumerate(c for c in ax.collections if isinstance(c, PolyCollection)):
        paths = collection.get_paths()
        ys = _floats(np.asarray(paths[0].vertices)[:, 1], f"area {i + 1}") if paths else []
        series.append([v for v in ys if v != 0])
    return series


def _read_scatter(ax: Any) -> list[list[float]]:
    import numpy as np
    from matplotlib.collections import PathCollection

    series: list[list[float]] = []
    for i, collection in enumerate(c for c in ax.collections if isinstance(c, PathCollection)):
        offsets = np.ma.asarray(collection.get_offsets())  # masked where scatter got NaN
        series.append(_floats(offsets[:, 1], f"scatter {i + 1}") if offsets.ndim == 2 and len(offsets) else [])
    return series


_READERS = {
    "line": _read_lines,
    "radar": _read_radar,
    "bar": _read_bar_heights,
    "waterfall": _read_bar_heights,
    "hbar": _read_bar_widths,
    "pie": _read_pie,
    "area": _read_area,
    "scatter": _read_scatter,
}


# --- references and the comparison (pure, no matplotlib) --------------------------------------------


# TableBench evaluates the answer line as code with numpy imported as np, and one answer of its data
# uses ``np.nan``. literal_eval knows no names, so that name becomes a sentinel string first.
_NAN_NAME = re.compile(r"\b(?:np|numpy)\.nan\b")
_NAN_SENTINEL = "\x00np.nan"


def parse_y_references(text: str) -> list[list[float]]:
    """The series of a TableBench chart answer ``y_references = [[...], ...]``.

    Only the right-hand side is evaluated, with :func:`ast.literal_eval`, after ``np.nan`` (or
    ``numpy.nan``) is replaced by a placeholder read back as NaN. A flat list (``y_references = [1, 2]``,
    which TableBench's data has too) is one series; in a mixed list each run of bare numbers is one
    series. Numbers only (no booleans, strings or infinities); ValueError otherwise. Integers stay ints.
    """
    if not isinstance(text, str):
        raise ValueError(f"y_references: expected a string, got {type(text).__name__}")
    name, sep, rhs = text.partition("=")
    if not sep or name.strip() != "y_references":
        raise ValueError(f"not a chart answer: expected 'y_references = [[...]]', got {text[:80]!r}")
    rhs = rhs.strip()
    try:
        value = ast.literal_eval(_NAN_NAME.sub(lambda _: repr(_NAN_SENTINEL), rhs))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"y_references: the right-hand side is not a Python literal ({type(exc).__name__}): {rhs[:80]!r}") from None
    if not isinstance(value, list) or not value:
        raise ValueError(f"y_references: expected a non-empty list of lists of numbers, got {rhs[:80]!r}")
    series: list[list[float]] = []
    run: list[float] | None = None
    for i, item in enumerate(value):
        if isinstance(item, list):
            series.append([_reference_number(v, f"series {i + 1}") for v in item])
            run = None
        else:
            if run is None:
                run = []
                series.append(run)
            run.append(_reference_number(item, f"item {i + 1}"))
    return series


def _reference_number(value: object, where: str) -> float:
    if value == _NAN_SENTINEL:
        return math.nan
    if isinstance(value, str):
        # One TableBench answer quotes its values ('$9,589'): TableBench's round() fails on them, so
        # that question can never pass there; we refuse it rather than guess a number.
        raise ValueError(f"y_references: {where} holds the string {value!r}, not a number (TableBench cannot score it either)")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"y_references: {where} holds {value!r}, not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"y_references: {where} holds {value!r}, not a finite number")
    if isinstance(value, int) and abs(value) > 2**53:
        raise ValueError(f"y_references: {where} holds {value}, too large to compare exactly")
    return value  # ints stay ints: round(int, 2) is the int itself, as in TableBench


def _round_drawn(x: float) -> float:
    """numpy's ``round(x, 2)`` on a float64: rint(x * 100) / 100 (half to even on the scaled value)."""
    if not math.isfinite(x) or x == int(x):
        return x  # integers (every float beyond 2**53 is one), NaN and infinities round to themselves
    return round(x * 100) / 100


def _round_reference(x: float) -> float:
    """Python's ``round(x, 2)`` (correctly rounded), as TableBench rounds the references."""
    return round(x, 2)


def comparable_values(y: list[list[float]], chart_type: str | None, *, drawn: bool = True) -> list[float]:
    """Chart data as TableBench compares it: flattened, rounded to 2 decimals, sorted.

    ``drawn`` data (a reading) round as numpy rounds them; references (``drawn=False``) as Python's
    ``round`` does, pie references becoming shares of their sum first (ValueError when the sum is 0).
    The answers stage votes on these values (two drawn charts agree when their lists are equal).
    """
    flat: list[float] = []
    for item in y:
        if isinstance(item, (list, tuple)):
            flat.extend(item)
        else:
            flat.append(item)
    if drawn:
        values = [_round_drawn(v) for v in flat]
    else:
        if chart_type == "pie":
            total = sum(flat)
            if total == 0:
                raise ValueError("y_references: a pie chart whose values sum to 0 has no shares")
            flat = [_round_reference(r / total) for r in flat]
        values = [_round_reference(r) for r in flat]
    values.sort()
    return values


def chart_matches(reading: ChartReading, y_references: list[list[float]]) -> bool:
    """TableBench's Pass@1 for one chart: flattened, rounded to 2 decimals, sorted, exactly equal
    (:func:`comparable_values` of both sides).

    Pie references become shares of their sum first (a zero sum never matches). A reading with an
    error never matches. NaN (a reference's ``np.nan``, a bar drawn from an empty cell) equals NaN at
    the same position after sorting, as in TableBench: both lists keep their drawing / reference
    order before ``list.sort``, whose result with NaNs depends on that order.
    """
    if reading.y is None:
        return False
    drawn = comparable_values(reading.y, reading.chart_type)
    try:
        wanted = comparable_values(y_references, reading.chart_type, drawn=False)
    except ValueError:
        return False  # TableBench divides by zero here: no match
    if len(drawn) != len(wanted):
        return False
    return all((math.isnan(w) and math.isnan(v)) if math.isnan(w) else w == v for w, v in zip(wanted, drawn))


def chart_type_of(text: str) -> str | None:
    """The CHART_TYPES name for a TableBench ``chart_type`` value (``"bar"``, ``"hbar"``, ``"pie"``...).

    Case and surrounding spaces are ignored; a few spellings (``"barh"``, ``"horizontal bar"``) are
    accepted; anything else (or a non-string) is None.
    """
    if not isinstance(text, str):
        return None
    return _CHART_TYPE_ALIASES.get(" ".join(text.strip().lower().split()))
