"""SpreadsheetEdit: the goal sheets and their scoring, the scorer, episodes on real Chromium."""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
from task_play import play

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks.base import TaskOptionsError
from uirl_gym.tasks.expert import box_centre, click
from uirl_gym.tasks.spreadsheet_edit.data import (
    HEADER,
    PRICE,
    QUANTITY,
    TOTAL,
    Options,
    cell_matches,
    evaluate,
    generate_goal,
    is_sorted,
)
from uirl_gym.tasks.spreadsheet_edit.expert import SpreadsheetEditExpert
from uirl_gym.tasks.spreadsheet_edit.score import RewardConfig, SpreadsheetEditScorer
from uirl_gym.tasks.spreadsheet_edit.task import SpreadsheetEditTask

ENV_ID = "uirl/SpreadsheetEdit-v0"


def sheet_of(rows: Any) -> list[dict[str, Any]]:
    """Rows as the app records them, ids in order."""
    return [{"id": i, "cells": list(cells)} for i, cells in enumerate(rows)]


# -- without a browser ----------------------------------------------------------------


def test_goals_are_seeded_and_respect_the_options() -> None:
    assert generate_goal(7, Options()) == generate_goal(7, Options()) != generate_goal(8, Options())
    kinds: Counter[str] = Counter()
    for seed in range(120):
        opts = Options(
            num_edits=1 + seed % 6,
            rows=8 + seed % 53,
            distractors=seed % 6,
            operations=(("compute", "insert", "sort"), ("compute",), ("insert", "sort"))[seed % 3],
        )
        if opts.num_edits > {0: 6, 1: 6, 2: 4}[seed % 3]:
            continue
        goal = generate_goal(seed, opts)
        assert len(goal.rows) == opts.rows and goal.num_goals == opts.num_edits
        assert set(goal.goal_kinds()) <= set(opts.operations)
        if opts.num_edits >= len(opts.operations):  # every kind asked for comes up
            assert set(goal.goal_kinds()) == set(opts.operations)
        blank_totals = sum(not r[TOTAL] for r in goal.rows)
        assert blank_totals == len(goal.edits) + min(opts.distractors, opts.rows - len(goal.edits))
        kinds.update(e.kind for e in goal.edits)
        if goal.sort is not None:  # one order: no ties in the sort column, not sorted yet
            keys = [r[goal.sort.column] for r in goal.goal_rows()]
            assert len(set(keys)) == len(keys) and not is_sorted(goal.rows, goal.sort)
        # The start meets no goal and has no stray change; the goal sheet meets all.
        start = evaluate(goal, HEADER, sheet_of(goal.rows))
        assert not any(start.met) and start.stray == []
    assert set(kinds) == {"total", "add", "remove", "copy"}


def test_cells_match_numbers_within_half_a_cent_and_text_exactly() -> None:
    assert cell_matches(TOTAL, " 5.4 ", "5.40") and cell_matches(QUANTITY, "12.0", "12")
    assert not cell_matches(TOTAL, "5.41", "5.40") and not cell_matches(TOTAL, "=C2*D2", "5.40")
    assert not cell_matches(TOTAL, "", "5.40") and cell_matches(TOTAL, " ", "")
    assert cell_matches(0, "Kiwis ", "Kiwis") and not cell_matches(0, "kiwis", "Kiwis")


def test_evaluate_counts_goals_and_stray_changes() -> None:
    goal = generate_goal(3, Options(num_edits=2, rows=8, operations=("compute",)))
    rows = sheet_of(goal.rows)
    edit = goal.edits[0]
    rows[edit.row_id]["cells"][edit.column] = edit.value  # the right change: met
    other = next(i for i in range(8) if i not in {e.row_id for e in goal.edits})
    rows[other]["cells"][PRICE] = "0.01"  # a stray change
    ev = evaluate(goal, HEADER, rows)
    assert ev.met[0] and not any(ev.met[1:])
    assert ev.stray == [f"{goal.rows[other][0]!r} Unit price changed"]
    # A deleted row, a row nobody asked for, a changed header, a reordered sheet.
    del rows[other]
    rows.append({"id": 99, "cells": [""] * 8})
    rows[0], rows[1] = rows[1], rows[0]
    ev = evaluate(goal, ["Name", *HEADER[1:]], rows)
    assert ev.stray == [
        "header A changed",
        f"row {goal.rows[other][0]!r} deleted",
        f"extra row {len(rows) + 1}",
        "rows reordered",
    ]


