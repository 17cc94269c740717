"""FormFill's scripted expert: reads privileged state, acts only through agent actions.

It plans a short macro from the ``/oracle`` state (fix the first field in form order
that does not hold its target value), plays it, and plans again, so it recovers from
whatever the page shows: an open popup it no longer needs is closed with Escape, the
calendar is stepped a month per click towards the target, a confirmation page after a
wrong submission is left through "Edit your response".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.form_fill.data import field_matches

TEXT_FIELDS = ("full_name", "policy_number", "email", "phone")


def _centre(box: list[int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2


def _click(box: list[int]) -> Action:
    return Action(ActionType.LEFT_CLICK, *_centre(box))


class FormFillExpert:
    """Solves FormFill episodes from the oracle state.

    Methods:
        next_action(oracle): the next action given the current ``/oracle`` JSON.
        needs_oracle: whether the next call plans (else ``oracle`` may be None: callers
            skip an ``/oracle`` round trip in the middle of a macro).
        reset(): forget the macro in progress (call at every episode start).
    """

    def __init__(self) -> None:
        self._queue: deque[Action] = deque()

    def reset(self) -> None:
        self._queue.clear()

    @property
    def needs_oracle(self) -> bool:
        return not self._queue

    def next_action(self, oracle: Mapping[str, Any] | None) -> Action:
        """The next action (``ValueError``: no macro in progress and no ``oracle``)."""
        if not self._queue:
            if oracle is None:
                raise ValueError("no macro in progress: pass the current /oracle state")
            self._queue.extend(self._plan(oracle))
        return self._queue.popleft()

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        if any(s["correct"] for s in o["submissions"]):
            return [Action(ActionType.FINISH)]
        if o["view"] == "done":
            return [_click(o["edit_link"])]
        values, targets = o["form_values"], o["targets"]
        wrong = [f for f in o["fields"] if not field_matches(f, values[f], targets[f])]
        dropdown_open = bool(o["dropdown"] and o["dropdown"]["open"])
        calendar_open = bool(o["calendar"] and o["calendar"]["open"])
        field = wrong[0] if wrong else None
        if (dropdown_open and field != "claim_type") or (
            calendar_open and field != "incident_date"
        ):
            return [Action(ActionType.KEYS, keys="Escape")]
        if field is None:
            return [_click(o["submit_button"])]
        control = o["controls"][field]
        target = targets[field]
        if field in TEXT_FIELDS:
            clear = [Action(ActionType.KEYS, keys="ctrl+a")] if values[field] else []
            return [_click(control["box"]), *clear, Action(ActionType.TYPE, text=target)]
        if field == "claim_type":
            if not dropdown_open:
                return [_click(control["box"])]
            return [_click(o["dropdown"]["options"][target])]
        if field == "incident_date":
            return [self._calendar_step(o["calendar"], target)]
        options = control["options"]
        if field == "contact_method":
            return [_click(options[target]["box"])]
        # attachments: toggle every box whose state differs from the target
        return [
            _click(opt["box"])
            for name, opt in options.items()
            if opt["checked"] != (name in target)
        ]

    @staticmethod
    def _calendar_step(calendar: Mapping[str, Any], target_iso: str) -> Action:
        """Open the calendar, step one month towards the target, or pick the day."""
        if not calendar["open"]:
            return _click(calendar["toggle"])
        year, month = int(target_iso[:4]), int(target_iso[5:7])
        shown = calendar["year"] * 12 + calendar["month"]
        wanted = year * 12 + month
        if wanted < shown:
            return _click(calendar["prev"])
        if wanted > shown:
            return _click(calendar["next"])
        return _click(calendar["days"][target_iso])
