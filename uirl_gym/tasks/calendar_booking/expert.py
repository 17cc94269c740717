"""CalendarBooking's scripted expert: reads privileged state, acts only through agent actions.

It plans the next short macro from the ``/oracle`` state, in this order: a created
event that is not the asked booking (or a second copy of it) is deleted (open it, the
bin icon), with the dialog cancelled and the owner's calendar shown first; then, with
no dialog open, it reads the calendars as a person would: shows the owner's and every
attendee's calendar and hides the others (the clicks of one macro), goes to the asked
week, and clicks the slot's empty cell (which opens "New event" with that date and
start). In the dialog it fixes the first wrong field: the title (typed), the date (the
date picker, a month per click), the start and end (the time lists, scrolled with the
wheel when the time is out of view), the guests (a stray guest removed; a missing one
typed and picked from the suggestions), then saves. It re-plans after each macro, so
it recovers from whatever the page shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.calendar_booking.data import Booking, field_matches, monday
from uirl_gym.tasks.expert import MacroExpert, box_centre, click, scroll_towards

ESCAPE = Action(ActionType.KEYS, keys="Escape")


class CalendarBookingExpert(MacroExpert):
    """Solves CalendarBooking episodes from the oracle state (see :class:`MacroExpert`)."""

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        goal = Booking.from_json(o["goal"])
        right = [e["id"] for e in o["created"] if all(field_matches(goal, e))]
        extra = [e for e in o["created"] if e["id"] not in right[:1]]
        if right and not extra:
            return [Action(ActionType.FINISH)]
        if extra:
            return self._delete(o, extra[0])
        if o["dialog"] is not None:
            return self._fill(o, goal)
        if o["popover"] is not None:
            return [ESCAPE]
        return self._find_slot(o, goal)

    def _delete(self, o: Mapping[str, Any], event: Mapping[str, Any]) -> list[Action]:
        if o["dialog"] is not None:  # (an open list may cover Cancel: Escape closes it)
            return [ESCAPE] if o["dialog"]["popup"] else [click(o["controls"]["cancel"])]
        popover = o["popover"]
        if popover is not None and popover["id"] == event["id"]:
            return [click(o["popover_buttons"]["delete"])]
        if popover is not None:
            return [ESCAPE]
        if o["owner"] not in o["shown"]:
            return [click(o["calendars"][o["owner"]])]
        return _week_steps(o, event["date"]) or [click(o["own_events"][str(event["id"])])]

    def _find_slot(self, o: Mapping[str, Any], goal: Booking) -> list[Action]:
        # The sidebar and the week arrows stay put: every click of a kind in one macro.
        wanted = {o["owner"], *goal.attendees}
        toggles = [
            click(box)
            for name, box in o["calendars"].items()
            if (name in wanted) != (name in o["shown"])
        ]
        steps = toggles or _week_steps(o, goal.date)
        if steps:
            return steps
        column = o["columns"][o["week_dates"].index(goal.date)]
        grid = o["grid"]
        y = grid["top"] + (goal.start - grid["day_start"]) * grid["slot_px"] // 30
        return [Action(ActionType.LEFT_CLICK, box_centre(column)[0], y + grid["slot_px"] // 2)]

    def _fill(self, o: Mapping[str, Any], goal: Booking) -> list[Action]:
        d, controls = o["dialog"], o["controls"]
        if d["title"].strip() != goal.title:
            if d["popup"] is not None:
                return [ESCAPE]
            focus = [] if o["focused"] == "title" else [click(controls["title"])]
            clear = [Action(ActionType.KEYS, keys="ctrl+a")] if d["title"] else []
            return [*focus, *clear, Action(ActionType.TYPE, text=goal.title)]
        if d["date"] != goal.date:
            return [_date_step(o, goal.date)]
        if d["start"] != goal.start:
            return [_time_step(o, "start", goal.start)]
        if d["end"] != goal.end:
            return [_time_step(o, "end", goal.end)]
        stray = [a for a in d["attendees"] if a not in goal.attendees]
        if stray:
            return [ESCAPE] if d["popup"] else [click(controls["remove"][stray[0]])]
        missing = [a for a in goal.attendees if a not in d["attendees"]]
        if missing:
            return self._add_guest(o, missing[0])
        if d["popup"] is not None:
            return [ESCAPE]
        return [click(controls["save"])]

    @staticmethod
    def _add_guest(o: Mapping[str, Any], name: str) -> list[Action]:
        d = o["dialog"]
        if d["popup"] == "guests" and name in o["suggestions"]:
            return [click(o["suggestions"][name])]
        if d["popup"] not in (None, "guests"):
            return [ESCAPE]
        focus = [] if o["focused"] == "guest" else [click(o["controls"]["guest"])]
        clear = [Action(ActionType.KEYS, keys="ctrl+a")] if d["query"] else []
        return [*focus, *clear, Action(ActionType.TYPE, text=name)]


def _week_steps(o: Mapping[str, Any], date: str) -> list[Action]:
    """The clicks on the week arrows that show the week of ``date`` (none when shown)."""
    weeks = (monday(date) - monday(o["week_dates"][0])).days // 7
    return [click(o["next"] if weeks > 0 else o["prev"])] * abs(weeks)


def _date_step(o: Mapping[str, Any], date: str) -> Action:
    """Open the date picker, step a month towards ``date``, or pick the day."""
    picker = o["date_picker"]
    if picker is None:
        if o["dialog"]["popup"] is not None:
            return ESCAPE
        return click(o["controls"]["date"])
    shown = picker["year"] * 12 + picker["month"]
    wanted = int(date[:4]) * 12 + int(date[5:7])
    if wanted != shown:
        return click(picker["next"] if wanted > shown else picker["prev"])
    return click(picker["days"][date])


def _time_step(o: Mapping[str, Any], which: str, minutes: int) -> Action:
    """Open the start or end list, scroll it to ``minutes``, or pick it."""
    lst = o["time_list"]
    if lst is None or lst["which"] != which:
        if o["dialog"]["popup"] is not None:
            return ESCAPE
        return click(o["controls"][which])
    x, y, w, h = lst["box"]
    ix, iy, iw, ih = lst["items"][str(minutes)]
    if iy >= y and iy + ih <= y + h:
        return click([ix, iy, iw, ih])
    return scroll_towards([x, y, w, h], iy + ih / 2, round_up=True)
