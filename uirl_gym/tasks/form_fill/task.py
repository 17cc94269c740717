"""FormFill: fill an insurance claim form from the policyholder's letter, then submit.

The letter (left) holds the values in its own wording; the form (right) has text
inputs, a custom dropdown (claim type), a calendar date picker (typing
``MM/DD/YYYY`` also works), radio buttons (preferred contact) and checkboxes
(documents enclosed).

The record:
- a *submission* is recorded with its field values and whether each matches the
  target (:func:`~uirl_gym.tasks.form_fill.data.field_matches`); it is correct when
  every field matches;
- with ``validation`` on (the default) the form refuses a submission with an empty
  required field, a phone not in ``NNN-NNN-NNNN`` format, a malformed email or an
  unreadable date: it shows the errors and records a *refusal* (counted, never
  charged), not a submission. With ``validation`` off every submission is recorded.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uirl_gym.tasks.base import Task, TaskOptionsError, check_option_names, int_option
from uirl_gym.tasks.form_fill.data import (
    ATTACHMENTS,
    CLAIM_TYPES,
    CONTACT_METHODS,
    FIELD_IDS,
    FIELD_LABELS,
    Claim,
    field_matches,
    generate_claim,
)

DEFAULT_NUM_FIELDS = len(FIELD_IDS)
MIN_NUM_FIELDS = 3
DEFAULT_DISTRACTORS = 2
MAX_DISTRACTORS = 4
OPTION_NAMES = frozenset({"num_fields", "distractors", "validation"})


@dataclass(frozen=True)
class FormFillOptions:
    """Difficulty (reset options). See docs/tasks/form_fill.md.

    Attributes:
        num_fields: how many of the form's fields are shown and asked for (3..8).
        distractors: decoy sentences in the letter (0..4).
        validation: whether the form checks formats and refuses bad submissions.
    """

    num_fields: int = DEFAULT_NUM_FIELDS
    distractors: int = DEFAULT_DISTRACTORS
    validation: bool = True


def parse_options(options: Mapping[str, Any]) -> FormFillOptions:
    """Check reset options and fill in defaults.

    Raises:
        TaskOptionsError: an unknown option, or a value of the wrong type or range.
    """
    check_option_names(options, OPTION_NAMES)
    num_fields = int_option(options, "num_fields", DEFAULT_NUM_FIELDS, MIN_NUM_FIELDS, 8)
    distractors = int_option(options, "distractors", DEFAULT_DISTRACTORS, 0, MAX_DISTRACTORS)
    validation = options.get("validation", True)
    if not isinstance(validation, bool):
        raise TaskOptionsError(f"validation: must be true or false, got {validation!r}")
    return FormFillOptions(num_fields=num_fields, distractors=distractors, validation=validation)


@dataclass
class Submission:
    values: dict[str, Any]
    matches: dict[str, bool]

    @property
    def correct(self) -> bool:
        return all(self.matches.values())


@dataclass
class EpisodeState:
    claim: Claim
    fields: list[str]
    options: FormFillOptions
    submissions: list[Submission] = field(default_factory=list)
    num_refused: int = 0

    @property
    def targets(self) -> dict[str, Any]:
        return {f: self.claim.targets[f] for f in self.fields}


class FormFillTask(Task):
    """The task's episode state and record. See the module docstring for the rules."""

    name = "form_fill"
    public_progress_keys = frozenset({"episode", "num_submissions", "num_refused_submissions"})

    def __init__(self) -> None:
        self.state: EpisodeState | None = None

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        rng = random.Random(seed)
        claim = generate_claim(rng.randrange(2**63), opts.distractors)
        chosen = set(rng.sample(FIELD_IDS, opts.num_fields))
        fields = [f for f in FIELD_IDS if f in chosen]
        self.episode_id += 1
        self.state = EpisodeState(claim=claim, fields=fields, options=opts)
        return {
            "instruction": self.instruction(),
            "app_state": {
                "episode": self.episode_id,
                "letter": claim.letter,
                "fields": fields,
                "labels": FIELD_LABELS,
                "claim_types": list(CLAIM_TYPES),
                "contact_methods": list(CONTACT_METHODS),
                "attachments": list(ATTACHMENTS),
                "today": claim.letter_date.isoformat(),
                "validation": opts.validation,
            },
        }

    def instruction(self) -> str:
        assert self.state is not None
        fields = self.state.fields
        parts = [
            "Fill in the insurance claim form on the right with the policyholder's details "
            "from the letter on the left, then submit it."
        ]
        if "phone" in fields:
            parts.append("Enter the phone number as NNN-NNN-NNNN (e.g. 555-123-4567).")
        if "incident_date" in fields:
            parts.append("Pick the date of the incident in the calendar or type it as MM/DD/YYYY.")
        if "attachments" in fields:
            parts.append("Tick exactly the documents the letter says are enclosed.")
        return " ".join(parts)

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.state is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        kind = event.get("type")
        if kind == "refused":
            self.state.num_refused += 1
            return {"recorded": True}
        if kind != "submit":
            raise ValueError(f"unknown event type {kind!r}; expected 'submit' or 'refused'")
        values = event.get("values")
        if not isinstance(values, Mapping) or set(values) != set(self.state.fields):
            raise ValueError(f"values: expected an object with keys {self.state.fields}")
        targets = self.state.targets
        matches = {f: field_matches(f, values[f], targets[f]) for f in self.state.fields}
        submission = Submission(values=dict(values), matches=matches)
        self.state.submissions.append(submission)
        return {"recorded": True, "correct": submission.correct}

    def progress(self) -> dict[str, Any]:
        if self.state is None:
            return {
                "num_correct_submissions": 0,
                "num_incorrect_submissions": 0,
                "num_refused_submissions": 0,
                "fields": [],
            }
        subs = self.state.submissions
        return {
            "num_correct_submissions": sum(s.correct for s in subs),
            "num_incorrect_submissions": sum(not s.correct for s in subs),
            "num_refused_submissions": self.state.num_refused,
            "num_submissions": len(subs),
            "episode": self.episode_id,
            "fields": list(self.state.fields),
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.state is not None
        return {
            "episode": self.episode_id,
            "fields": list(self.state.fields),
            "targets": self.state.targets,
            "today": self.state.claim.letter_date.isoformat(),
            "validation": self.state.options.validation,
            "submissions": [
                {"values": s.values, "matches": s.matches, "correct": s.correct}
                for s in self.state.submissions
            ],
            **page_state,
        }
