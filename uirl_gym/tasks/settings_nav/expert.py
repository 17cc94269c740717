"""SettingsNav's scripted expert: reads privileged state, acts only through agent actions.

It plans a short macro (one to three actions) from the ``/oracle`` state, plays it,
and plans again, so it recovers from whatever the page shows (a menu left open, a
dialog, a pending change it did not make). Per section it sets every target living
there (dialog targets first, then tab by tab) and saves once before moving on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert, click


class SettingsNavExpert(MacroExpert):
    """Solves SettingsNav episodes from the oracle state (see :class:`MacroExpert`)."""

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        plan = self._macro(o)
        # An open list covers the rows below it: close it unless picking from it.
        if o["dropdown"] is not None and not _picks_from_list(o, plan[0]):
            return [Action(ActionType.KEYS, keys="Escape")]
        return plan

    def _macro(self, o: Mapping[str, Any]) -> list[Action]:
        targets, saved, place = o["targets"], o["saved"], o["placements"]
        # Non-targets are wanted at their initial value: one saved changed (by a slip
        # or another agent) is set back, before the last target ends the episode.
        remaining = [i for i in place if saved[i] != _wanted(o, i)]
        if not remaining:
            return [Action(ActionType.FINISH)]
        if o["dialog"] in ("leave", "restore"):
            return [_answer_confirm(o)]
        cur = o["section"]
        reverts_elsewhere = [
            i for i in remaining if i not in targets and place[i]["section"] != cur
        ]
        here = [
            i
            for i in remaining
            if place[i]["section"] == cur and not (i in targets and reverts_elsewhere)
        ]
        page = o["page_values"]
        todo = [i for i in here if page[i] != _wanted(o, i)]
        if o["menu_open"] and not any(place[i]["tab"] is None for i in todo):
            return [click(o["kebab"])]
        if o["dialog"] == "advanced":
            return self._in_advanced(o)
        if o["dialog"] == "edit":
            return self._in_edit(o)
        # What the section would save that nobody wants: discard it.
        if any(v != saved[i] and v != _wanted(o, i) for i, v in page.items()):
            return [click(o["discard_button"])]
        if not todo:
            if o["dirty"]:
                completes = all(saved[t] == v or page.get(t) == v for t, v in targets.items())
                if completes and reverts_elsewhere:
                    return [click(o["discard_button"])]
                return [click(o["save_button"])]
            go = (reverts_elsewhere or remaining)[0]
            return [click(o["sidebar"][place[go]["section"]])]
        todo.sort(key=lambda i: (place[i]["tab"] is not None, place[i]["tab"] or 0))
        first = todo[0]
        tab = place[first]["tab"]
        if tab is None:
            if o["menu_open"]:
                return [click(o["menu"]["advanced"])]
            return [click(o["kebab"])]
        if o["tab"] != tab:
            return [click(o["tabs"][tab])]
        return _set(o, first, _wanted(o, first))

    def _in_advanced(self, o: Mapping[str, Any]) -> list[Action]:
        for i, c in o["controls"].items():
            if c["value"] != _wanted(o, i):
                return _set(o, i, _wanted(o, i))
        return [click(o["dialog_buttons"]["ok"])]

    @staticmethod
    def _in_edit(o: Mapping[str, Any]) -> list[Action]:
        value = _wanted(o, o["dialog_setting"])
        if o["dialog_value"] == value:
            return [click(o["dialog_buttons"]["ok"])]
        return [
            click(o["edit_input"]),
            Action(ActionType.KEYS, keys="ctrl+a"),
            Action(ActionType.TYPE, text=str(value)),
        ]


def _picks_from_list(o: Mapping[str, Any], action: Action) -> bool:
    for c in o["controls"].values():
        for x, y, w, h in c.get("list", {}).values():
            if (
                action.type is ActionType.LEFT_CLICK
                and x <= action.x < x + w
                and y <= action.y < y + h
            ):
                return True
    return False


def _wanted(o: Mapping[str, Any], i: str) -> Any:
    """A target's asked value; any other setting's initial value."""
    return o["targets"].get(i, o["initial"][i])


def _answer_confirm(o: Mapping[str, Any]) -> Action:
    buttons = o["dialog_buttons"]
    if o["dialog"] == "restore":
        return click(buttons["cancel"])
    # Leaving with pending changes: keep them when they are all wanted (then save).
    keep = all(v == o["saved"][i] or v == _wanted(o, i) for i, v in o["page_values"].items())
    return click(buttons["keep"] if keep else buttons["discard"])


def _set(o: Mapping[str, Any], i: str, value: Any) -> list[Action]:
    """Actions that move setting ``i``'s visible control towards ``value``."""
    c = o["controls"][i]
    kind = c["kind"]
    if kind == "toggle":
        return [click(c["box"])]
    if kind == "radio":
        return [click(c["options"][value])]
    if kind == "dropdown":
        if "list" in c:
            return [click(c["list"][value])]
        return [click(c["box"])]
    if kind == "number":
        return [
            click(c["box"]),
            Action(ActionType.KEYS, keys="ctrl+a"),
            Action(ActionType.TYPE, text=str(value)),
        ]
    return [click(c["box"])]  # text: its Edit button opens the edit dialog
