"""Vega-Lite specs of the app's charts, built from library results (pure: no Streamlit call, so
tests read what a page would draw). Our own specs rather than Streamlit's ``bar_chart``: that one
imports Altair (a second or so of a page's first render), sorts bars alphabetically and, given
an empty Series, draws an empty box with a warning."""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from tqaforge.annotation.agreement import AgreementResult, PairwiseResult

#: The cell of a pair whose statistic is undefined: light, outlined and labelled, so it reads in a
#: light and a dark theme alike (it was grey on black).
UNDEFINED_FILL, UNDEFINED_STROKE, UNDEFINED_TEXT = "#f2f2f2", "#888888", "n/a"


#: The value axis' number format (d3-format) of every chart.
VALUE_FORMAT = ",~r"
#: Every chart's sizing: as wide as its column, and its plot as tall as the spec says, the title,
#: axes and rotated labels added around it. (Streamlit's default, "fit", squeezes all of those
#: into the height: a subtype's long name left a bar chart a plot of a few pixels.)
AUTOSIZE = {"type": "fit-x", "contains": "padding"}


def bar_spec(values: Mapping[str, float], title: str, axis: str, *, order: Sequence[str] | None = None,
             horizontal: bool = False, domain: tuple[float, float] | None = None) -> dict[str, Any]:
    """A bar per name, in ``order`` (else as given), the value axis titled ``axis`` and spanning
    ``domain`` when given (a lone 0 otherwise makes an axis of "0.000000" and no bar)."""
    names = list(order) if order is not None else list(values)
    name = {"field": "name", "type": "nominal", "sort": names, "title": None,
            "axis": {"labelLimit": 300} | ({} if horizontal else {"labelAngle": -30})}
    # ",~r": Vega gives the specifier the precision its tick step needs, and "g" then writes
    # 100 and 120 as "1e+2" and "1.2e+2"; "r" writes them as they are (and 0.85 as 0.85).
    value: dict[str, Any] = {"field": "value", "type": "quantitative", "title": axis, "axis": {"format": VALUE_FORMAT}}
    if domain is not None:
        value["scale"] = {"domain": list(domain)}
    return {
        "data": {"values": [{"name": k, "value": values[k]} for k in names if k in values]}, "mark": "bar", "title": title,
        "autosize": AUTOSIZE,
        # Horizontal: a band per name tall enough for its label (a fixed height squeezed the nine
        # stages of the funnel until Vega dropped every other label).
        "height": {"step": 24} if horizontal else 220,
        "encoding": {"y": name, "x": value} if horizontal else {"x": name, "y": value},
    }


def cumulative_cost_spec(spend: Sequence[tuple[str, float]]) -> dict[str, Any]:
    """A line of the running total of ``spend`` ((day, USD) in day order), a point per day."""
    points = [{"day": day, "cumulative cost (USD)": total}
              for (day, _), total in zip(spend, itertools.accumulate(cost for _, cost in spend))]
    return {
        "data": {"values": points}, "mark": {"type": "line", "point": True}, "autosize": AUTOSIZE, "height": 220,
        "encoding": {"x": {"field": "day", "type": "ordinal", "title": None},
                     "y": {"field": "cumulative cost (USD)", "type": "quantitative", "axis": {"format": VALUE_FORMAT}}},
    }


def agreement_domain(values: Mapping[str, float]) -> tuple[float, float]:
    """The axis of an agreement statistic: 0 to 1, or -1 to 1 when a value is below 0 (kappas and
    alphas can be), so bars of different charts compare and a value of 0 is drawn on a real axis."""
    return (-1.0 if any(v < 0 for v in values.values()) else 0.0, 1.0)


def by_statistic(results: Mapping[str, AgreementResult]) -> dict[str, dict[str, float]]:
    """Defined values (name -> value) grouped by their statistic: a chart never mixes two
    statistics on one axis."""
    grouped: dict[str, dict[str, float]] = {}
    for name, result in results.items():
        if result.value is not None:
            grouped.setdefault(result.statistic, {})[name] = result.value
    return grouped


def heatmap_spec(pairwise: PairwiseResult, title: str) -> dict[str, Any]:
    """Each pair's value on a red (-1) to green (1) scale with its value written in; an undefined
    pair as an outlined light cell reading "n/a"."""
    data = [{"a": a, "b": b, "value": r.value, "label": UNDEFINED_TEXT if r.value is None else f"{r.value:.2f}"}
            for (x, y), r in pairwise.pairs.items() for a, b in ((x, y), (y, x))]
    raters = list(pairwise.raters)
    return {
        "data": {"values": data}, "title": title, "autosize": AUTOSIZE, "height": {"step": 36},
        "encoding": {"x": {"field": "b", "type": "nominal", "sort": raters, "title": None},
                     "y": {"field": "a", "type": "nominal", "sort": raters, "title": None}},
        "layer": [
            {"transform": [{"filter": "datum.value != null"}], "mark": "rect",
             "encoding": {"color": {"field": "value", "type": "quantitative", "title": pairwise.statistic,
                                    "scale": {"scheme": "redyellowgreen", "domain": [-1, 1]}}}},
            {"transform": [{"filter": "datum.value == null"}],
             "mark": {"type": "rect", "color": UNDEFINED_FILL, "stroke": UNDEFINED_STROKE, "strokeDash": [4, 3]}},
            {"mark": {"type": "text", "color": "#111111"}, "encoding": {"text": {"field": "label", "type": "nominal"}}},
        ],
    }


def undefined_pairs(pairwise: PairwiseResult) -> str | None:
    """The caption under a heatmap that has undefined pairs (which, and why); None without any."""
    undefined = [f"{a} and {b}" for (a, b), r in pairwise.pairs.items() if r.value is None]
    if not undefined:
        return None
    reason = next((r.reason for r in pairwise.pairs.values() if r.value is None and r.reason), "too few shared items")
    return f"{UNDEFINED_TEXT}: undefined for {', '.join(undefined)} ({reason})"
