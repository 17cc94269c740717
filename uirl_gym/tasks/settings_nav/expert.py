"""SettingsNav's scripted expert: reads privileged state, acts only through agent actions.

It plans a short macro (one to three actions) from the ``/oracle`` state, plays it,
and plans again, so it recovers from whatever the page shows (a menu left open, a
dialog, a pending change it did not make). Per section it sets every target living
there (dialog targets first, then tab by tab) and saves once before moving on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType


def _centre(box: list[int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2


def _click(box: list[int]) -> Action:
    return Action(ActionType.LEFT_CLICK, *_centre(box))


class SettingsNavExpert:
    """Solves SettingsNav episodes from the oracle state.

    Methods:
        next_action(oracle): the next action given the current ``/oracle`` JSON.
        reset(): forget the macro in progress (call at every episode start).
    """

    def __init__(self) -> None:
        self._queue: deque[Action] = deque()

    def reset(self) -> None:
        self._queue.clear()

    def next_action(self, oracle: Mapping[str, Any]) -> Action:
        if not self._queue:
            self._queue.extend(self._plan(oracle))
        return self._queue.popleft()

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        targets, saved, place = o["targets"], o["saved"], o["placements"]
        remaining = [i for i, v in targets.items() if saved[i] != v]
        if not remaining:
            return [Action(ActionType.FINISH)]
        if o["dialog"] in ("leave", "restore"):
            return [self._answer_confirm(o)]
        if o["menu_open"] and not self._wants_dialog(o, remaining):
            return [_click(o["kebab"])]
        here = [i for i in remaining if place[i]["section"] == o["section"]]
        # What the section would save that it should not: a non-target (or target) whose
        # page value differs from both its saved value and its target.
        stray = [
            i
            for i, v in o["page_values"].items()
            if v != saved[i] and v != targets.get(i, saved[i])
        ]
        if o["dialog"] == "advanced":
            return self._in_advanced(o, here)
        if o["dialog"] == "edit":
            return self._in_edit(o)
        if stray:
            return [_click(o["discard_button"])]
        todo = [i for i in here if o["page_values"][i] != targets[i]]
        if not todo:
            if o["dirty"]:
                return [_click(o["save_button"])]
            return [_click(o["sidebar"][place[remaining[0]]["section"]])]
        todo.sort(key=lambda i: (place[i]["tab"] is not None, place[i]["tab"] or 0))
        target = todo[0]
        tab = place[target]["tab"]
        if tab is None:
            if o["menu_open"]:
                return [_click(o["menu"]["advanced"])]
            return [_click(o["kebab"])]
        if o["tab"] != tab:
            return [_click(o["tabs"][tab])]
        return self._set(o, target, targets[target])

    @staticmethod
    def _wants_dialog(o: Mapping[str, Any], remaining: list[str]) -> bool:
        return any(
            o["placements"][i]["section"] == o["section"]
            and o["placements"][i]["tab"] is None
            and o["page_values"][i] != o["targets"][i]
            for i in remaining
        )

    @staticmethod
    def _answer_confirm(o: Mapping[str, Any]) -> Action:
        buttons = o["dialog_buttons"]
        if o["dialog"] == "restore":
            return _click(buttons["cancel"])
        # Leaving with pending changes: keep them when they are all wanted (then save).
        keep = all(
            v == o["saved"][i] or v == o["targets"].get(i) for i, v in o["page_values"].items()
        )
        return _click(buttons["keep"] if keep else buttons["discard"])

    def _in_advanced(self, o: Mapping[str, Any], here: list[str]) -> list[Action]:
        controls = o["controls"]
        for i, c in controls.items():
            value = o["targets"].get(i, o["saved"][i])
            if c["value"] != value:
                return self._set(o, i, value)
        return [_click(o["dialog_buttons"]["ok"])]

    @staticmethod
    def _in_edit(o: Mapping[str, Any]) -> list[Action]:
        i = o["dialog_setting"]
        value = o["targets"].get(i, o["saved"][i])
        if o["dialog_value"] == value:
            return [_click(o["dialog_buttons"]["ok"])]
        return [
            _click(o["edit_input"]),
            Action(ActionType.KEYS, keys="ctrl+a"),
            Action(ActionType.TYPE, text=str(value)),
        ]

    @staticmethod
    def _set(o: Mapping[str, Any], i: str, value: Any) -> list[Action]:
        """Actions that move setting ``i``'s visible control towards ``value``."""
        c = o["controls"][i]
        kind = c["kind"]
        if kind == "toggle":
            return [_click(c["box"])]
        if kind == "radio":
            return [_click(c["options"][value])]
        if kind == "dropdown":
            if "list" in c:
                return [_click(c["list"][value])]
            return [_click(c["box"])]
        if kind == "number":
            return [
                _click(c["box"]),
                Action(ActionType.KEYS, keys="ctrl+a"),
                Action(ActionType.TYPE, text=str(value)),
            ]
        return [_click(c["box"])]  # text: its Edit button opens the edit dialog