def test_insert_goals_need_the_right_place_unless_sorted() -> None:
    goal = generate_goal(1, Options(num_edits=1, rows=6, operations=("insert",)))
    (ins,) = goal.inserts
    rows = sheet_of(goal.rows)
    at = ins.anchor_id + (ins.side == "below")
    rows.insert(at, {"id": 6, "cells": list(ins.cells)})
    assert evaluate(goal, HEADER, rows).met == [True]
    wrong = rows[:at] + rows[at + 1 :]
    wrong.insert(0 if at > 1 else len(wrong), rows[at])
    ev = evaluate(goal, HEADER, wrong)
    assert ev.met == [False] and ev.stray == [f"extra row {wrong.index(rows[at]) + 2}"]


def test_task_records_the_sheet_and_the_scorer_pays_its_changes() -> None:
    task = SpreadsheetEditTask()
    options = {"num_edits": 2, "rows": 10, "operations": ["compute"]}
    started = task.reset(4, options)
    assert started["instruction"].startswith("In the Stock sheet, ")
    assert started["instruction"] == SpreadsheetEditTask().reset(4, options)["instruction"]
    goal, episode = task.goal, task.episode_id
    scorer = SpreadsheetEditScorer(task.progress(), RewardConfig())
    assert scorer.reset_info() == {"goals": ["compute", "compute"]}
    rows = sheet_of(goal.rows)

    def save() -> float:
        task.handle_event(
            {"type": "sheet", "episode": episode, "header": list(HEADER), "rows": rows}
        )
        return scorer.reward(task.progress())

    first, second = goal.edits
    rows[first.row_id]["cells"][first.column] = first.value
    assert save() == 1.0 and not scorer.done
    other = next(i for i in range(10) if i not in (first.row_id, second.row_id))
    rows[other]["cells"][0] = "Something else"
    assert save() == -0.5
    rows[second.row_id]["cells"][second.column] = second.value
    assert save() == 1.0 and scorer.done
    assert scorer.status() == {"is_success": False, "num_met": 2, "num_stray": 1}
    rows[other]["cells"][0] = goal.rows[other][0]  # undone: refunded, now a success
    assert save() == 0.5 and scorer.status()["is_success"] is True
    # Malformed and stale events change nothing.
    with pytest.raises(ValueError, match="rows: ids must be unique"):
        task.handle_event(
            {"type": "sheet", "episode": episode, "header": list(HEADER), "rows": rows * 2}
        )
    with pytest.raises(ValueError, match="header: expected 8 strings"):
        task.handle_event({"type": "sheet", "episode": episode, "header": [], "rows": rows})
    with pytest.raises(ValueError, match="unknown event type 'save'"):
        task.handle_event({"type": "save", "episode": episode})
    assert task.handle_event({"type": "sheet", "episode": episode - 1})["recorded"] is False
    assert task.progress()["met"] == [True, True]


def test_potential_counts_met_goals_pending_edits_and_inserted_values() -> None:
    task = SpreadsheetEditTask()
    task.reset(2, {"num_edits": 2, "rows": 8, "operations": ["compute", "insert"]})
    goal = task.goal
    scorer = SpreadsheetEditScorer(task.progress(), RewardConfig())
    (edit,), (ins,) = goal.edits, goal.inserts
    rows = sheet_of(goal.rows)
    at = ins.anchor_id + (ins.side == "below")
    rows.insert(at, {"id": 8, "cells": [ins.cells[0], "", ins.cells[2], "", "", "", "", ""]})
    editor = {"row_id": edit.row_id, "column": edit.column, "text": edit.value}
    oracle = task.oracle({"sheet": {"header": list(HEADER), "rows": rows}, "editor": editor})
    assert scorer.potential(oracle) == pytest.approx(0.05 + 2 * 0.02)
    rows[edit.row_id + (edit.row_id >= at)]["cells"][edit.column] = edit.value
    assert scorer.potential({**oracle, "editor": None}) == pytest.approx(0.1 + 2 * 0.02)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_edit": 2}, "unknown option(s) ['num_edit']; allowed: ['distractors', "),
        ({"num_edits": 0}, "num_edits: must be an integer in 1..6, got 0"),
        ({"rows": 61}, "rows: must be an integer in 8..60, got 61"),
        ({"distractors": 6}, "distractors: must be an integer in 0..5, got 6"),
        ({"operations": "sort"}, "operations: must be a non-empty list of distinct names from"),
        (
            {"operations": ["sort", "delete"]},
            "['compute', 'insert', 'sort'], got ['sort', 'delete']",
        ),
        (
            {"operations": ["sort"], "num_edits": 2},
            "num_edits: at most 1 with operations ['sort'] (one sort, three inserts, six",
        ),
    ],
    ids=["unknown", "few", "rows", "distractors", "string", "bad-op", "capacity"],
)
def test_options_errors_are_clear(options: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskOptionsError, match=re.escape(message)):
        SpreadsheetEditTask().reset(0, options)


