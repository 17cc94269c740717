"""FormFill's scripted expert: reads privileged state, acts only through agent actions.

It plans a short macro from the ``/oracle`` state (fix the first field in form order
that does not hold its target value), plays it, and plans again, so it recovers from
whatever the page shows: an open popup it no longer needs is closed with Escape, the
calendar is stepped a month per click towards the target, a confirmation page after a
wrong submission is left through "Edit your response".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert, click
from uirl_gym.tasks.form_fill.data import field_matches

TEXT_FIELDS = ("full_name", "policy_number", "email", "phone")


class FormFillExpert(MacroExpert):
    """Solves FormFill episodes from the oracle state (see :class:`MacroExpert`)."""

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        if any(s["correct"] for s in o["submissions"]):
            return [Action(ActionType.FINISH)]
        if o["view"] == "done":
            return [click(o["edit_link"])]
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
            return [click(o["submit_button"])]
        control = o["controls"][field]
        target = targets[field]
        if field in TEXT_FIELDS:
            clear = [Action(ActionType.KEYS, keys="ctrl+a")] if values[field] else []
            return [click(control["box"]), *clear, Action(ActionType.TYPE, text=target)]
        if field == "claim_type":
            if not dropdown_open:
                return [click(control["box"])]
            return [click(o["dropdown"]["options"][target])]
        if field == "incident_date":
            return [self._calendar_step(o["calendar"], target)]
        options = control["options"]
        if field == "contact_method":
            return [click(options[target]["box"])]
        # attachments: toggle every box whose state differs from the target
        return [
            click(opt["box"]) for name, opt in options.items() if opt["checked"] != (name in target)
        ]

    @staticmethod
    def _calendar_step(calendar: Mapping[str, Any], target_iso: str) -> Action:
        """Open the calendar, step one month towards the target, or pick the day."""
        if not calendar["open"]:
            return click(calendar["toggle"])
        year, month = int(target_iso[:4]), int(target_iso[5:7])
        shown = calendar["year"] * 12 + calendar["month"]
        wanted = year * 12 + month
        if wanted < shown:
            return click(calendar["prev"])
        if wanted > shown:
            return click(calendar["next"])
        return click(calendar["days"][target_iso])
