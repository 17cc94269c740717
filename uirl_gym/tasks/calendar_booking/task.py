"""CalendarBooking: book a meeting in the first slot where everyone is free.

The app: a work-week calendar (Monday to Friday, 8:00 to 18:00, working hours 9:00 to
17:00 unshaded) with week navigation (Today, previous and next week), a sidebar of
calendars to show or hide (the owner's, the team's, each in its colour), event details
on a click, and a "New event" dialog (opened by Create or by a click on an empty slot
of the grid): a title, a date picker (a month calendar), start and end time lists
(half hours; the end list shows durations), a guest picker with autocomplete over the
company directory, Save and Cancel. The owner's saved events can be opened and
deleted.

The record: the events created in the episode (and deletions). ``/progress`` scores the
best-matching created event field by field against the asked booking
(:func:`~uirl_gym.tasks.calendar_booking.data.evaluate`) and counts the others as extra.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping
from typing import Any

from uirl_gym.tasks.base import Task, is_int
from uirl_gym.tasks.calendar_booking.data import (
    DAY_END_MIN,
    DAY_START_MIN,
    FIELDS,
    OWNER,
    STEP_MIN,
    WORK_END_MIN,
    WORK_START_MIN,
    Calendar,
    email_of,
    evaluate,
    generate_calendar,
    parse_options,
    time_text,
)

# The record keeps at most this many created events (a larger record is malformed) and
# /progress, which travels in a response header, lists the first few.
MAX_CREATED = 100
MAX_TITLE_CHARS = 200
MAX_LISTED = 5
# Calendar colours: the owner's first, then the team's in sidebar order.
COLOURS = (
    "#1a73e8", "#e67c73", "#33b679", "#f4511e", "#8e24aa", "#f6bf26", "#039be5", "#616161",
    "#d50000",
)  # fmt: skip


def day_text(iso: str) -> str:
    """``Tuesday 16 November``."""
    d = dt.date.fromisoformat(iso)
    return f"{d:%A} {d.day} {d:%B}"


def names_text(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def instruction(cal: Calendar) -> str:
    goal = cal.goal
    hours = (
        f"starting no earlier than {time_text(cal.earliest)} and ending by {time_text(cal.latest)}"
    )
    who = "both of you" if len(goal.attendees) == 1 else "all of you"
    return (
        f'In the Calendar app, book a {cal.duration}-minute meeting titled "{goal.title}" with '
        f"{names_text(list(goal.attendees))} in the first slot when {who} are free: on a "
        f"weekday from {day_text(cal.range_start)} to {day_text(cal.range_end)}, {hours}. "
        "Invite exactly these people and create no other events."
    )


class CalendarBookingTask(Task):
    """The episode's calendars, the asked booking and the created events (module docstring)."""

    name = "calendar_booking"
    public_progress_keys = frozenset({"episode", "num_events", "num_changes"})

    def __init__(self) -> None:
        self.calendar: Calendar | None = None
        self.created: list[dict[str, Any]] = []
        self.num_changes = 0

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        rng = random.Random(seed)
        self.calendar = cal = generate_calendar(rng.randrange(2**63), opts)
        self.created = []
        self.num_changes = 0
        self.episode_id += 1
        people = [OWNER, *cal.team]
        return {
            "instruction": instruction(cal),
            "app_state": {
                "episode": self.episode_id,
                "today": cal.today,
                "owner": OWNER,
                "calendars": [
                    {"name": p, "colour": COLOURS[i], "shown": p in cal.shown}
                    for i, p in enumerate(people)
                ],
                "directory": [{"name": p, "email": email_of(p)} for p in cal.directory],
                "events": list(cal.events),
                "hours": [DAY_START_MIN, DAY_END_MIN, WORK_START_MIN, WORK_END_MIN, STEP_MIN],
            },
        }

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.calendar is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        kind = event.get("type")
        if kind == "create":
            self.created.append(self._checked(event.get("event")))
        elif kind == "delete":
            ids = [e["id"] for e in self.created]
            if event.get("id") not in ids:
                raise ValueError(f"delete: no created event with id {event.get('id')!r}")
            del self.created[ids.index(event["id"])]
        else:
            raise ValueError(f"unknown event type {kind!r}; expected 'create' or 'delete'")
        self.num_changes += 1
        return {"recorded": True}

    def _checked(self, e: Any) -> dict[str, Any]:
        assert self.calendar is not None
        if not isinstance(e, Mapping):
            raise ValueError("event: expected an object")
        if len(self.created) >= MAX_CREATED:
            raise ValueError(f"at most {MAX_CREATED} created events")
        event_id, title, date = e.get("id"), e.get("title"), e.get("date")
        if not is_int(event_id):
            raise ValueError("id: expected an integer")
        if event_id in {c["id"] for c in self.created}:
            raise ValueError(f"id: {event_id} is taken")
        if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
            raise ValueError(f"title: expected a string of at most {MAX_TITLE_CHARS} characters")
        try:
            dt.date.fromisoformat(date if isinstance(date, str) else "")
        except ValueError:
            raise ValueError(f"date: expected an ISO date, got {date!r}") from None
        start, end = e.get("start"), e.get("end")
        if not (is_int(start) and is_int(end) and DAY_START_MIN <= start < end <= DAY_END_MIN):
            raise ValueError(
                f"start, end: expected minutes with {DAY_START_MIN} <= start < end <= "
                f"{DAY_END_MIN}, got {start!r}, {end!r}"
            )
        attendees = e.get("attendees")
        if (
            not isinstance(attendees, list)
            or any(a not in self.calendar.directory for a in attendees)
            or len(set(attendees)) != len(attendees)
        ):
            raise ValueError("attendees: expected distinct names from the directory")
        return {
            "id": event_id,
            "title": title,
            "date": date,
            "start": start,
            "end": end,
            "attendees": list(attendees),
        }

    def progress(self) -> dict[str, Any]:
        if self.calendar is None:
            return {"fields": list(FIELDS), "matched": [False] * len(FIELDS), "num_events": 0,
                    "num_extra": 0, "events": [], "num_changes": 0}  # fmt: skip
        ev = evaluate(self.calendar.goal, self.created)
        return {
            "episode": self.episode_id,
            "fields": list(FIELDS),
            "matched": ev.matched,
            "num_events": len(self.created),
            "num_extra": ev.num_extra,
            "events": self.created[:MAX_LISTED],
            "num_changes": self.num_changes,
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.calendar is not None
        cal = self.calendar
        ev = evaluate(cal.goal, self.created)
        return {
            "episode": self.episode_id,
            "goal": cal.goal.to_json(),
            "owner": OWNER,
            "distractors": list(cal.distractors),
            "today": cal.today,
            "range": [cal.range_start, cal.range_end],
            "hours": [cal.earliest, cal.latest],
            "created": [dict(e) for e in self.created],
            "matched": ev.matched,
            "best": ev.best,
            "num_extra": ev.num_extra,
            **page_state,
        }