# -- on real Chromium -----------------------------------------------------------------


def _expert_episodes(env: gym.Env, seeds: range) -> Counter[str]:
    """The expert on each seed (every fourth sheet long enough to scroll); the
    operations that came up."""
    seen: Counter[str] = Counter()
    for seed in seeds:
        options = {"split": "test", "num_edits": 3, "rows": 40 if seed % 4 == 0 else 12}
        env.reset(seed=seed, options=options)
        goal = env.unwrapped.oracle()["goal"]
        seen.update(e["kind"] for e in goal["edits"])
        seen.update(f"insert {i['side']}" for i in goal["inserts"])
        if goal["sort"]:
            seen[f"sort {'desc' if goal['sort']['descending'] else 'asc'}"] += 1
        total, info, _actions = play(env, SpreadsheetEditExpert())
        assert info["is_success"], (seed, info)
        assert total == pytest.approx(3 * (1.0 + 0.1)), (seed, total)  # paid + dense_goal
    return seen


@pytest.mark.slow  # about 200 steps, on two sessions at once
def test_expert_solves_20_test_split_episodes(env: gym.Env, task_runtime: LocalRuntime) -> None:
    """Every operation comes up: each kind of computed cell, inserts above and below,
    sorts both ways."""
    # Two sessions play ten episodes each: a step is a serial round trip (client,
    # server, Chromium), so a second session uses the second core.
    other = gym.make(ENV_ID, runtime=task_runtime, image_format="jpeg", reward_mode="dense")
    try:
        with ThreadPoolExecutor(2) as pool:
            halves = pool.map(_expert_episodes, (env, other), (range(0, 10), range(10, 20)))
            seen = sum(halves, Counter())
    finally:
        other.close()
    assert set(seen) == {
        "total",
        "add",
        "remove",
        "copy",
        "insert above",
        "insert below",
        "sort asc",
        "sort desc",
    }, seen


def test_stray_changes_are_charged_and_the_expert_undoes_them(env: gym.Env) -> None:
    """Through the app's menus: a sort nobody asked for, a deleted row, an extra row, a
    changed cell. Each is charged while it stays; the expert repairs them all."""
    _obs, info = env.reset(
        seed=0, options={"num_edits": 2, "rows": 10, "operations": ["compute", "insert"]}
    )
    o = env.unwrapped.oracle()
    # Data > Sort by column A (Z to A): the original order is broken.
    env.step(click(o["letters"][0]))
    env.step(click(o["menubar"]["data"]))
    o = env.unwrapped.oracle()
    assert o["menu"] == "data" and o["selected"]["column"] == 0
    _obs, reward, *_rest, info = env.step(click(o["menu_items"]["sort_desc"]["box"]))
    assert reward == pytest.approx(-0.5) and info["progress"]["stray"] == ["rows reordered"]
    # The context menu of a row number: delete the row.
    o = env.unwrapped.oracle()
    env.step(Action(ActionType.RIGHT_CLICK, *box_centre(o["visible_rows"][0]["number_box"])))
    o = env.unwrapped.oracle()
    _obs, reward, *_rest, info = env.step(click(o["context_menu"]["delete_row"]["box"]))
    assert reward == pytest.approx(-0.5) and info["num_stray"] == 2
    # Type over a cell, then Escape out of an edit: only the committed change counts.
    o = env.unwrapped.oracle()
    env.step(click(o["visible_rows"][2]["cells"][1]))
    _obs, reward, *_rest, info = env.step(Action(ActionType.TYPE, text="Misc\n"))
    assert reward == pytest.approx(-0.5) and info["num_stray"] == 3
    o = env.unwrapped.oracle()
    cell = o["visible_rows"][4]
    env.step(Action(ActionType.DOUBLE_CLICK, *box_centre(cell["cells"][0])))  # edits in place
    env.step(Action(ActionType.TYPE, text=" x"))
    item = next(r["cells"][0] for r in o["sheet"]["rows"] if r["id"] == cell["id"])
    assert env.unwrapped.oracle()["editor"]["text"] == f"{item} x"
    _obs, reward, *_rest, info = env.step(Action(ActionType.KEYS, keys="Escape"))
    assert reward == 0.0 and env.unwrapped.oracle()["editor"] is None
    # ctrl+z undoes the last change, refunding its charge.
    _obs, reward, *_rest, info = env.step(Action(ActionType.KEYS, keys="ctrl+z"))
    assert reward == pytest.approx(0.5) and info["num_stray"] == 2
    total, info, _actions = play(env, SpreadsheetEditExpert())
    assert info["is_success"] and info["progress"]["stray"] == []
    assert total == pytest.approx(2 * 0.5 + 2 * (1.0 + 0.1))
