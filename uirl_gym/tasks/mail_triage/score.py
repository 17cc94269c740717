"""MailTriage's rewards and success, from its record (docs/tasks/mail_triage.md).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (the page's mailbox, the open reply box) for dense shaping.

The score of a record is ``correct_goal`` per goal met (a message in its folder, a
flag, a message marked as unread, the reply sent) minus ``stray_change`` per other
change (a message moved where it should not be, a flag changed, a reply nobody asked
for). The sparse reward of a step is the change of that score, so moving a message
back refunds its charge. Success: every goal met and no stray change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import GoalsScorer
from uirl_gym.tasks.mail_triage.data import Mailbox, evaluate, normalise_text, parse_options


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays.

    Attributes:
        correct_goal: paid per goal (move, flag, mark as unread, reply) the record meets.
        stray_change: charged per change nobody asked for, while it stays (a reply sent
            stays for good).
        invalid_action: charged per action the env or the server refuses.
        dense_goal: dense mode, the potential per goal the page's mailbox meets.
        dense_pending: dense mode, the potential of an open reply to the right message
            that holds the asked text (not sent yet).
    """

    correct_goal: float = 1.0
    stray_change: float = 0.5
    invalid_action: float = 0.1
    dense_goal: float = 0.1
    dense_pending: float = 0.05


class MailTriageScorer(GoalsScorer):
    """One episode's score: the goals the record meets and its stray changes."""

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """Goals the page's mailbox meets, and an unsent reply that holds the asked text."""
        box = Mailbox.from_json(oracle["goal"])
        ev = evaluate(box, oracle["mailbox"], oracle["sent"])
        compose = oracle["compose"]
        pending = sum(
            compose is not None
            and compose["message_id"] == g.message_id
            and normalise_text(compose["text"]) == g.text
            for g, met in zip(box.goals, ev.met, strict=True)
            if g.kind == "reply" and not met
        )
        return self.rewards.dense_goal * sum(ev.met) + self.rewards.dense_pending * pending


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse invalid reset options before any round trip (the task's own checks).

    Raises:
        ValueError: (a ``TaskOptionsError``) an unknown option or a bad value.
    """
    parse_options(options)
