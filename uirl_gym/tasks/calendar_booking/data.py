"""Seeded calendars, the meeting an episode asks to book, and how a booking is scored.

An episode has an owner (the user, "Alex Morgan"), a team whose calendars the sidebar
lists, and a directory of everyone the guest picker can find (look-alike names such as
"Priya Shah" and "Priya Sharma"). Every team member has seeded events from the week
before the current one to the week after the last week to search (other weeks are
empty). The instruction asks for a meeting of a given length with some attendees in
the *first* slot (earliest day, then earliest start, on the half hour) where the owner
and every attendee are free, on a weekday in a day range, between an earliest start
and a latest end. The generator makes that slot fall in the ``weeks``-th week: every
slot before it is blocked by someone's event.

Times are minutes after midnight; dates are ISO strings. Everything here is pure and
deterministic for a seed; the task, the scorer and the expert all score with
:func:`field_matches` (through :func:`evaluate` for a record).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import check_option_names, int_option

# The week view's hours and the working hours the instruction refers to.
DAY_START_MIN = 8 * 60
DAY_END_MIN = 18 * 60
WORK_START_MIN = 9 * 60
WORK_END_MIN = 17 * 60
STEP_MIN = 30
DURATIONS_MIN = (30, 60, 90)
EARLIEST_STARTS_MIN = (9 * 60, 9 * 60, 10 * 60, 10 * 60 + 30, 11 * 60, 13 * 60)
LATEST_ENDS_MIN = (17 * 60, 17 * 60, 16 * 60 + 30, 16 * 60)
FIELDS = ("title", "date", "start", "end", "attendees")
OWNER = "Alex Morgan"
TEAM_SIZE = 8
MAX_ATTENDEES = 4
DEFAULT_ATTENDEES = 2
MAX_BUSYNESS = 5
DEFAULT_BUSYNESS = 3
MAX_WEEKS = 3
DEFAULT_WEEKS = 2
MAX_DISTRACTORS = 3
DEFAULT_DISTRACTORS = 1
OPTION_NAMES = frozenset({"num_attendees", "busyness", "weeks", "distractors"})
# The first Monday an episode's "today" can fall in, and how many weeks after it.
FIRST_MONDAY = dt.date(2026, 1, 5)
NUM_START_WEEKS = 150

# Look-alike pairs first (the guest picker lists both for a typed prefix).
PEOPLE = (
    "Priya Shah", "Priya Sharma", "Tom Becker", "Tom Baker", "Sam Rivera", "Samantha Rivers",
    "Lena Fischer", "Lena Fisher", "Marco Rossi", "Mario Rossi", "Aisha Khan", "Aisha Karim",
    "Daniel Kim", "Daniela Kim", "Olivia Chen", "Jonas Weber", "Grace Okafor", "Hugo Martin",
    "Nina Petrova", "Ravi Patel", "Emma Laurent", "Felix Braun", "Yuki Tanaka", "Omar Haddad",
    "Zoe Clarke", "Lucas Silva",
)  # fmt: skip
BUSY_TITLES = (
    "Standup", "1:1", "Design review", "Customer call", "Sprint planning", "Focus time",
    "Lunch", "Interview", "Team sync", "Budget review", "Roadmap", "Hiring sync", "Training",
    "Dentist", "Project kickoff", "Retro", "Demo prep", "Vendor call", "Coffee chat",
    "Workshop", "Code review", "All hands",
)  # fmt: skip
MEETING_TITLES = (
    "Quarterly planning", "Launch review", "Pricing workshop", "Onboarding plan",
    "Security review", "Partner update", "Hiring debrief", "Budget check-in",
    "Roadmap review", "Customer feedback session", "Migration kickoff", "Release retro",
)  # fmt: skip


def email_of(name: str) -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{last.replace(' ', '')}@northwind.test"


def time_text(minutes: int) -> str:
    """``9:00``, ``13:30`` (24-hour, as the app writes times)."""
    return f"{minutes // 60}:{minutes % 60:02d}"


@dataclass(frozen=True)
class Options:
    """An episode's difficulty (reset options). See docs/tasks/calendar_booking.md.

    Attributes:
        num_attendees: people to invite besides the owner (1..4).
        busyness: mean events per person per weekday (1..5).
        weeks: the week (1 = the current one) that holds the first free slot (1..3).
        distractors: calendars of people not invited that are shown at the start, with an
            event over the answer slot (0..3).
    """

    num_attendees: int = DEFAULT_ATTENDEES
    busyness: int = DEFAULT_BUSYNESS
    weeks: int = DEFAULT_WEEKS
    distractors: int = DEFAULT_DISTRACTORS


def parse_options(options: Mapping[str, Any]) -> Options:
    """Checked reset options, defaults filled in.

    Raises:
        TaskOptionsError: an unknown option, or a value of the wrong type or range.
    """
    check_option_names(options, OPTION_NAMES)
    return Options(
        num_attendees=int_option(options, "num_attendees", DEFAULT_ATTENDEES, 1, MAX_ATTENDEES),
        busyness=int_option(options, "busyness", DEFAULT_BUSYNESS, 1, MAX_BUSYNESS),
        weeks=int_option(options, "weeks", DEFAULT_WEEKS, 1, MAX_WEEKS),
        distractors=int_option(options, "distractors", DEFAULT_DISTRACTORS, 0, MAX_DISTRACTORS),
    )


@dataclass(frozen=True)
class Booking:
    """A meeting: what the instruction asks for, or what the app recorded.

    ``attendees`` are people's names (the owner not among them), sorted.
    """

    title: str
    date: str
    start: int
    end: int
    attendees: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "attendees": list(self.attendees)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Booking:
        return cls(
            title=data["title"],
            date=data["date"],
            start=data["start"],
            end=data["end"],
            attendees=tuple(sorted(data["attendees"])),
        )


@dataclass(frozen=True)
class Calendar:
    """One episode's calendars and the booking it asks for.

    Attributes:
        today: the date the app opens on (its week is week 0).
        team: the sidebar's other calendars (attendees and distractors among them).
        directory: everyone the guest picker finds (the team, look-alikes, others).
        events: ``[{"person", "title", "date", "start", "end"}]`` over weeks -1..weeks.
        shown: the calendars checked at the start (the owner's and the distractors').
        range_start, range_end: the day range of the instruction (ISO dates).
        earliest, latest: the earliest start and latest end of the meeting each day.
        goal: the booking the instruction asks for (its slot is the first free one).
        distractors: the shown calendars of people not invited.
    """

    today: str
    team: tuple[str, ...]
    directory: tuple[str, ...]
    events: tuple[dict[str, Any], ...]
    shown: tuple[str, ...]
    range_start: str
    range_end: str
    earliest: int
    latest: int
    goal: Booking
    distractors: tuple[str, ...]

    @property
    def duration(self) -> int:
        return self.goal.end - self.goal.start


def monday(day: str | dt.date) -> dt.date:
    d = dt.date.fromisoformat(day) if isinstance(day, str) else day
    return d - dt.timedelta(days=d.weekday())


@dataclass
class Evaluation:
    """Created events scored against the goal.

    Attributes:
        matched: per field of :data:`FIELDS`, whether the best-matching created event
            has it right (all False without events).
        best: the id of that event, or None.
        num_extra: created events besides the best one.
    """

    matched: list[bool]
    best: int | None
    num_extra: int


def field_matches(goal: Booking, event: Mapping[str, Any]) -> list[bool]:
    """Per field, whether a created event has it as the goal wants (title: trimmed,
    case counts; attendees: the same set of people)."""
    return [
        str(event["title"]).strip() == goal.title,
        event["date"] == goal.date,
        event["start"] == goal.start,
        event["end"] == goal.end,
        tuple(sorted(event["attendees"])) == goal.attendees,
    ]


def evaluate(goal: Booking, created: Sequence[Mapping[str, Any]]) -> Evaluation:
    """Score the created events (``[{"id", "title", "date", "start", "end", "attendees"}]``)."""
    if not created:
        return Evaluation(matched=[False] * len(FIELDS), best=None, num_extra=0)
    scored = [(sum(m := field_matches(goal, e)), -i, m, e["id"]) for i, e in enumerate(created)]
    _count, _order, matched, best = max(scored, key=lambda s: (s[0], s[1]))
    return Evaluation(matched=matched, best=best, num_extra=len(created) - 1)


# -- slots ----------------------------------------------------------------------------


def busy(
    events: Sequence[Mapping[str, Any]], people: Sequence[str], date: str
) -> list[tuple[int, int]]:
    """The ``(start, end)`` of ``people``'s events on ``date``."""
    return [(e["start"], e["end"]) for e in events if e["date"] == date and e["person"] in people]


