"""ShopCheckout's rewards and success, from its record (docs/tasks/shop_checkout.md).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (the page's cart and checkout form) for dense shaping.

Nothing is paid before an order is placed. The first placed order scores
``correct_line`` per asked line it holds at the asked quantity, ``correct_field`` per
form field (address, delivery, payment) with the asked value, minus ``stray_line`` per
product in it that nobody asked for; placing it ends the episode. Success: an exact
order (every line and field right, nothing else in it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import RecordScoreScorer
from uirl_gym.tasks.shop_checkout.data import ShopGoal, evaluate_order, parse_options


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays.

    Attributes:
        correct_line: paid per asked line the placed order holds at the asked quantity.
        correct_field: paid per form field (full name, street, city, postcode,
            delivery, payment) the placed order has right.
        stray_line: charged per product in the placed order that nobody asked for.
        invalid_action: charged per action the env or the server refuses.
        dense_line: dense mode, the potential per asked line the cart holds at the
            asked quantity, minus as much per product in the cart nobody asked for.
        dense_field: dense mode, the potential per checkout form field holding its
            asked value.
    """

    correct_line: float = 1.0
    correct_field: float = 0.25
    stray_line: float = 0.5
    invalid_action: float = 0.1
    dense_line: float = 0.1
    dense_field: float = 0.02


class ShopCheckoutScorer(RecordScoreScorer):
    """One episode's score: the first placed order's right lines, fields and strays."""

    def __init__(self, progress: Mapping[str, Any], rewards: RewardConfig) -> None:
        self.num_lines: int = progress["num_lines"]
        self.num_fields = len(progress["fields_met"])
        super().__init__(progress, rewards)

    def read(self, progress: Mapping[str, Any]) -> None:
        self.placed = progress["num_orders"] > 0
        self.lines_met = sum(progress["lines_met"])
        self.fields_met = sum(progress["fields_met"].values())
        self.num_stray = len(progress["stray_lines"])
        self.num_refused = progress["num_refused"]

    def score(self) -> float:
        r = self.rewards
        return (
            r.correct_line * self.lines_met
            + r.correct_field * self.fields_met
            - r.stray_line * self.num_stray
        )

    def reset_info(self) -> dict[str, Any]:
        return {"num_lines": self.num_lines}

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """The placed order if there is one, else the page's cart and checkout form."""
        goal = ShopGoal.from_json(oracle["goal"])
        order = oracle["order"]
        if order is None:
            ev = evaluate_order(goal, oracle["cart"], oracle["form"])
        else:
            ev = evaluate_order(goal, order["lines"], order["fields"])
        return self.rewards.dense_line * (
            sum(ev.lines_met) - len(ev.stray_lines)
        ) + self.rewards.dense_field * sum(ev.fields_met.values())

    @property
    def done(self) -> bool:
        return self.placed

    def status(self) -> dict[str, Any]:
        return {
            "is_success": self.placed
            and self.lines_met == self.num_lines
            and self.fields_met == self.num_fields
            and self.num_stray == 0,
            "num_lines_met": self.lines_met,
            "num_fields_met": self.fields_met,
            "num_stray_lines": self.num_stray,
            "num_refused": self.num_refused,
        }


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse invalid reset options before any round trip (the task's own checks).

    Raises:
        ValueError: (a ``TaskOptionsError``) an unknown option or a bad value.
    """
    parse_options(options)
