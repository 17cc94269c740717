"""ShopCheckout: buy the asked products in an online shop and check out.

The app: a catalogue (a search box; department, brand, price and "in stock only"
facets; a sort menu; pages of 8 product cards, each with a quantity stepper and "Add to
cart"), a cart page (quantity steppers, "Remove", "Proceed to checkout") and a checkout
form (shipping address, delivery options and payment methods as radio cards, a terms
checkbox, "Place order") that shows validation errors and refuses an incomplete order.

The record: every placed order (its lines and form values) and every refused attempt.
``/progress`` scores the first placed order against the goal
(:func:`~uirl_gym.tasks.shop_checkout.data.evaluate_order`): which asked lines it holds
at the right quantity, the products nobody asked for, which form fields are right.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uirl_gym.tasks.base import Task, is_int
from uirl_gym.tasks.shop_checkout.data import (
    BRANDS,
    CATEGORIES,
    DELIVERY_OPTIONS,
    FORM_FIELDS,
    PAYMENT_METHODS,
    PRICE_RANGES,
    OrderEvaluation,
    ShopGoal,
    describe_line,
    evaluate_order,
    generate_goal,
    parse_options,
)

SHOP_NAME = "Northwind Market"
# An order line's largest quantity (the steppers stop there) and the most lines an
# order can hold (the catalogue's size): a larger event is malformed.
MAX_LINE_QUANTITY = 10
MAX_ORDER_LINES = 80
MAX_FIELD_CHARS = 200


def instruction(goal: ShopGoal) -> str:
    items = [describe_line(goal, line) for line in goal.lines]
    listed = items[0] if len(items) < 3 else "; ".join(items[:-1]) + ";"
    if len(items) > 1:
        listed = f"{listed} and {items[-1]}"
    f = goal.fields
    return (
        f"In the {SHOP_NAME} shop, buy {listed}. The order must hold only these items. "
        f"Ship to {f['full_name']}, {f['street']}, {f['city']}, postcode {f['postcode']}, "
        f"with {f['delivery']} delivery, pay by {f['payment']}, accept the terms and place "
        "the order."
    )


@dataclass
class Order:
    lines: list[dict[str, int]]
    fields: dict[str, str]


@dataclass
class EpisodeState:
    goal: ShopGoal
    orders: list[Order] = field(default_factory=list)
    num_refused: int = 0


class ShopCheckoutTask(Task):
    """The episode's catalogue and asked order, and the orders placed (module docstring)."""

    name = "shop_checkout"
    public_progress_keys = frozenset({"episode", "num_lines", "num_orders", "num_refused"})

    def __init__(self) -> None:
        self.state: EpisodeState | None = None

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        rng = random.Random(seed)
        goal = generate_goal(rng.randrange(2**63), opts)
        self.state = EpisodeState(goal=goal)
        self.episode_id += 1
        return {
            "instruction": instruction(goal),
            "app_state": {
                "episode": self.episode_id,
                "shop_name": SHOP_NAME,
                "products": [vars(p) for p in goal.products],
                "categories": list(CATEGORIES),
                "brands": sorted(BRANDS),
                "price_ranges": [label for label, _low, _high in PRICE_RANGES],
                "price_bounds": [[low, high] for _label, low, high in PRICE_RANGES],
                "delivery_options": [list(d) for d in DELIVERY_OPTIONS],
                "payment_methods": list(PAYMENT_METHODS),
                "cart": [{"product_id": pid, "quantity": q} for pid, q in goal.cart],
                "max_quantity": MAX_LINE_QUANTITY,
            },
        }

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.state is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        kind = event.get("type")
        if kind == "refused":
            self.state.num_refused += 1
            return {"recorded": True}
        if kind != "order":
            raise ValueError(f"unknown event type {kind!r}; expected 'order' or 'refused'")
        lines = _checked_lines(event.get("lines"), len(self.state.goal.products))
        fields = event.get("fields")
        if (
            not isinstance(fields, Mapping)
            or set(fields) != set(FORM_FIELDS)
            or not all(isinstance(v, str) and len(v) <= MAX_FIELD_CHARS for v in fields.values())
        ):
            raise ValueError(f"fields: expected an object of strings with keys {list(FORM_FIELDS)}")
        self.state.orders.append(Order(lines=lines, fields=dict(fields)))
        return {"recorded": True, "order_number": len(self.state.orders)}

    def progress(self) -> dict[str, Any]:
        if self.state is None:
            return {
                "num_lines": 0,
                "num_orders": 0,
                "lines_met": [],
                "stray_lines": [],
                "fields_met": {},
                "num_refused": 0,
            }
        goal = self.state.goal
        ev = self._first_order_evaluation()
        return {
            "episode": self.episode_id,
            "num_lines": len(goal.lines),
            "num_orders": len(self.state.orders),
            "lines_met": ev.lines_met if ev else [False] * len(goal.lines),
            "stray_lines": ev.stray_lines if ev else [],
            "fields_met": ev.fields_met if ev else {f: False for f in FORM_FIELDS},
            "num_refused": self.state.num_refused,
        }

    def _first_order_evaluation(self) -> OrderEvaluation | None:
        assert self.state is not None
        if not self.state.orders:
            return None
        first = self.state.orders[0]
        return evaluate_order(self.state.goal, first.lines, first.fields)

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.state is not None
        orders = self.state.orders
        return {
            "episode": self.episode_id,
            "goal": self.state.goal.to_json(),
            "order": vars(orders[0]) if orders else None,
            **page_state,
        }


def _checked_lines(lines: Any, num_products: int) -> list[dict[str, int]]:
    """An order's lines from the app, checked (``ValueError``: malformed)."""
    if not isinstance(lines, list) or not 0 < len(lines) <= MAX_ORDER_LINES:
        raise ValueError(f"lines: expected a list of 1 to {MAX_ORDER_LINES} lines")
    out = []
    for line in lines:
        pid = line.get("product_id") if isinstance(line, Mapping) else None
        qty = line.get("quantity") if isinstance(line, Mapping) else None
        if not (is_int(pid) and is_int(qty)):
            raise ValueError("lines: every line needs an integer product_id and quantity")
        if not 0 <= pid < num_products or not 1 <= qty <= MAX_LINE_QUANTITY:
            raise ValueError(
                f"lines: product_id must be in 0..{num_products - 1} and quantity in "
                f"1..{MAX_LINE_QUANTITY}, got {pid} and {qty}"
            )
        out.append({"product_id": pid, "quantity": qty})
    if len({line["product_id"] for line in out}) != len(out):
        raise ValueError("lines: a product may appear in one line only")
    return out
