"""SpreadsheetEdit's scripted expert: reads privileged state, acts only through agent actions.

It scores the page's sheet against the goal with the task's own
:func:`~uirl_gym.tasks.spreadsheet_edit.data.evaluate` and plans the next short macro
from what is wrong, in this order: close an editor it did not leave open; undo
(``ctrl+z``) a deleted row or, when no sort is asked, a broken row order (nothing else
can restore them); delete rows nobody asked for (right click on the row number,
*Delete row*); set back changed cells; type the computed values; insert the asked rows
(the Insert menu, or the row number's context menu for odd anchor rows) and type their
values with Tab between cells; sort last (click the column letter, Data, *Sort sheet by
column ...*). It re-plans after each macro, so it recovers from whatever the page
shows; rows out of view are scrolled to first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert, box_centre, click, scroll_towards
from uirl_gym.tasks.spreadsheet_edit.data import (
    COLUMNS,
    HEADER,
    TOTAL,
    SheetGoal,
    cell_matches,
    evaluate,
)

ESCAPE = Action(ActionType.KEYS, keys="Escape")


class SpreadsheetEditExpert(MacroExpert):
    """Solves SpreadsheetEdit episodes from the oracle state (see :class:`MacroExpert`)."""

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        if o["editor"] is not None:
            return [ESCAPE]
        goal = SheetGoal.from_json(o["goal"])
        sheet = o["sheet"]
        rows: list[Mapping[str, Any]] = sheet["rows"]
        ev = evaluate(goal, sheet["header"], rows)
        if all(ev.met) and not ev.stray:
            return [Action(ActionType.FINISH)]
        n = len(goal.rows)
        original = [r["id"] for r in rows if r["id"] < n]
        if len(original) < n or (goal.sort is None and original != sorted(original)):
            return [Action(ActionType.KEYS, keys="ctrl+z")]  # (a key press closes menus too)
        return (
            self._delete_extra(o, goal, ev.candidates)
            or self._fix_cells(o, goal)
            or self._computed(o, goal, ev.met)
            or self._inserts(o, goal, ev.met[len(goal.edits) :], ev.candidates)
            or self._sort(o, goal)
        )

    # -- one kind of fix each; [] when there is nothing of that kind to do -------------

    def _delete_extra(
        self, o: Mapping[str, Any], goal: SheetGoal, candidates: Sequence[int | None]
    ) -> list[Action]:
        n = len(goal.rows)
        extra = [r["id"] for r in o["sheet"]["rows"] if r["id"] >= n and r["id"] not in candidates]
        if not extra:
            return []
        if o["context_menu"] is not None and o["selected"]["row_id"] == extra[0]:
            return [click(o["context_menu"]["delete_row"]["box"])]
        if _menu_open(o):
            return [ESCAPE]
        row = _visible(o, extra[0])
        if row is None:
            return [_scroll_to(o, extra[0])]
        return [Action(ActionType.RIGHT_CLICK, *box_centre(row["number_box"]))]

    def _fix_cells(self, o: Mapping[str, Any], goal: SheetGoal) -> list[Action]:
        """Header cells and original cells changed without being asked: set them back."""
        for c, text in enumerate(o["sheet"]["header"]):
            if text.strip() != HEADER[c]:
                return _set_cell(o, o["header_cells"][c], HEADER[c])
        targets = {(e.row_id, e.column) for e in goal.edits}
        for r in o["sheet"]["rows"]:
            if r["id"] >= len(goal.rows):
                continue
            wanted = goal.wanted(r["id"])
            for c in range(len(COLUMNS)):
                if (r["id"], c) not in targets and not cell_matches(c, r["cells"][c], wanted[c]):
                    return _set_in_row(o, r["id"], c, wanted[c])
        return []

    def _computed(self, o: Mapping[str, Any], goal: SheetGoal, met: Sequence[bool]) -> list[Action]:
        for e, done in zip(goal.edits, met, strict=False):
            if not done:
                return _set_in_row(o, e.row_id, e.column, e.value)
        return []

    def _inserts(
        self,
        o: Mapping[str, Any],
        goal: SheetGoal,
        met: Sequence[bool],
        candidates: Sequence[int | None],
    ) -> list[Action]:
        for ins, done, row_id in zip(goal.inserts, met, candidates, strict=False):
            if done:
                continue
            if row_id is None:
                return self._insert_row(o, ins.anchor_id, ins.side, via_menu=ins.anchor_id % 2 == 0)
            cells = next(r["cells"] for r in o["sheet"]["rows"] if r["id"] == row_id)
            # Stray text right of the given values: clear it first.
            for c in range(TOTAL, len(COLUMNS)):
                if cells[c].strip():
                    return _set_in_row(o, row_id, c, "")
            first = next(c for c in range(TOTAL) if not cell_matches(c, cells[c], ins.cells[c]))
            return _set_in_row(o, row_id, first, "\t".join(ins.cells[first:TOTAL]))
        return []

    @staticmethod
    def _insert_row(
        o: Mapping[str, Any], anchor: int, side: str, *, via_menu: bool
    ) -> list[Action]:
        item = f"insert_{side}"
        selected = o["selected"]["row_id"] == anchor
        if selected and o["menu"] == "insert":
            return [click(o["menu_items"][item]["box"])]
        if selected and o["context_menu"] is not None:
            return [click(o["context_menu"][item]["box"])]
        if _menu_open(o):
            return [ESCAPE]
        row = _visible(o, anchor)
        if row is None:
            return [_scroll_to(o, anchor)]
        if via_menu:
            return [click(row["cells"][0]), click(o["menubar"]["insert"])]
        return [Action(ActionType.RIGHT_CLICK, *box_centre(row["number_box"]))]

    @staticmethod
    def _sort(o: Mapping[str, Any], goal: SheetGoal) -> list[Action]:
        sort = goal.sort
        if sort is None:  # every other fix came up empty: a rule is missing above
            raise RuntimeError("SpreadsheetEditExpert: no plan for this sheet")
        if o["selected"]["column"] == sort.column and o["menu"] == "data":
            return [click(o["menu_items"]["sort_desc" if sort.descending else "sort_asc"]["box"])]
        if _menu_open(o):
            return [ESCAPE]
        if o["selected"]["column"] != sort.column:
            return [click(o["letters"][sort.column]), click(o["menubar"]["data"])]
        return [click(o["menubar"]["data"])]


def _menu_open(o: Mapping[str, Any]) -> bool:
    return o["menu"] is not None or o["context_menu"] is not None


def _visible(o: Mapping[str, Any], row_id: int) -> Mapping[str, Any] | None:
    return next((r for r in o["visible_rows"] if r["id"] == row_id), None)


def _set_in_row(o: Mapping[str, Any], row_id: int, column: int, text: str) -> list[Action]:
    """Type ``text`` into a data row's cell (scrolling to it first if it is out of view)."""
    row = _visible(o, row_id)
    if row is None:
        return [_scroll_to(o, row_id)]
    return _set_cell(o, row["cells"][column], text)


def _set_cell(o: Mapping[str, Any], box: list[int], text: str) -> list[Action]:
    """Select the cell and type over it (Enter commits), or clear it with Delete."""
    if _menu_open(o):
        return [ESCAPE]
    if not text:
        return [click(box), Action(ActionType.KEYS, keys="Delete")]
    return [click(box), Action(ActionType.TYPE, text=f"{text}\n")]


def _scroll_to(o: Mapping[str, Any], row_id: int) -> Action:
    """One wheel scroll that brings the row near the middle of the grid."""
    ids = [r["id"] for r in o["sheet"]["rows"]]
    index = ids.index(row_id) + 1
    gy = o["grid_box"][1]
    if o["visible_rows"]:
        first = o["visible_rows"][0]
        row_y = first["cells"][0][1] + (index - first["index"]) * o["row_height"]
    else:
        row_y = gy + (index - 1) * o["row_height"] - o["scroll_top"]
    return scroll_towards(o["grid_box"], row_y)
