"""SettingsNav: the task's data and record, its scorer, and episodes on real Chromium."""

from __future__ import annotations

import random
import re

import gymnasium as gym
import pytest
from task_play import play

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.base import TaskOptionsError
from uirl_gym.tasks.expert import box_centre
from uirl_gym.tasks.settings_nav.data import SETTINGS, generate_tree
from uirl_gym.tasks.settings_nav.expert import SettingsNavExpert
from uirl_gym.tasks.settings_nav.score import RewardConfig, SettingsNavScorer
from uirl_gym.tasks.settings_nav.task import SettingsNavTask

ENV_ID = "uirl/SettingsNav-v0"


# -- without a browser ----------------------------------------------------------------


def test_tree_is_seeded_and_targets_respect_depth() -> None:
    for seed in range(60):
        depth = 1 + seed % 3
        tree = generate_tree(random.Random(seed), 5, depth, seed % 2 == 0, 2 + seed % 4)
        again = generate_tree(random.Random(seed), 5, depth, seed % 2 == 0, 2 + seed % 4)
        assert tree.targets == again.targets and tree.sections == again.sections
        assert len(tree.targets) == 5
        for i, value in tree.targets.items():
            assert tree.placements[i].depth <= depth
            assert value != tree.initial[i] and SETTINGS[i].valid(value)


def test_instruction_and_record() -> None:
    task = SettingsNavTask()
    started = task.reset(5, {"num_targets": 2})
    assert started["instruction"] == SettingsNavTask().reset(5, {"num_targets": 2})["instruction"]
    (a, va), (b, vb) = task.tree.targets.items()
    assert f'"{SETTINGS[a].name}"' in started["instruction"]
    episode = started["app_state"]["episode"]
    other = next(
        i
        for i in task.tree.placements
        if i not in task.tree.targets and SETTINGS[i].kind == "toggle"
    )
    changed = not task.tree.initial[other]
    task.handle_event({"type": "save", "episode": episode, "values": {a: va, other: changed}})
    progress = task.progress()
    assert progress["saved_targets"] == {a: va, b: task.tree.initial[b]}
    assert progress["changed_non_targets"] == [other]
    # Saving the initial value back undoes the change.
    task.handle_event(
        {"type": "save", "episode": episode, "values": {other: task.tree.initial[other]}}
    )
    assert task.progress()["changed_non_targets"] == []
    # Bad events change nothing; stale ones are ignored.
    with pytest.raises(ValueError, match="unknown setting"):
        task.handle_event({"type": "save", "episode": episode, "values": {"nope": 1}})
    with pytest.raises(ValueError, match="not a valid value"):
        task.handle_event({"type": "save", "episode": episode, "values": {b: vb, a: None}})
    assert task.progress()["saved_targets"][b] == task.tree.initial[b]
    assert not task.handle_event({"type": "save", "episode": episode - 1, "values": {b: vb}})[
        "recorded"
    ]


def test_scorer_counts_saved_values_only() -> None:
    targets = {"theme": "Dark", "spell_check": True}
    start = {
        "targets": targets,
        "saved_targets": {"theme": "Light", "spell_check": False},
        "changed_non_targets": [],
    }
    s = SettingsNavScorer(start, RewardConfig())
    # Right value saved: paid once.
    right = {**start, "saved_targets": {"theme": "Dark", "spell_check": False}}
    assert s.reward(right) == 1.0 and s.reward(right) == 0.0
    assert s.status() == {"is_success": False, "num_correct": 1, "num_changed_non_targets": 0}
    # An unsaved change counts in the dense potential only.
    oracle = {
        "saved": {"theme": "Dark", "spell_check": False},
        "page_values": {"spell_check": True},
    }
    assert s.potential(oracle) == pytest.approx(0.1 + 0.05)
    # A non-target changed is charged, and success needs it undone.
    done = {
        "targets": targets,
        "saved_targets": targets,
        "changed_non_targets": ["font_size"],
    }
    assert s.reward(done) == pytest.approx(1.0 - 0.5)
    assert s.done and s.status()["is_success"] is False
    assert s.reward({**done, "changed_non_targets": []}) == pytest.approx(0.5)
    assert s.status()["is_success"] is True


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_targets": 0}, "num_targets: must be an integer in 1..5, got 0"),
        ({"num_targets": 6}, "num_targets: must be an integer in 1..5, got 6"),
        ({"depth": 4}, "depth: must be an integer in 1..3, got 4"),
        ({"distractors": "yes"}, "distractors: must be true or false, got 'yes'"),
        ({"settings_per_tab": 1}, "settings_per_tab: must be an integer in 2..5, got 1"),
        ({"targets": 2}, "unknown option(s) ['targets']; allowed: "),
    ],
    ids=["few", "many", "depth", "distractors", "per_tab", "unknown"],
)
def test_options_errors_are_clear(options: dict, message: str) -> None:
    with pytest.raises(TaskOptionsError, match=re.escape(message)):
        SettingsNavTask().reset(0, options)


