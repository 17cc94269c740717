"""CalendarBooking's rewards and success, from its record (docs/tasks/calendar_booking.md).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (the open dialog, the shown calendars and week) for dense shaping.

The score of a record is ``correct_field`` per field (title, date, start, end,
attendees) the best-matching created event has right, minus ``extra_event`` per other
created event. The sparse reward of a step is the change of that score, so deleting an
extra event refunds its charge. The episode terminates when one event has every field
right; success needs, in addition, no other created event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import RecordScoreScorer
from uirl_gym.tasks.calendar_booking.data import Booking, field_matches, monday, parse_options


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays.

    Attributes:
        correct_field: paid per field the best-matching created event has right (five
            fields: a right booking earns 1.0).
        extra_event: charged per created event besides the best-matching one, while it
            exists.
        invalid_action: charged per action the env or the server refuses.
        dense_draft: dense mode, the potential per field the open "New event" dialog
            has right (not saved yet).
        dense_calendar: dense mode, the potential per attendee whose calendar is shown.
        dense_week: dense mode, the potential of showing the week of the asked slot.
    """

    correct_field: float = 0.2
    extra_event: float = 0.5
    invalid_action: float = 0.1
    dense_draft: float = 0.02
    dense_calendar: float = 0.01
    dense_week: float = 0.05


class CalendarBookingScorer(RecordScoreScorer):
    """One episode's score: the best created event's right fields and the extra events."""

    def __init__(self, progress: Mapping[str, Any], rewards: RewardConfig) -> None:
        self.fields: list[str] = list(progress["fields"])
        self.num_matched = 0
        self.num_extra = 0
        super().__init__(progress, rewards)

    def read(self, progress: Mapping[str, Any]) -> None:
        self.num_matched = sum(progress["matched"])
        self.num_extra = progress["num_extra"]

    def score(self) -> float:
        return (
            self.rewards.correct_field * self.num_matched
            - self.rewards.extra_event * self.num_extra
        )

    def reset_info(self) -> dict[str, Any]:
        return {"fields": list(self.fields)}

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """Right fields of the open dialog, attendees' calendars shown, the asked week."""
        goal = Booking.from_json(oracle["goal"])
        draft = oracle["dialog"]
        right_draft = sum(field_matches(goal, draft)) if draft is not None else 0
        shown = sum(name in oracle["shown"] for name in goal.attendees)
        week = oracle["week_dates"][0] == monday(goal.date).isoformat()
        return (
            self.rewards.dense_draft * right_draft
            + self.rewards.dense_calendar * shown
            + self.rewards.dense_week * week
        )

    @property
    def done(self) -> bool:
        return self.num_matched == len(self.fields)

    def status(self) -> dict[str, Any]:
        return {
            "is_success": self.done and self.num_extra == 0,
            "num_matched": self.num_matched,
            "num_extra": self.num_extra,
        }


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse invalid reset options before any round trip (the task's own checks).

    Raises:
        ValueError: (a ``TaskOptionsError``) an unknown option or a bad value.
    """
    parse_options(options)
