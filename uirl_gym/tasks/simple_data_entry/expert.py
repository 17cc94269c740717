"""The task's scripted expert: reads privileged state, acts only through agent actions.

It plans a short macro (a few actions) from the ``/oracle`` state, plays it, and plans
again, so it recovers from whatever the page shows. Two ways to fill a field:
- ``type`` (default): scroll the target row into view, click the input, select all,
  type the value;
- ``copy_paste``: click the sheet cell, ctrl+c, click the input, ctrl+a, ctrl+v.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Literal

from uirl_gym.actions import MAX_SCROLL_AMOUNT, SCROLL_NOTCH_PX, Action, ActionType

INPUT_IDS = ("first_name", "last_name", "email")


def _centre(box: list[int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2


class SimpleDataEntryExpert:
    """Solves SimpleDataEntry episodes from the oracle state.

    Methods:
        next_action(oracle): the next action given the current ``/oracle`` JSON.
        reset(): forget the macro in progress (call at every episode start).
    """

    def __init__(self, mode: Literal["type", "copy_paste"] = "type") -> None:
        if mode not in ("type", "copy_paste"):
            raise ValueError(f"mode: expected 'type' or 'copy_paste', got {mode!r}")
        self.mode = mode
        self._queue: deque[Action] = deque()

    def reset(self) -> None:
        self._queue.clear()

    def next_action(self, oracle: Mapping[str, Any]) -> Action:
        if not self._queue:
            self._queue.extend(self._plan(oracle))
        return self._queue.popleft()

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
            return [Action(ActionType.LEFT_CLICK, *_centre(o["submit_another_link"]))]
        row, values = remaining[0]
        for field, value in zip(INPUT_IDS, values, strict=True):
            current = o["inputs"][field]["value"]
            if current == value:
                continue
            cell = _visible_cell(o, row, INPUT_IDS.index(field))
            if cell is None:
                return [_scroll_towards(o, row)]
            input_xy = _centre(o["inputs"][field]["box"])
            if self.mode == "type":
                clear = [Action(ActionType.KEYS, keys="ctrl+a")] if current else []
                return [
                    Action(ActionType.LEFT_CLICK, *input_xy),
                    *clear,
                    Action(ActionType.TYPE, text=value),
                ]
            return [
                Action(ActionType.LEFT_CLICK, *_centre(cell)),
                Action(ActionType.KEYS, keys="ctrl+c"),
                Action(ActionType.LEFT_CLICK, *input_xy),
                Action(ActionType.KEYS, keys="ctrl+a"),
                Action(ActionType.KEYS, keys="ctrl+v"),
            ]
        return [Action(ActionType.LEFT_CLICK, *_centre(o["submit_button"]))]


def _visible_cell(o: Mapping[str, Any], data_index: int, column: int) -> list[int] | None:
    for row in o["visible_rows"]:
        if row["data_index"] == data_index:
            return row["cells"][column]
    return None


def _scroll_towards(o: Mapping[str, Any], data_index: int) -> Action:
    """One scroll that brings the row near the middle of the sheet."""
    sx, sy, sw, sh = o["sheet_box"]
    first = o["visible_rows"][0]
    row_y = first["cells"][0][1] + (data_index - first["data_index"]) * o["row_height"]
    delta = row_y - (sy + sh / 2)
    notches = max(1, min(MAX_SCROLL_AMOUNT, round(abs(delta) / SCROLL_NOTCH_PX)))
    return Action(
        ActionType.SCROLL,
        sx + sw // 2,
        sy + sh // 2,
        direction="down" if delta > 0 else "up",
        amount=notches,
    )
