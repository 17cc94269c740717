"""SimpleDataEntry: copy requested spreadsheet rows into a web form.

Rows are named to the agent by their sheet row numbers (the numbers in the left
margin): the header is row 1, data row ``i`` (0-based) is sheet row ``i + 2``.
Everything else (``options["rows"]``, ``/progress``) uses 0-based data row indices.

A submission matches a data row when all three fields equal that row's after
surrounding whitespace is trimmed (case and inner spaces count). A submission with an
empty field is refused by the form and not recorded.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uirl_gym.tasks.base import Task, TaskOptionsError, check_option_names, int_option
from uirl_gym.tasks.simple_data_entry.data import Person, generate_people

DEFAULT_NUM_DATA_ROWS = 100
DEFAULT_NUM_TARGET_ROWS = 1
MAX_TARGET_ROWS = 20
OPTION_NAMES = frozenset({"rows", "num_rows", "row_pool", "data_seed", "num_data_rows"})


def sheet_row_number(data_index: int) -> int:
    """The number shown in the sheet's margin for a 0-based data row."""
    return data_index + 2


@dataclass
class Submission:
    fields: tuple[str, str, str]
    row_index: int | None


@dataclass
class EpisodeState:
    people: list[Person]
    target_rows: list[int]
    data_seed: int
    submissions: list[Submission] = field(default_factory=list)


def _num_data_rows(options: Mapping[str, Any]) -> int:
    return int_option(options, "num_data_rows", DEFAULT_NUM_DATA_ROWS, 1, 1000)


def check_options(options: Mapping[str, Any]) -> None:
    """The checks :meth:`SimpleDataEntryTask.reset` makes, without making the episode.

    Raises:
        TaskOptionsError: an unknown option or a bad value.
    """
    check_option_names(options, OPTION_NAMES)
    int_option(options, "data_seed", 0, 0, 2**63)
    SimpleDataEntryTask._pick_targets(random.Random(0), options, _num_data_rows(options))


class SimpleDataEntryTask(Task):
    """The task's episode state and record. See the module docstring for the rules."""

    name = "simple_data_entry"
    # Upstream (ui-verifiers) clients read the first two: they stay open.
    public_progress_keys = frozenset(
        {"submitted_row_indices", "num_incorrect_submissions", "episode", "num_submissions"}
    )

    def __init__(self) -> None:
        self.state: EpisodeState | None = None

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        check_option_names(options, OPTION_NAMES)
        rng = random.Random(seed)
        data_seed = int_option(options, "data_seed", rng.randrange(2**31), 0, 2**63)
        num_data_rows = _num_data_rows(options)
        people = generate_people(data_seed, num_data_rows)
        targets = self._pick_targets(rng, options, num_data_rows)
        self.episode_id += 1
        self.state = EpisodeState(people=people, target_rows=targets, data_seed=data_seed)
        return {
            "instruction": self.instruction(),
            "app_state": {
                "episode": self.episode_id,
                "rows": [p.as_tuple() for p in people],
            },
        }

    @staticmethod
    def _pick_targets(
        rng: random.Random, options: Mapping[str, Any], num_data_rows: int
    ) -> list[int]:
        if "rows" in options:
            rows = options["rows"]
            if (
                not isinstance(rows, list | tuple)
                or not rows
                or not all(isinstance(r, int) and not isinstance(r, bool) for r in rows)
            ):
                raise TaskOptionsError(f"rows: must be a non-empty list of integers, got {rows!r}")
            if len(set(rows)) != len(rows):
                raise TaskOptionsError(f"rows: must not repeat a row, got {rows}")
            if len(rows) > MAX_TARGET_ROWS:
                raise TaskOptionsError(
                    f"rows: at most {MAX_TARGET_ROWS} target rows, got {len(rows)}; pass "
                    "fewer rows and spread the rest over more episodes"
                )
            bad = [r for r in rows if not 0 <= r < num_data_rows]
            if bad:
                raise TaskOptionsError(
                    f"rows: {bad} out of range; data rows are 0..{num_data_rows - 1} (0-based)"
                )
            if "row_pool" in options:
                raise TaskOptionsError("rows and row_pool are both given: give one (or neither)")
            if "num_rows" in options and options["num_rows"] != len(rows):
                raise TaskOptionsError("num_rows: must equal len(rows) when both are given")
            return list(rows)
        k = int_option(
            options, "num_rows", DEFAULT_NUM_TARGET_ROWS, 1, min(MAX_TARGET_ROWS, num_data_rows)
        )
        if "row_pool" not in options:
            return rng.sample(range(num_data_rows), k)
        pool = options["row_pool"]
        if not isinstance(pool, list | tuple) or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r < num_data_rows for r in pool
        ):
            raise TaskOptionsError(
                f"row_pool: must be a list of data rows in 0..{num_data_rows - 1}, got {pool!r}"
            )
        if len(set(pool)) < k:
            raise TaskOptionsError(
                f"row_pool: {len(set(pool))} distinct rows, fewer than num_rows = {k}: add "
                "rows to the pool or lower num_rows"
            )
        return sorted(rng.sample(sorted(set(pool)), k))

    def instruction(self) -> str:
        assert self.state is not None
        numbers = [sheet_row_number(i) for i in self.state.target_rows]
        if len(numbers) == 1:
            which = f"row {numbers[0]}"
        else:
            which = "rows " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"
        return (
            f"Copy the person in spreadsheet {which} (row numbers as shown in the sheet's "
            "left margin) into the form on the right: First name, Last name and Email, "
            "exactly as in the sheet. Submit the form once per row."
        )

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.state is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        if event.get("type") != "submit":
            raise ValueError(f"unknown event type {event.get('type')!r}")
        values = event.get("fields")
        if not isinstance(values, list) or len(values) != 3:
            raise ValueError("fields: expected [first_name, last_name, email]")
        first, last, email = (str(v).strip() for v in values)
        fields = (first, last, email)
        row_index = next(
            (i for i, p in enumerate(self.state.people) if p.as_tuple() == fields), None
        )
        self.state.submissions.append(Submission(fields=fields, row_index=row_index))
        return {"recorded": True, "row_index": row_index}

    def progress(self) -> dict[str, Any]:
        if self.state is None:
            return {"submitted_row_indices": [], "num_incorrect_submissions": 0}
        subs = self.state.submissions
        return {
            "submitted_row_indices": [s.row_index for s in subs if s.row_index is not None],
            "num_incorrect_submissions": sum(s.row_index is None for s in subs),
            "episode": self.episode_id,
            "target_rows": list(self.state.target_rows),
            "num_submissions": len(subs),
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.state is not None
        return {
            "episode": self.episode_id,
            "data_seed": self.state.data_seed,
            "target_rows": list(self.state.target_rows),
            "target_values": [
                list(self.state.people[i].as_tuple()) for i in self.state.target_rows
            ],
            "submissions": [
                {"fields": list(s.fields), "row_index": s.row_index} for s in self.state.submissions
            ],
            **page_state,
        }
