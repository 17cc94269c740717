"""SpreadsheetEdit: edit a stock sheet in a spreadsheet app: computed cells, new rows, a sort.

The app: a grid (column letters, row numbers, the header in row 1, frozen), a name box
and formula bar, a menu bar (Edit: undo, redo, delete row, clear cell; Insert: row
above or below the selected cell; Data: sort the sheet by the selected column, A to Z
or Z to A) and a context menu on cells and row numbers (insert above or below,
delete row, clear cell). Typing on a selected cell replaces its value (Enter moves
down, Tab moves right, Escape cancels); double-click, F2 or the formula bar edit it.

The record: after every change the app records the whole sheet (header and data rows
with their stable ids). ``/progress`` scores it against the goal sheet
(:func:`~uirl_gym.tasks.spreadsheet_edit.data.evaluate`): which goals are met and the
other changes made.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, TypeGuard

from uirl_gym.tasks.base import Task, is_int
from uirl_gym.tasks.spreadsheet_edit.data import (
    COLUMNS,
    HEADER,
    ITEM,
    NUMERIC_COLUMNS,
    Edit,
    Insert,
    SheetGoal,
    Sort,
    evaluate,
    generate_goal,
    parse_options,
)

# The record keeps at most this many rows and characters per cell (the app cannot
# make more in an episode's steps; a larger event is malformed).
MAX_RECORD_ROWS = 500
MAX_CELL_CHARS = 1000
# /progress travels in a response header: it lists at most this many stray changes.
MAX_STRAY_LISTED = 10
SHEET_NAME = "Stock"


def describe_edit(goal: SheetGoal, e: Edit) -> str:
    """The instruction's words for one computed cell."""
    item = goal.rows[e.row_id][ITEM]
    if e.kind == "total":
        return f'set the Total of "{item}" to its Quantity times its Unit price'
    if e.kind == "add":
        return f'add {e.amount} to the Quantity of "{item}"'
    if e.kind == "remove":
        return f'subtract {e.amount} from the Quantity of "{item}"'
    source = goal.rows[e.source_id][ITEM]
    return f'set the Unit price of "{item}" to the Unit price of "{source}"'


def describe_insert(goal: SheetGoal, i: Insert) -> str:
    anchor = goal.rows[i.anchor_id][ITEM]
    return (
        f'insert a row {i.side} "{anchor}" with Item "{i.cells[0]}", Category '
        f'"{i.cells[1]}", Quantity {i.cells[2]} and Unit price {i.cells[3]} '
        "(leave its Total empty)"
    )


def describe_sort(s: Sort) -> str:
    name = HEADER[s.column]
    if s.column in NUMERIC_COLUMNS:
        order = "largest first" if s.descending else "smallest first"
    else:
        order = "Z to A" if s.descending else "A to Z"
    return f"sort the rows by {name}, {order}"


def instruction(goal: SheetGoal) -> str:
    parts = [describe_edit(goal, e) for e in goal.edits]
    parts += [describe_insert(goal, i) for i in goal.inserts]
    steps = "; ".join(parts)
    if goal.sort is not None:
        sort = describe_sort(goal.sort)
        steps = f"{steps}; then {sort}" if steps else sort
    return (
        f"In the {SHEET_NAME} sheet, {steps}. Type plain numbers, not formulas, and change "
        "nothing else."
    )


class SpreadsheetEditTask(Task):
    """The episode's goal sheet and the app's last recorded sheet (module docstring)."""

    name = "spreadsheet_edit"
    public_progress_keys = frozenset({"episode", "num_goals", "num_changes"})

    def __init__(self) -> None:
        self.goal: SheetGoal | None = None
        self.header: list[str] = list(HEADER)
        self.rows: list[dict[str, Any]] = []
        self.num_changes = 0

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        rng = random.Random(seed)
        self.goal = generate_goal(rng.randrange(2**63), opts)
        self.header = list(HEADER)
        self.rows = [{"id": i, "cells": list(r)} for i, r in enumerate(self.goal.rows)]
        self.num_changes = 0
        self.episode_id += 1
        return {
            "instruction": instruction(self.goal),
            "app_state": {
                "episode": self.episode_id,
                "sheet_name": SHEET_NAME,
                "columns": list(COLUMNS),
                "numeric": sorted(NUMERIC_COLUMNS),
                "header": self.header,
                "rows": self.rows,
            },
        }

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.goal is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        if event.get("type") != "sheet":
            raise ValueError(f"unknown event type {event.get('type')!r}; expected 'sheet'")
        header, rows = event.get("header"), event.get("rows")
        if not _cells_ok(header):
            raise ValueError(f"header: expected {len(COLUMNS)} strings")
        if not isinstance(rows, list) or len(rows) > MAX_RECORD_ROWS:
            raise ValueError(f"rows: expected a list of at most {MAX_RECORD_ROWS} rows")
        ids = [r.get("id") if isinstance(r, Mapping) else None for r in rows]
        if any(not is_int(i) or i < 0 for i in ids):
            raise ValueError("rows: every row needs a non-negative integer id")
        if len(set(ids)) != len(ids):
            raise ValueError("rows: ids must be unique")
        if not all(_cells_ok(r.get("cells")) for r in rows):
            raise ValueError(f"rows: every row needs {len(COLUMNS)} string cells")
        self.header = list(header)
        self.rows = [{"id": r["id"], "cells": list(r["cells"])} for r in rows]
        self.num_changes += 1
        return {"recorded": True}

    def progress(self) -> dict[str, Any]:
        if self.goal is None:
            return {
                "goals": [],
                "num_goals": 0,
                "met": [],
                "num_stray": 0,
                "stray": [],
                "num_changes": 0,
            }
        ev = evaluate(self.goal, self.header, self.rows)
        return {
            "episode": self.episode_id,
            "goals": self.goal.goal_kinds(),
            "num_goals": len(ev.met),
            "met": ev.met,
            "num_stray": len(ev.stray),
            "stray": ev.stray[:MAX_STRAY_LISTED],
            "num_changes": self.num_changes,
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.goal is not None
        ev = evaluate(self.goal, self.header, self.rows)
        return {
            "episode": self.episode_id,
            "goal": self.goal.to_json(),
            "goal_rows": [list(r) for r in self.goal.goal_rows()],
            "record": {"header": list(self.header), "rows": self.rows},
            "met": ev.met,
            "stray": ev.stray,
            **page_state,
        }


def _cells_ok(cells: Any) -> TypeGuard[list[str]]:
    return (
        isinstance(cells, list)
        and len(cells) == len(COLUMNS)
        and all(isinstance(c, str) and len(c) <= MAX_CELL_CHARS for c in cells)
    )
