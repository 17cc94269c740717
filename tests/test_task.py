"""The SimpleDataEntry task's data and record, without a browser."""

from __future__ import annotations

import itertools
import re

import pytest

from uirl_gym.tasks import TASKS, make_task
from uirl_gym.tasks.base import TaskOptionsError
from uirl_gym.tasks.simple_data_entry.data import generate_people
from uirl_gym.tasks.simple_data_entry.task import SimpleDataEntryTask


def test_data_is_deterministic_and_full_of_near_duplicates() -> None:
    people = generate_people(7)
    assert people == generate_people(7) and people != generate_people(8)
    assert len(people) == 100 and len({p.as_tuple() for p in people}) == 100
    same_first = sum(
        a.first_name == b.first_name and a.last_name != b.last_name
        for a, b in itertools.combinations(people, 2)
    )
    one_digit_apart = sum(
        len(a.email) == len(b.email)
        and sum(x != y for x, y in zip(a.email, b.email, strict=True)) == 1
        and any(c.isdigit() for c in a.email)
        for a, b in itertools.combinations(people, 2)
    )
    assert same_first >= 10 and one_digit_apart >= 2


def test_reset_options_and_instruction() -> None:
    task = SimpleDataEntryTask()
    a = task.reset(3, {"num_rows": 3})
    b = SimpleDataEntryTask().reset(3, {"num_rows": 3})
    assert a["instruction"] == b["instruction"] and a["app_state"]["rows"] == b["app_state"]["rows"]
    task.reset(0, {"rows": [0, 98]})
    assert "rows 2 and 100" in task.instruction()
    assert task.progress()["target_rows"] == [0, 98]
    for options, message in [
        ({"rows": [0, 0]}, "must not repeat"),
        ({"rows": [100]}, "out of range"),
        ({"rows": []}, "non-empty"),
        ({"num_rows": 21}, "num_rows"),
        ({"rows": list(range(21))}, "at most 20 target rows"),
        ({"num_data_rows": 0}, "num_data_rows"),
        ({"rows": [1], "num_rows": 2}, "must equal"),
        ({"row": [1]}, "unknown option"),
    ]:
        with pytest.raises(TaskOptionsError, match=message):
            task.reset(0, options)


def test_submissions_are_matched_exactly_after_trimming() -> None:
    task = SimpleDataEntryTask()
    episode = task.reset(1, {"rows": [4]})["app_state"]["episode"]
    first, last, email = task.state.people[4].as_tuple()
    event = {"type": "submit", "episode": episode}
    assert (
        task.handle_event({**event, "fields": [f" {first}", last, f"{email} "]})["row_index"] == 4
    )
    assert task.handle_event({**event, "fields": [first.lower(), last, email]})["row_index"] is None
    assert task.handle_event({**event, "fields": [first, last, email]})["row_index"] == 4
    # An event from an earlier episode is ignored.
    assert (
        task.handle_event({**event, "episode": episode - 1, "fields": [first, last, email]})[
            "recorded"
        ]
        is False
    )
    progress = task.progress()
    assert progress["submitted_row_indices"] == [4, 4]
    assert progress["num_incorrect_submissions"] == 1
    with pytest.raises(ValueError, match="fields"):
        task.handle_event({**event, "fields": ["only one"]})


def test_unknown_task_suggests_a_name() -> None:
    with pytest.raises(ValueError, match="Did you mean 'simple_data_entry'"):
        make_task("simple_data_entri")


def test_row_pool_draws_the_target_rows_from_the_pool() -> None:
    """What the trainers' env.row_pool did, as a task option (drawn from the seed)."""
    task = SimpleDataEntryTask()
    pool = {"row_pool": [3, 5, 7], "num_rows": 2}

    def targets(seed: int) -> tuple[int, ...]:
        task.reset(seed, pool)
        return tuple(task.progress()["target_rows"])

    drawn = {targets(seed) for seed in range(20)}
    assert drawn <= {(3, 5), (3, 7), (5, 7)} and len(drawn) > 1
    assert targets(4) == targets(4)
    for options, message in [
        ({"row_pool": [1, 2], "rows": [1]}, "rows and row_pool are both given"),
        ({"row_pool": [1], "num_rows": 2}, "1 distinct rows, fewer than num_rows = 2"),
        ({"row_pool": [100]}, "row_pool: must be a list of data rows in 0..99"),
    ]:
        with pytest.raises(TaskOptionsError, match=re.escape(message)):
            task.reset(0, options)
        with pytest.raises(ValueError, match=re.escape(message)):
            TASKS["simple_data_entry"].check_options(options)  # the env's check, the same
