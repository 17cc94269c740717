"""CalendarBooking: the seeded calendars and their goal, scoring, episodes on real Chromium."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
from task_play import play

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks.base import TaskOptionsError
from uirl_gym.tasks.calendar_booking.data import (
    OWNER,
    Options,
    evaluate,
    free_slots,
    generate_calendar,
    monday,
    weekdays,
)
from uirl_gym.tasks.calendar_booking.expert import CalendarBookingExpert
from uirl_gym.tasks.calendar_booking.score import CalendarBookingScorer, RewardConfig
from uirl_gym.tasks.calendar_booking.task import CalendarBookingTask
from uirl_gym.tasks.expert import click

ENV_ID = "uirl/CalendarBooking-v0"


def booking_event(goal: Any, event_id: int, **changes: Any) -> dict[str, Any]:
    """The goal as the app records it, with ``changes``."""
    return {"id": event_id, **goal.to_json(), **changes}


# -- without a browser ----------------------------------------------------------------


def test_goal_is_the_first_slot_where_everyone_is_free_in_the_asked_week() -> None:
    assert generate_calendar(5, Options()) == generate_calendar(5, Options())
    assert generate_calendar(5, Options()) != generate_calendar(6, Options())
    durations: Counter[int] = Counter()
    for seed in range(60):
        opts = Options(
            num_attendees=1 + seed % 4, busyness=1 + seed % 5, weeks=1 + seed % 3,
            distractors=seed % 4,
        )  # fmt: skip
        cal = generate_calendar(seed, opts)
        goal = cal.goal
        assert len(goal.attendees) == opts.num_attendees and OWNER not in goal.attendees
        assert set(goal.attendees) <= set(cal.team) and len(cal.distractors) == opts.distractors
        assert cal.shown == (OWNER, *cal.distractors)
        # The answer lies in the weeks-th week, inside the range and the hours.
        weeks_ahead = (monday(goal.date) - monday(cal.today)).days // 7
        assert weeks_ahead == opts.weeks - 1
        assert cal.range_start <= goal.date <= cal.range_end and cal.today <= cal.range_start
        assert cal.earliest <= goal.start and goal.end <= cal.latest
        days = weekdays(cal.range_start, cal.range_end)
        events: dict[str, list] = defaultdict(list)
        for e in cal.events:
            events[e["date"]].append(e)
        args = (cal.duration, cal.earliest, cal.latest)
        assert free_slots(events, [OWNER, *goal.attendees], days, *args)[0] == (
            goal.date,
            goal.start,
        )
        # Reading the distractors' calendars as constraints gives another slot.
        if cal.distractors:
            everyone = [OWNER, *goal.attendees, *cal.distractors]
            assert free_slots(events, everyone, days, *args)[:1] != [(goal.date, goal.start)]
        durations[cal.duration] += 1
    assert set(durations) == {30, 60, 90}


def test_evaluate_scores_the_best_event_by_field_and_counts_the_others() -> None:
    goal = generate_calendar(1, Options()).goal
    assert evaluate(goal, []).matched == [False] * 5
    late = booking_event(goal, 1, start=goal.start + 30, end=goal.end + 30)
    guests = booking_event(goal, 2, attendees=[goal.attendees[0]], title=f" {goal.title} ")
    assert evaluate(goal, [late]).matched == [True, True, False, False, True]
    ev = evaluate(goal, [late, guests])
    assert (ev.best, ev.matched, ev.num_extra) == (2, [True, True, True, True, False], 1)
    # A tie goes to the event created first.
    ev = evaluate(goal, [late, guests, booking_event(goal, 3, title=goal.title.lower())])
    assert (ev.best, ev.matched, ev.num_extra) == (2, [True, True, True, True, False], 2)


def test_task_records_created_and_deleted_events_and_the_scorer_pays_them() -> None:
    task = CalendarBookingTask()
    started = task.reset(3, {"num_attendees": 2})
    assert started["instruction"].startswith("In the Calendar app, book a ")
    assert (
        started["instruction"]
        == CalendarBookingTask().reset(3, {"num_attendees": 2})["instruction"]
    )
    goal, episode = task.calendar.goal, task.episode_id
    for word in (goal.title, *goal.attendees):
        assert word in started["instruction"]
    scorer = CalendarBookingScorer(task.progress(), RewardConfig())
    assert scorer.reset_info() == {"fields": ["title", "date", "start", "end", "attendees"]}

    def record(event: dict[str, Any]) -> float:
        task.handle_event({"episode": episode, **event})
        return scorer.reward(task.progress())

    wrong_title = booking_event(goal, 1, title="Lunch")
    assert record({"type": "create", "event": wrong_title}) == pytest.approx(0.8)
    assert not scorer.done
    assert record({"type": "create", "event": booking_event(goal, 2)}) == pytest.approx(0.2 - 0.5)
    assert scorer.done and scorer.status() == {
        "is_success": False,
        "num_matched": 5,
        "num_extra": 1,
    }
    assert record({"type": "delete", "id": 1}) == pytest.approx(0.5)
    assert scorer.status()["is_success"] is True
    # Malformed and stale events change nothing.
    bad = [
        ({"type": "create", "event": booking_event(goal, 2)}, "id: 2 is taken"),
        ({"type": "create", "event": booking_event(goal, 3, end=goal.start)}, "start, end:"),
        ({"type": "create", "event": booking_event(goal, 3, attendees=[OWNER])}, "attendees:"),
        ({"type": "create", "event": booking_event(goal, 3, date="Monday")}, "date: expected"),
        ({"type": "delete", "id": 7}, "delete: no created event with id 7"),
        ({"type": "edit"}, "unknown event type 'edit'"),
    ]
    for event, message in bad:
        with pytest.raises(ValueError, match=re.escape(message)):
            task.handle_event({"episode": episode, **event})
    assert (
        task.handle_event({"type": "delete", "episode": episode - 1, "id": 2})["recorded"] is False
    )
    assert task.progress()["num_events"] == 1 and task.progress()["matched"] == [True] * 5


def test_potential_counts_the_dialog_the_shown_calendars_and_the_week() -> None:
    task = CalendarBookingTask()
    task.reset(0, {"num_attendees": 2, "weeks": 2})
    goal = task.calendar.goal
    scorer = CalendarBookingScorer(task.progress(), RewardConfig())
    page = {
        "dialog": None,
        "shown": [OWNER],
        "week_dates": [monday(task.calendar.today).isoformat()],
    }
    assert scorer.potential(task.oracle(page)) == 0.0
    draft = {**goal.to_json(), "title": "", "attendees": []}
    page = {
        "dialog": draft,
        "shown": [goal.attendees[0]],
        "week_dates": [monday(goal.date).isoformat()],
    }
    assert scorer.potential(task.oracle(page)) == pytest.approx(3 * 0.02 + 0.01 + 0.05)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"attendees": 2},
            "unknown option(s) ['attendees']; allowed: ['busyness', 'distractors', ",
        ),
        ({"num_attendees": 0}, "num_attendees: must be an integer in 1..4, got 0"),
        ({"busyness": 6}, "busyness: must be an integer in 1..5, got 6"),
        ({"weeks": "2"}, "weeks: must be an integer in 1..3, got '2'"),
        ({"distractors": True}, "distractors: must be an integer in 0..3, got True"),
    ],
    ids=["unknown", "attendees", "busyness", "weeks", "distractors"],
)
def test_options_errors_are_clear(options: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskOptionsError, match=re.escape(message)):
        CalendarBookingTask().reset(0, options)


# -- on real Chromium -----------------------------------------------------------------


def make_env(runtime: LocalRuntime, reward_mode: str = "sparse") -> gym.Env:
    # JPEG frames: the tests read the oracle, not pixels, and JPEG is the cheapest capture.
    # Sparse rewards unless a test checks the shaping: dense asks /oracle every step.
    return gym.make(ENV_ID, runtime=runtime, image_format="jpeg", reward_mode=reward_mode)


@pytest.fixture(scope="module")
def env(task_runtime: LocalRuntime) -> Iterator[gym.Env]:
    e = make_env(task_runtime)
    try:
        yield e
    finally:
        e.close()


def _expert_episodes(env: gym.Env, seeds: range) -> list[int]:
    """The expert on each seed, options varied by seed; the steps each took."""
    steps = []
    for seed in seeds:
        options = {
            "split": "test",
            "num_attendees": 1 + seed % 4,
            "weeks": 1 + seed % 3,
            "busyness": 2 + seed % 4,
            "distractors": seed % 4,
        }
        env.reset(seed=seed, options=options)
        total, info, actions = play(env, CalendarBookingExpert())
        assert info["is_success"], (seed, info)
        assert total == pytest.approx(1.0), (seed, total)  # five right fields, nothing extra
        steps.append(len(actions))
    return steps


@pytest.mark.slow  # about 300 steps, on two sessions at once
def test_expert_solves_20_test_split_episodes(env: gym.Env, task_runtime: LocalRuntime) -> None:
    # Two sessions play ten episodes each: a step is a serial round trip (client,
    # server, Chromium), so a second session uses the second core.
    other = make_env(task_runtime)
    try:
        with ThreadPoolExecutor(2) as pool:
            halves = pool.map(_expert_episodes, (env, other), (range(0, 20, 2), range(1, 20, 2)))
            steps = sum(halves, [])
    finally:
        other.close()
    assert len(steps) == 20 and max(steps) < 40


def test_dialog_pickers_and_guest_autocomplete(env: gym.Env) -> None:
    """From Create (today, 9:00): look-alike names are suggested together, Enter takes the
    first; the expert then removes that guest (not asked), steps the date picker into
    the next month, scrolls the start list to the afternoon and picks the asked guest."""
    env.reset(seed=5, options={"split": "test", "weeks": 3, "num_attendees": 1})
    o = env.unwrapped.oracle()
    goal = o["goal"]
    # (This seed's booking: next month, 13:00 or later, not with a Priya.)
    assert goal["date"][:7] > o["today"][:7] and goal["start"] >= 13 * 60
    env.step(click(o["create_button"]))
    o = env.unwrapped.oracle()
    assert o["dialog"]["date"] == o["today"] and o["dialog"]["start"] == 9 * 60
    assert o["focused"] == "title"
    env.step(click(o["controls"]["guest"]))
    env.step(Action(ActionType.TYPE, text="Priya"))
    o = env.unwrapped.oracle()
    assert o["dialog"]["popup"] == "guests"
    assert set(o["suggestions"]) == {"Priya Shah", "Priya Sharma"}
    env.step(Action(ActionType.KEYS, keys="Enter"))
    o = env.unwrapped.oracle()
    assert o["dialog"]["attendees"] == ["Priya Shah"] and o["dialog"]["query"] == ""
    _total, info, actions = play(env, CalendarBookingExpert())
    assert info["is_success"], info
    kinds = Counter(a.type for a in actions)
    assert kinds[ActionType.SCROLL] >= 1 and kinds[ActionType.TYPE] == 2  # title, guest
    assert info["progress"]["events"][0]["date"] == goal["date"]


@pytest.fixture
def dense_env(task_runtime: LocalRuntime) -> Iterator[gym.Env]:
    e = make_env(task_runtime, reward_mode="dense")
    try:
        yield e
    finally:
        e.close()


def test_extra_events_are_charged_and_the_expert_deletes_them(dense_env: gym.Env) -> None:
    """Two wrong events made through the dialog (a slot click, a title, Enter saves; then
    Create) with dense rewards. The expert deletes them through their details and books."""
    env = dense_env
    options = {"split": "test", "weeks": 1, "num_attendees": 1, "distractors": 0}
    env.reset(seed=1, options=options)
    o = env.unwrapped.oracle()
    goal = o["goal"]
    # The asked slot's cell (only the owner's calendar is shown): a prefilled dialog.
    column = o["columns"][o["week_dates"].index(goal["date"])]
    top = o["grid"]["top"] + (goal["start"] - 8 * 60) * 32 // 30
    env.step(click([column[0], top, column[2], 32]))
    o = env.unwrapped.oracle()
    assert o["dialog"]["date"] == goal["date"] and o["dialog"]["start"] == goal["start"]
    assert o["dialog"]["end"] == goal["start"] + 60 and o["focused"] == "title"
    env.step(Action(ActionType.TYPE, text="Lunch"))
    _obs, reward, terminated, _trunc, info = env.step(Action(ActionType.KEYS, keys="Enter"))
    matched = sum(info["progress"]["matched"])
    assert info["progress"]["num_events"] == 1 and not terminated and 2 <= matched <= 3
    # Paid per right field; the dialog's potential for the same fields is gone.
    assert reward == pytest.approx((0.2 - 0.02) * matched)
    o = env.unwrapped.oracle()
    assert o["dialog"] is None and list(o["own_events"]) == ["1"]
    # A second event from Create, saved empty: the app asks for a title first.
    env.step(click(o["create_button"]))
    o = env.unwrapped.oracle()
    env.step(click(o["controls"]["save"]))
    o = env.unwrapped.oracle()
    assert o["dialog"]["error"] == "Add a title" and o["created"][1:] == []
    env.step(Action(ActionType.TYPE, text="Gym"))
    _obs, reward, *_rest, info = env.step(Action(ActionType.KEYS, keys="Enter"))
    assert info["num_extra"] == 1 and info["num_matched"] == matched
    assert reward == pytest.approx(-0.5 - 0.02 * sum(info["progress"]["matched"]), abs=0.1)
    total, info, _actions = play(env, CalendarBookingExpert())
    assert info["is_success"] and info["progress"]["num_events"] == 1
    # The extra charge refunded, the wrong fields paid; the attendee's calendar shown.
    assert total == pytest.approx(0.5 + 1.0 - 0.2 * matched + 0.01)