def free_slots(
    events_by_date: Mapping[str, Sequence[Mapping[str, Any]]],
    people: Sequence[str],
    days: Sequence[str],
    duration: int,
    earliest: int,
    latest: int,
) -> list[tuple[str, int]]:
    """Every ``(date, start)`` on the half hour where all ``people`` are free for
    ``duration`` minutes, starting at or after ``earliest`` and ending by ``latest``, in
    order (``events_by_date``: each date's events)."""
    out = []
    for day in days:
        taken = busy(events_by_date.get(day, ()), people, day)
        for start in range(earliest, latest - duration + 1, STEP_MIN):
            if all(end <= start or begin >= start + duration for begin, end in taken):
                out.append((day, start))
    return out


def weekdays(first: str, last: str) -> list[str]:
    start, stop = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    days = (start + dt.timedelta(days=i) for i in range((stop - start).days + 1))
    return [d.isoformat() for d in days if d.weekday() < 5]


# -- generation -----------------------------------------------------------------------


def generate_calendar(seed: int, opts: Options) -> Calendar:
    """The calendars and the booking for a seed; the same seed and options give the same."""
    rng = random.Random(seed)
    people = list(PEOPLE)
    rng.shuffle(people)
    attendees = people[: opts.num_attendees]
    distractors = people[opts.num_attendees : opts.num_attendees + opts.distractors]
    rest = [p for p in people if p not in attendees + distractors]
    team = attendees + distractors + rest[: TEAM_SIZE - len(attendees) - len(distractors)]
    rng.shuffle(team)
    participants = [OWNER, *attendees]

    week0 = FIRST_MONDAY + dt.timedelta(weeks=rng.randrange(NUM_START_WEEKS))
    today = week0 + dt.timedelta(days=rng.randrange(3))
    range_start = today + dt.timedelta(days=rng.randrange(2) if opts.weeks > 1 else 0)
    target_monday = week0 + dt.timedelta(weeks=opts.weeks - 1)
    range_end = target_monday + dt.timedelta(days=4)
    duration = rng.choice(DURATIONS_MIN)
    earliest, latest = rng.choice(EARLIEST_STARTS_MIN), rng.choice(LATEST_ENDS_MIN)
    if latest - earliest < duration + 2 * STEP_MIN:
        earliest = WORK_START_MIN

    all_days = weekdays(
        (week0 - dt.timedelta(weeks=1)).isoformat(),
        (target_monday + dt.timedelta(weeks=1, days=4)).isoformat(),
    )
    days_events = _busy_days(rng, [OWNER, *team], all_days, opts.busyness)
    days = weekdays(range_start.isoformat(), range_end.isoformat())
    day, start = _first_slot_in_week(
        rng, days_events, participants, days, target_monday, (duration, earliest, latest)
    )
    # Distractors look busy over the answer: reading their calendars as constraints
    # gives another slot.
    for person in distractors:
        taken = busy(days_events[day], [person], day)
        if all(end <= start or begin >= start + duration for begin, end in taken):
            _append(days_events[day], person, day, start, start + duration, rng)
    events = sorted(
        (e for day_events in days_events.values() for e in day_events),
        key=lambda e: (e["date"], e["start"], e["person"]),
    )
    directory = sorted(set(PEOPLE) | set(team))
    goal = Booking(
        title=rng.choice(MEETING_TITLES),
        date=day,
        start=start,
        end=start + duration,
        attendees=tuple(sorted(attendees)),
    )
    return Calendar(
        today=today.isoformat(),
        team=tuple(team),
        directory=tuple(directory),
        events=tuple(events),
        shown=(OWNER, *distractors),
        range_start=range_start.isoformat(),
        range_end=range_end.isoformat(),
        earliest=earliest,
        latest=latest,
        goal=goal,
        distractors=tuple(distractors),
    )


