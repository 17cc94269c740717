"""SpreadsheetEdit's rewards and success, from its record (docs/tasks/spreadsheet_edit.md).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (the sheet the page shows, the open cell editor) for dense shaping.

The score of a record is ``correct_goal`` per goal the recorded sheet meets minus
``stray_change`` per other change (a changed cell, a deleted row, a row nobody asked
for, the original order broken when no sort was asked). The sparse reward of a step is
the change of that score, so undoing a mistake refunds its charge. Success: every goal
met and no stray change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import GoalsScorer
from uirl_gym.tasks.spreadsheet_edit.data import (
    TOTAL,
    SheetGoal,
    cell_matches,
    evaluate,
    parse_options,
)


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays.

    Attributes:
        correct_goal: paid per goal (computed cell, inserted row, sort) the sheet meets.
        stray_change: charged per change nobody asked for, while it stays in the sheet.
        invalid_action: charged per action the env or the server refuses.
        dense_goal: dense mode, the potential per goal the page's sheet meets.
        dense_cell: dense mode, the potential per given value (Item, Category, Quantity,
            Unit price) already right in a row inserted for an unmet insert goal.
        dense_pending: dense mode, the potential per unmet computed cell whose open
            editor holds the right value (not committed yet).
    """

    correct_goal: float = 1.0
    stray_change: float = 0.5
    invalid_action: float = 0.1
    dense_goal: float = 0.1
    dense_cell: float = 0.02
    dense_pending: float = 0.05


class SpreadsheetEditScorer(GoalsScorer):
    """One episode's score: the goals the recorded sheet meets and its stray changes."""

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """Goals the page's sheet meets, given values of inserted rows, pending edits."""
        goal = SheetGoal.from_json(oracle["goal"])
        sheet = oracle["sheet"]
        ev = evaluate(goal, sheet["header"], sheet["rows"])
        rows = {r["id"]: r["cells"] for r in sheet["rows"]}
        n_edits = len(goal.edits)
        right_cells = sum(
            cell_matches(c, rows[row_id][c], ins.cells[c])
            for ins, row_id, met in zip(goal.inserts, ev.candidates, ev.met[n_edits:], strict=False)
            if row_id is not None and not met
            for c in range(TOTAL)
        )
        editor = oracle["editor"]
        pending = sum(
            editor is not None
            and (editor["row_id"], editor["column"]) == (e.row_id, e.column)
            and cell_matches(e.column, editor["text"], e.value)
            for e, met in zip(goal.edits, ev.met, strict=False)
            if not met
        )
        return (
            self.rewards.dense_goal * sum(ev.met)
            + self.rewards.dense_cell * right_cells
            + self.rewards.dense_pending * pending
        )


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse invalid reset options before any round trip (the task's own checks).

    Raises:
        ValueError: (a ``TaskOptionsError``) an unknown option or a bad value.
    """
    parse_options(options)
