"""Voting over the agents' candidates (TableBench's self-consistency check).

Candidates are grouped by :func:`tqaforge.tables.matching.same_answer` under the subtype's
:func:`~tqaforge.tables.matching.answer_rule` (the one comparator that evaluation and agreement
use too): each candidate joins the first group whose first member gives the same answer, so the
grouping is deterministic in candidate order (methods in the order asked, then samples).

- ``unanimous`` (TableBench's rule): consistent when every candidate has an answer and all fall in
  one group. A candidate without an answer (unparsed, code that failed) breaks unanimity.
- ``majority``: consistent when the largest group holds more than half of *all* candidates
  (those without an answer count against it); ties are inconsistent.

The consistent answer is the first member's values of the winning group. Pure: no store, no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from tqaforge.tables.matching import AnswerRule, same_answer

VoteRule = Literal["unanimous", "majority"]
VOTE_RULES: tuple[VoteRule, ...] = ("unanimous", "majority")


@dataclass(frozen=True)
class Ballot:
    """One candidate's say: its key (candidate id), method, and answer items (None: no answer)."""

    key: str
    method: str
    values: tuple[str, ...] | None


@dataclass(frozen=True)
class VoteResult:
    """The outcome: consistent or not, the agreed values, the groups (keys, largest first) and why."""

    consistent: bool
    values: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    reason: str
    winner: str | None = None  # the key whose values are the answer


def vote(ballots: Sequence[Ballot], rule: AnswerRule, mode: VoteRule = "unanimous") -> VoteResult:
    """Group the ballots and decide (module docs).

    >>> from tqaforge.tables.matching import AnswerRule
    >>> b = [Ballot("a", "TCoT", ("1,000",)), Ballot("b", "SCoT", ("1000",)), Ballot("c", "PoT", None)]
    >>> vote(b, AnswerRule(), "majority").values, vote(b, AnswerRule(), "unanimous").consistent
    (('1,000',), False)
    """
    if mode not in VOTE_RULES:
        raise ValueError(f"unknown vote rule {mode!r}; one of {', '.join(VOTE_RULES)}")
    if not ballots:
        return VoteResult(False, (), (), "no candidates")
    groups: list[list[Ballot]] = []
    for ballot in ballots:
        if ballot.values is None:
            continue
        for group in groups:
            if same_answer(group[0].values or (), ballot.values, rule):
                group.append(ballot)
                break
        else:
            groups.append([ballot])
    ordered = sorted(groups, key=len, reverse=True)  # stable: equal sizes keep first-seen order
    keys = tuple(tuple(b.key for b in g) for g in ordered)
    missing = [b.method for b in ballots if b.values is None]
    total = len(ballots)
    if not ordered:
        return VoteResult(False, (), keys, f"no candidate has an answer ({', '.join(missing)})")
    best = ordered[0]
    values = best[0].values or ()
    if mode == "unanimous":
        if missing:
            return VoteResult(False, (), keys, f"no answer from {', '.join(missing)}")
        if len(ordered) > 1:
            return VoteResult(False, (), keys, f"{len(ordered)} different answers among {total} candidates")
        return VoteResult(True, values, keys, f"all {total} candidates agree", best[0].key)
    if 2 * len(best) > total:
        return VoteResult(True, values, keys, f"{len(best)} of {total} candidates agree", best[0].key)
    return VoteResult(False, (), keys, f"no majority: the largest group holds {len(best)} of {total} candidates")
