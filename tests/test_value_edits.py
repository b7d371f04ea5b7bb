"""Value modifications of a shortened table (tables.edits): the grid an annotator edits, the
changed cells read back with old and new values, and every check that refuses an edit with a
message the annotator can act on."""

from __future__ import annotations

import pytest

from tqaforge.tables.edits import (
    CellEdit,
    EditRejected,
    apply_edits,
    cell_id,
    check_value_edit,
    diff_tables,
    parse_cell_id,
    parse_grid,
    read_value_edit,
    to_grid,
)
from tqaforge.tables.table import Table

SHORT = Table.build(["Candidate", "Votes"], [["Olsson", "4"], ["Leslie", "12"], ["Ng | Co", "7"]])


def _edit(grid: str, mode: str = "answer_changes", answers: list[str] | None = None) -> tuple[list[CellEdit], tuple[str, ...]]:
    return read_value_edit(SHORT, grid, mode=mode, old_answers=("Olsson",), new_answers=answers)  # type: ignore[arg-type]


def test_grid_round_trips_and_escapes_the_separator() -> None:
    grid = to_grid(SHORT)
    assert grid.splitlines()[3] == "Ng \\| Co | 7"
    header, rows = parse_grid(grid)
    assert header == SHORT.header and [tuple(r) for r in rows] == list(SHORT.rows)


def test_an_edit_is_read_back_as_changed_cells_with_old_and_new_values() -> None:
    edits, answers = _edit(to_grid(SHORT).replace("Olsson | 4", "Olsson | 361"), answers=["Leslie"])
    assert [e.as_dict() for e in edits] == [{"row": 0, "col": 1, "old": "4", "new": "361"}]
    assert answers == ("Leslie",) and edits[0].cell_id == "r0c1"
    assert apply_edits(SHORT, edits).cell(0, 1) == "361"
    # Spaces around a value are not an edit.
    assert diff_tables(SHORT, parse_grid(to_grid(SHORT).replace("| 12", "|   12  "))) == []


def test_answer_same_keeps_the_old_answer_when_none_is_given() -> None:
    edits, answers = _edit(to_grid(SHORT).replace("| 7", "| 8"), mode="answer_same")
    assert len(edits) == 1 and answers == ("Olsson",)
    _, same = _edit(to_grid(SHORT).replace("| 7", "| 8"), mode="answer_same", answers=["olsson"])
    assert same == ("olsson",)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("grid", "mode", "answers", "message"),
    [
        (to_grid(SHORT), "answer_changes", ["Leslie"], "no value was changed; change one or two values"),
        ("", "answer_changes", ["Leslie"], "the table is empty"),
        (to_grid(SHORT) + "\nExtra | 99", "answer_changes", ["Leslie"], "row r3 and after are outside the shortened table"),
        ("\n".join(to_grid(SHORT).splitlines()[:-1]), "answer_changes", ["Leslie"], "a row was removed"),
        (to_grid(SHORT).replace("Olsson | 4", "Olsson | 4 | x"), "answer_changes", ["Leslie"], "row r0 has 3 cells"),
        (to_grid(SHORT).replace("Candidate", "Name"), "answer_changes", ["Leslie"], "the header (first line) was changed"),
        (to_grid(SHORT).replace("| 4", "| 40").replace("| 12", "| 1").replace("| 7", "| 70"), "answer_changes", ["Olsson"],
         "3 cells changed (r0c1, r1c1, r2c1); change at most 2"),
        (to_grid(SHORT).replace("| 4", "| 400"), "answer_same", ["Leslie"], "differs from the old one ('Olsson')"),
        (to_grid(SHORT).replace("| 4", "| 400"), "answer_changes", None, "give the new answer"),
        (to_grid(SHORT).replace("| 7", "| 8"), "answer_changes", ["OLSSON"], "is the old one"),
    ],
    ids=["empty edit", "empty table", "cell outside", "row removed", "ragged row", "header", "three cells",
         "no-change answer changes", "no new answer", "new answer is the old"],
)
def test_bad_edits_are_refused_with_a_message_the_annotator_can_act_on(grid, mode, answers, message) -> None:
    with pytest.raises(EditRejected, match=__import__("re").escape(message)):
        _edit(grid, mode, answers)


@pytest.mark.hostile
def test_edits_naming_cells_outside_or_with_wrong_old_values_are_refused() -> None:
    with pytest.raises(EditRejected, match="r5c1 is outside the shortened table"):
        check_value_edit(SHORT, [CellEdit(5, 1, "", "3")], mode="answer_changes", old_answers=("Olsson",), new_answers=("x",))
    with pytest.raises(EditRejected, match="r0c1 held '4', not '5'"):
        check_value_edit(SHORT, [CellEdit(0, 1, "5", "3")], mode="answer_changes", old_answers=("Olsson",), new_answers=("x",))
    with pytest.raises(EditRejected, match="the header .* cannot be changed"):
        check_value_edit(SHORT, [CellEdit(-1, 1, "Votes", "V")], mode="answer_same", old_answers=("Olsson",), new_answers=None)
    with pytest.raises(EditRejected, match="row .* whole numbers"):
        CellEdit.from_dict({"row": -2, "col": 0, "old": "", "new": ""})


def test_cell_ids() -> None:
    assert (cell_id(3, 1), cell_id(-1, 2)) == ("r3c1", "h2")
    assert (parse_cell_id("r3c1"), parse_cell_id(" h2 ")) == ((3, 1), (-1, 2))
    with pytest.raises(Exception, match="not a cell id"):
        parse_cell_id("c3r1")
