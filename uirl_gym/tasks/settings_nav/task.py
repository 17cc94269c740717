"""SettingsNav: find settings in a settings app's sections, tabs, menus and dialogs.

The app: a sidebar of sections; each section has tabs of settings (toggles, radio
groups, custom dropdowns, number fields, text values edited in a dialog), a "more"
menu whose "Advanced settings..." item opens a modal dialog with more settings (OK
applies them to the section, Cancel drops them), "Restore defaults..." (a confirm
dialog) and "Export settings". Changes are pending until the section's "Save changes"
button; leaving a section with pending changes asks "Discard unsaved changes?"
(Discard drops them; Keep editing stays). Only saved values are recorded.

The record (``/progress``): the targets, the saved values of the targets, and which
non-target settings are saved at a value other than their initial one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import Task, TaskOptionsError, check_option_names, int_option
from uirl_gym.tasks.settings_nav.data import SETTINGS, SettingsTree, Value, generate_tree

MAX_TARGETS = 5
DEFAULT_NUM_TARGETS = 3
DEFAULT_DEPTH = 3
DEFAULT_SETTINGS_PER_TAB = 4
OPTION_NAMES = frozenset({"num_targets", "depth", "distractors", "settings_per_tab"})


@dataclass(frozen=True)
class Options:
    """An episode's difficulty (see docs/tasks/settings_nav.md)."""

    num_targets: int = DEFAULT_NUM_TARGETS
    depth: int = DEFAULT_DEPTH
    distractors: bool = True
    settings_per_tab: int = DEFAULT_SETTINGS_PER_TAB


def parse_options(options: Mapping[str, Any]) -> Options:
    """Checked reset options.

    Raises:
        TaskOptionsError: an unknown option, or a value of the wrong type or range.
    """
    check_option_names(options, OPTION_NAMES)
    distractors = options.get("distractors", True)
    if not isinstance(distractors, bool):
        raise TaskOptionsError(f"distractors: must be true or false, got {distractors!r}")
    return Options(
        num_targets=int_option(options, "num_targets", DEFAULT_NUM_TARGETS, 1, MAX_TARGETS),
        depth=int_option(options, "depth", DEFAULT_DEPTH, 1, 3),
        distractors=distractors,
        settings_per_tab=int_option(options, "settings_per_tab", DEFAULT_SETTINGS_PER_TAB, 2, 5),
    )


def describe(setting_id: str, value: Value) -> str:
    """The instruction's words for setting ``setting_id`` to ``value``."""
    d = SETTINGS[setting_id]
    if d.kind == "toggle":
        return f'turn {"on" if value else "off"} "{d.name}"'
    if d.kind == "number":
        space = "" if d.unit == "%" else " "
        return f'set "{d.name}" to {value}{space}{d.unit}'
    return f'set "{d.name}" to "{value}"'


class SettingsNavTask(Task):
    """The episode's settings tree and what has been saved. See the module docstring."""

    name = "settings_nav"
    public_progress_keys = frozenset({"episode", "num_targets", "num_saves"})

    def __init__(self) -> None:
        self.tree: SettingsTree | None = None
        self.saved: dict[str, Value] = {}
        self.num_saves = 0

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        rng = random.Random(seed)
        self.tree = generate_tree(
            rng, opts.num_targets, opts.depth, opts.distractors, opts.settings_per_tab
        )
        self.saved = dict(self.tree.initial)
        self.num_saves = 0
        self.episode_id += 1
        return {
            "instruction": self.instruction(),
            "app_state": {
                "episode": self.episode_id,
                "sections": self.tree.sections,
                "settings": {i: SETTINGS[i].as_json() for i in self.tree.placements},
                "saved": self.saved,
                "defaults": self.tree.defaults,
            },
        }

    def instruction(self) -> str:
        assert self.tree is not None
        parts = [describe(i, v) for i, v in self.tree.targets.items()]
        changes = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return (
            f"In the Settings app, {changes}. Save your changes; do not change any other setting."
        )

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.tree is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        if event.get("type") != "save":
            raise ValueError(f"unknown event type {event.get('type')!r}")
        values = event.get("values")
        if not isinstance(values, Mapping) or not values:
            raise ValueError("values: expected a non-empty {setting id: value} object")
        for setting_id, value in values.items():
            if setting_id not in self.tree.placements:
                raise ValueError(f"unknown setting {setting_id!r}")
            if not SETTINGS[setting_id].valid(value):
                raise ValueError(f"{setting_id}: {value!r} is not a valid value")
        # All or nothing: a save with one bad value changes nothing (checked above).
        self.saved.update(values)
        self.num_saves += 1
        return {"recorded": True}

    def progress(self) -> dict[str, Any]:
        if self.tree is None:
            return {"targets": {}, "num_targets": 0, "saved_targets": {}, "changed_non_targets": [],
                    "num_saves": 0}  # fmt: skip
        targets = self.tree.targets
        return {
            "episode": self.episode_id,
            "targets": dict(targets),
            "num_targets": len(targets),
            "saved_targets": {i: self.saved[i] for i in targets},
            "changed_non_targets": sorted(
                i for i, v in self.saved.items() if i not in targets and v != self.tree.initial[i]
            ),
            "num_saves": self.num_saves,
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.tree is not None
        return {
            "episode": self.episode_id,
            "targets": dict(self.tree.targets),
            "saved": dict(self.saved),
            "initial": dict(self.tree.initial),
            "placements": {
                i: {"section": p.section, "tab": p.tab, "depth": p.depth, "kind": SETTINGS[i].kind}
                for i, p in self.tree.placements.items()
            },
            **page_state,
        }
