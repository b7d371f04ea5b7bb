"""TEDS: tree-edit-distance-based similarity of two tables (Zhong et al. 2019), as the
capability-based TableBench scores its commanding (table editing) items (its Appendix C.1).

A table is an HTML tree as PubTabNet writes one: ``table``, then ``thead`` (the header rows) and
``tbody`` (the body rows), each holding ``tr`` rows of ``td`` cells; a part without rows has no
node. Header cells are ``td`` too (PubTabNet's convention), so that their text counts.
The tree edit distance is computed by APTED (the ``apted`` package, Pawlik and Augsten's
algorithm), with these costs:

- inserting or deleting a node: 1;
- substituting a node by another: 1 when their tags differ; for two ``td`` cells, 1 when their
  ``colspan`` or ``rowspan`` differ, else the normalised Levenshtein distance of their texts
  (edit distance / length of the longer; 0 for two empty cells); any other two nodes of one tag: 0.

``TEDS = 1 - EditDist(Ta, Tb) / max(|Ta|, |Tb|)`` (``|T|`` the number of nodes), in [0, 1], 1 for
equal tables. **Structure-only TEDS** ignores cell texts (two ``td`` of equal spans cost 0).

>>> a = Table.build(["name", "age"], [["Ann", "26"]])
>>> b = Table.build(["name", "age"], [["Ann", "27"]])
>>> round(teds(a, b), 4), teds(a, b, structure_only=True)
(0.9444, 1.0)

(9 nodes each; one cell of two characters differs in one: 1 - 0.5 / 9.)

Tables here have no merged cells; :class:`Layout` (rows of :class:`SpanCell`) has, for tables read
from HTML with ``colspan``/``rowspan`` and for the checks against the reference implementation
(``table-recognition-metric``, tests/test_teds.py). APTED is cubic in the worst case and written in
Python: a pair whose trees' sizes multiply to more than :data:`MAX_TEDS_WORK` is refused with
:class:`TedsTooLarge` rather than computed for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from apted import APTED, Config
from rapidfuzz.distance import Levenshtein

from tqaforge.errors import TableError
from tqaforge.tables.table import Table

#: The largest product of the two trees' node counts scored: two trees of about 700 nodes (tables
#: of 60 rows and 10 columns) take APTED some 10 s on one core (measured: 662 nodes each, 8-10 s).
MAX_TEDS_WORK = 500_000


class TedsTooLarge(TableError):
    """Two tables too large for the tree edit distance (:data:`MAX_TEDS_WORK`)."""


@dataclass(frozen=True, slots=True)
class SpanCell:
    """A cell of an HTML table: its text and how many columns and rows it spans."""

    text: str
    colspan: int = 1
    rowspan: int = 1


@dataclass(frozen=True, slots=True)
class Layout:
    """A table as HTML lays it out: header rows (``thead``) and body rows (``tbody``) of cells
    that may span columns and rows. Rows may differ in length (a model's reply may be ragged)."""

    head: tuple[tuple[SpanCell, ...], ...] = ()
    body: tuple[tuple[SpanCell, ...], ...] = ()

    @classmethod
    def of(cls, table: Table) -> Layout:
        """The header as the one ``thead`` row, the rows in ``tbody``, no spans."""
        return cls(
            head=(tuple(SpanCell(h) for h in table.header),),
            body=tuple(tuple(SpanCell(c) for c in row) for row in table.row_tuples()),
        )

    @classmethod
    def build(cls, head: Sequence[Sequence[SpanCell | str]], body: Sequence[Sequence[SpanCell | str]]) -> Layout:
        """From rows of cells or plain strings (a string: a cell that spans nothing)."""

        def rows(part: Sequence[Sequence[SpanCell | str]]) -> tuple[tuple[SpanCell, ...], ...]:
            return tuple(tuple(c if isinstance(c, SpanCell) else SpanCell(c) for c in row) for row in part)

        return cls(rows(head), rows(body))

    def shape(self) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
        """The layout without its texts: the spans of each cell of each row of each part."""
        return tuple(tuple(tuple((c.colspan, c.rowspan) for c in row) for row in part) for part in (self.head, self.body))

    @property
    def n_nodes(self) -> int:
        """The size of its tree: ``table``, ``thead``/``tbody`` when they have rows, rows, cells."""
        return 1 + sum(bool(part) + len(part) + sum(map(len, part)) for part in (self.head, self.body))


class _Node:
    """A node of the table tree APTED walks (``children`` is what :class:`_Costs` returns)."""

    __slots__ = ("children", "cell", "tag")

    def __init__(self, tag: str, cell: SpanCell | None = None, children: list[_Node] | None = None) -> None:
        self.tag = tag
        self.cell = cell
        self.children = children or []


def _tree(layout: Layout) -> _Node:
    parts = [
        _Node(tag, children=[_Node("tr", children=[_Node("td", cell) for cell in row]) for row in rows])
        for tag, rows in (("thead", layout.head), ("tbody", layout.body))
        if rows
    ]
    return _Node("table", children=parts)


class _Costs(Config):  # type: ignore[misc]
    """APTED's cost model for TEDS (module docs); ``structure_only``: cell texts cost nothing."""

    def __init__(self, structure_only: bool) -> None:
        self.structure_only = structure_only

    def rename(self, a: _Node, b: _Node) -> float:
        if a.tag != b.tag:
            return 1.0
        if a.cell is None or b.cell is None:
            return 0.0
        if a.cell.colspan != b.cell.colspan or a.cell.rowspan != b.cell.rowspan:
            return 1.0
        if self.structure_only:
            return 0.0
        return float(Levenshtein.normalized_distance(a.cell.text, b.cell.text))

    def children(self, node: _Node) -> list[_Node]:
        return node.children


def _layout(table: Table | Layout) -> Layout:
    return table if isinstance(table, Layout) else Layout.of(table)


def tree_edit_distance(a: Table | Layout, b: Table | Layout, *, structure_only: bool = False,
                       max_work: int = MAX_TEDS_WORK) -> float:
    """The tree edit distance of the two tables' trees under TEDS's costs (module docs).

    Equal trees take no work (0, whatever their size); otherwise raises :class:`TedsTooLarge` when
    the trees' sizes multiply to more than ``max_work``."""
    la, lb = _layout(a), _layout(b)
    if (la.shape() == lb.shape()) if structure_only else (la == lb):
        return 0.0  # equal trees (under the costs): no edit, whatever their size
    na, nb = la.n_nodes, lb.n_nodes
    if na * nb > max_work:
        raise TedsTooLarge(
            f"tables of {na} and {nb} tree nodes are too large for TEDS (at most {max_work} for their product)",
            hint="score smaller tables, or pass a larger max_work (APTED's time grows with the cube of the size)",
        )
    return float(APTED(_tree(la), _tree(lb), _Costs(structure_only)).compute_edit_distance())


def teds(a: Table | Layout, b: Table | Layout, *, structure_only: bool = False, max_work: int = MAX_TEDS_WORK) -> float:
    """TEDS of two tables, in [0, 1] (1: equal); ``structure_only``: cell texts ignored.

    Symmetric in ``a`` and ``b``. Raises :class:`TedsTooLarge` for trees too large (module docs)."""
    distance = tree_edit_distance(a, b, structure_only=structure_only, max_work=max_work)
    size = max(_layout(a).n_nodes, _layout(b).n_nodes)
    return 1.0 - distance / size


@dataclass(frozen=True, slots=True)
class TedsScores:
    """TEDS and structure-only TEDS of a returned table against the target."""

    teds: float
    structure: float


def teds_scores(returned: Table | Layout, target: Table | Layout, *, max_work: int = MAX_TEDS_WORK) -> TedsScores:
    """Both scores of ``returned`` against ``target`` (:class:`TedsTooLarge` for trees too large)."""
    return TedsScores(
        teds(returned, target, max_work=max_work),
        teds(returned, target, structure_only=True, max_work=max_work),
    )


__all__ = [
    "MAX_TEDS_WORK",
    "Layout",
    "SpanCell",
    "TedsScores",
    "TedsTooLarge",
    "teds",
    "teds_scores",
    "tree_edit_distance",
]
