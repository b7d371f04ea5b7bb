"""Numbering repeated names: the one helper behind every "name (2)" / "name_1" a table gets.

A header can repeat a name a hundred thousand times (a ``colspan="1000"`` copied two hundred
times in a 5 kB HTML file), so the numbering must not search from 1 for every repeat: that is
quadratic, and such a file ran for minutes. :class:`NameNumberer` remembers, per name, the
number after the last one it gave, so the whole header takes time linear in its width.
"""

from __future__ import annotations

from collections.abc import Iterable


class NameNumberer:
    """Gives numbered names that collide with nothing already taken, in amortised O(1) each.

    ``pattern`` spells a numbered name (``"{name}_{k}"``, ``"{name} ({k})"``); numbers start at
    ``first``. :meth:`number` returns the name with the smallest number ``k >= first`` whose
    spelling is neither in ``taken`` nor given before, exactly what a search from ``first`` would
    find: every number below the remembered one is already taken (either given by this numberer
    or a name of ``taken``), and taken names never become free again.

    >>> numberer = NameNumberer(["a", "a", "a (2)"], pattern="{name} ({k})", first=2)
    >>> numberer.number("a"), numberer.number("a")
    ('a (3)', 'a (4)')
    """

    def __init__(self, taken: Iterable[str], *, pattern: str, first: int) -> None:
        self._taken = set(taken)
        self._pattern = pattern
        self._first = first
        self._next: dict[str, int] = {}

    def number(self, name: str) -> str:
        """The next free numbered spelling of ``name`` (now taken)."""
        k = self._next.get(name, self._first)
        while (candidate := self._pattern.format(name=name, k=k)) in self._taken:
            # Each step passes a number that stays taken for good, and the cursor moves past it:
            # over a whole header, no number of a name is looked at twice.
            k += 1
        self._next[name] = k + 1
        self._taken.add(candidate)
        return candidate