def _busy_days(
    rng: random.Random, people: Sequence[str], days: Sequence[str], busyness: int
) -> dict[str, list[dict[str, Any]]]:
    """Each person's seeded events, about ``busyness`` a day, by date."""
    days_events: dict[str, list[dict[str, Any]]] = {day: [] for day in days}
    for person in people:
        for day in days:
            for _ in range(max(0, round(rng.gauss(busyness, 1.0)))):
                _add_random_event(rng, days_events[day], person, day)
    return days_events


def _first_slot_in_week(
    rng: random.Random,
    days_events: dict[str, list[dict[str, Any]]],
    participants: Sequence[str],
    days: Sequence[str],
    target_monday: dt.date,
    slot_args: tuple[int, int, int],
) -> tuple[str, int]:
    """Make the first free slot of ``days`` fall in the week of ``target_monday`` (events
    added before it, removed in it if needed, in place); that slot."""
    early = [d for d in days if monday(d) < target_monday]
    late = [d for d in days if monday(d) == target_monday]
    duration, earliest, latest = slot_args
    # Every slot before the target week: someone taking part is busy then.
    while slots := free_slots(days_events, participants, early, *slot_args):
        day, start = rng.choice(slots)
        offset = rng.randrange(0, duration, STEP_MIN)
        length = min(rng.choice((30, 60)), duration - offset)
        person = rng.choice(participants)
        _append(days_events[day], person, day, start + offset, start + offset + length, rng)
    if not free_slots(days_events, participants, late, *slot_args):
        day = rng.choice(late)
        start = rng.randrange(earliest, latest - duration + 1, STEP_MIN)
        days_events[day] = [
            e
            for e in days_events[day]
            if not (
                e["person"] in participants and e["start"] < start + duration and e["end"] > start
            )
        ]
    return free_slots(days_events, participants, late, *slot_args)[0]


def _add_random_event(
    rng: random.Random, events: list[dict[str, Any]], person: str, day: str
) -> None:
    """One event at a random free time of ``person``'s day (none if 10 tries collide);
    ``events``: that day's."""
    for _ in range(10):
        length = rng.choice((30, 30, 60, 60, 90, 120))
        start = rng.randrange(DAY_START_MIN, DAY_END_MIN - length + 1, STEP_MIN)
        if all(
            end <= start or begin >= start + length for begin, end in busy(events, [person], day)
        ):
            _append(events, person, day, start, start + length, rng)
            return


def _append(
    events: list[dict[str, Any]], person: str, day: str, start: int, end: int, rng: random.Random
) -> None:
    events.append(
        {
            "person": person,
            "title": rng.choice(BUSY_TITLES),
            "date": day,
            "start": start,
            "end": end,
        }
    )