# -- on real Chromium -----------------------------------------------------------------


def test_expert_reaches_targets_at_every_depth(env: gym.Env) -> None:
    """20 test-split episodes, one target each at any depth (tabs, menu + dialog, edit)."""
    depths = set()
    for seed in range(20):
        _obs, info = env.reset(seed=seed, options={"split": "test", "num_targets": 1})
        (target,) = info["targets"]
        depths.add(env.unwrapped.oracle()["placements"][target]["depth"])
        total, info, actions = play(env, SettingsNavExpert())
        assert info["is_success"], (seed, info)
        assert total == pytest.approx(1.0 + 0.1), (seed, total)  # paid + dense_saved
    assert depths == {1, 2, 3}


def test_unsaved_change_is_not_counted_and_a_stray_one_is_charged(env: gym.Env) -> None:
    # Several targets (seed 3 has one in the first section's dialog or tabs).
    _obs, info = env.reset(seed=3, options={"num_targets": 3})
    targets = info["targets"]
    expert = SettingsNavExpert()
    # Play until a target shows its value on the page, but stop before saving.
    for _ in range(30):
        o = env.unwrapped.oracle()
        pending = [i for i, v in targets.items() if o["page_values"].get(i) == v]
        if pending and o["dialog"] is None:
            break
        _obs, reward, *_rest, info = env.step(expert.next_action(o))
    assert pending, "the expert never set a target"
    assert info["num_correct"] == 0
    # Leaving the section discards it: nothing was saved.
    o = env.unwrapped.oracle()
    other = (o["section"] + 1) % len(o["sidebar"])
    _obs, reward, *_rest, info = env.step(
        Action(ActionType.LEFT_CLICK, *box_centre(o["sidebar"][other]))
    )
    o = env.unwrapped.oracle()
    assert o["dialog"] == "leave"
    _obs, reward, *_rest, info = env.step(
        Action(ActionType.LEFT_CLICK, *box_centre(o["dialog_buttons"]["discard"]))
    )
    assert reward == pytest.approx(-0.05 * len(pending)) and info["num_correct"] == 0
    # Change a non-target of the new section and save it: charged.
    changed = change_a_non_target(env, targets)
    _obs, reward, *_rest, info = env.step(
        Action(ActionType.LEFT_CLICK, *box_centre(env.unwrapped.oracle()["save_button"]))
    )
    assert reward == pytest.approx(-0.5)
    assert info["progress"]["changed_non_targets"] == [changed]
    # The expert sets the stray setting back, then finishes the targets: a success.
    total, info, _actions = play(env, expert)
    assert info["is_success"] and info["progress"]["changed_non_targets"] == []
    assert total == pytest.approx(0.5 + 3 * (1.0 + 0.1))


def change_a_non_target(env: gym.Env, targets: dict) -> str:
    """Change the first visible non-target setting through the page; its id."""
    o = env.unwrapped.oracle()
    i, c = next((i, c) for i, c in o["controls"].items() if i not in targets)
    if c["kind"] == "radio":
        box = next(b for label, b in c["options"].items() if label != c["value"])
        env.step(Action(ActionType.LEFT_CLICK, *box_centre(box)))
    elif c["kind"] == "number":
        env.step(Action(ActionType.LEFT_CLICK, *box_centre(c["box"])))
        env.step(Action(ActionType.KEYS, keys="ctrl+a"))
        low = SETTINGS[i].low
        env.step(Action(ActionType.TYPE, text=str(low if c["value"] != low else low + 1)))
    else:  # toggle, dropdown (opens its list) or text (opens its edit dialog)
        env.step(Action(ActionType.LEFT_CLICK, *box_centre(c["box"])))
    o = env.unwrapped.oracle()
    if c["kind"] == "dropdown":
        box = next(b for label, b in o["controls"][i]["list"].items() if label != c["value"])
        env.step(Action(ActionType.LEFT_CLICK, *box_centre(box)))
    elif c["kind"] == "text":
        env.step(Action(ActionType.LEFT_CLICK, *box_centre(o["edit_input"])))
        env.step(Action(ActionType.TYPE, text=" Jr"))
        env.step(Action(ActionType.LEFT_CLICK, *box_centre(o["dialog_buttons"]["ok"])))
    return i
