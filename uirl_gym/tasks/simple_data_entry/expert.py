"""The task's scripted expert: reads privileged state, acts only through agent actions.

It plans a short macro (a few actions) from the ``/oracle`` state, plays it, and plans
again, so it recovers from whatever the page shows. Two ways to fill a field:
- ``type`` (default): scroll the target row into view, click the input, select all,
  type the value;
- ``copy_paste``: click the sheet cell, ctrl+c, click the input, ctrl+a, ctrl+v.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert, box_centre, scroll_towards

INPUT_IDS = ("first_name", "last_name", "email")


class SimpleDataEntryExpert(MacroExpert):
    """Solves SimpleDataEntry episodes from the oracle state (see :class:`MacroExpert`)."""

    def __init__(self, mode: Literal["type", "copy_paste"] = "type") -> None:
        if mode not in ("type", "copy_paste"):
            raise ValueError(f"mode: expected 'type' or 'copy_paste', got {mode!r}")
        super().__init__()
        self.mode = mode

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        done = {s["row_index"] for s in o["submissions"] if s["row_index"] is not None}
        remaining = [
            (row, values)
            for row, values in zip(o["target_rows"], o["target_values"], strict=True)
            if row not in done
        ]
        if not remaining:
            return [Action(ActionType.FINISH)]
        if o["view"] == "done":
            return [Action(ActionType.LEFT_CLICK, *box_centre(o["submit_another_link"]))]
        row, values = remaining[0]
        for field, value in zip(INPUT_IDS, values, strict=True):
            current = o["inputs"][field]["value"]
            if current == value:
                continue
            cell = _visible_cell(o, row, INPUT_IDS.index(field))
            if cell is None:
                return [_scroll_towards(o, row)]
            input_xy = box_centre(o["inputs"][field]["box"])
            if self.mode == "type":
                clear = [Action(ActionType.KEYS, keys="ctrl+a")] if current else []
                return [
                    Action(ActionType.LEFT_CLICK, *input_xy),
                    *clear,
                    Action(ActionType.TYPE, text=value),
                ]
            return [
                Action(ActionType.LEFT_CLICK, *box_centre(cell)),
                Action(ActionType.KEYS, keys="ctrl+c"),
                Action(ActionType.LEFT_CLICK, *input_xy),
                Action(ActionType.KEYS, keys="ctrl+a"),
                Action(ActionType.KEYS, keys="ctrl+v"),
            ]
        return [Action(ActionType.LEFT_CLICK, *box_centre(o["submit_button"]))]


def _visible_cell(o: Mapping[str, Any], data_index: int, column: int) -> list[int] | None:
    for row in o["visible_rows"]:
        if row["data_index"] == data_index:
            return row["cells"][column]
    return None


def _scroll_towards(o: Mapping[str, Any], data_index: int) -> Action:
    """One scroll that brings the row near the middle of the sheet."""
    first = o["visible_rows"][0]
    row_y = first["cells"][0][1] + (data_index - first["data_index"]) * o["row_height"]
    return scroll_towards(o["sheet_box"], row_y)
