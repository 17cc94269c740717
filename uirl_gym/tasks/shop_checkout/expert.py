"""ShopCheckout's scripted expert: reads privileged state, acts only through agent actions.

It compares the page's cart with the asked lines and plans the next short macro: while
the cart is wrong, in the cart page it removes what nobody asked for and steps
quantities to the asked ones, and in the catalogue it finds each missing product (clear
the facets, search its exact name, turn to its page), sets the card's stepper and adds
it. With the right cart it goes to checkout, types the address (all fields in one go,
Tab between them, when the form is blank), picks the delivery and payment cards, ticks
the terms and places the order. It re-plans after each macro, so it recovers from
whatever the page shows (an open menu, a wrong filter, a wrong field).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert, click
from uirl_gym.tasks.shop_checkout.data import ADDRESS_FIELDS, ShopGoal, field_matches

ESCAPE = Action(ActionType.KEYS, keys="Escape")
SELECT_ALL = Action(ActionType.KEYS, keys="ctrl+a")


class ShopCheckoutExpert(MacroExpert):
    """Solves ShopCheckout episodes from the oracle state (see :class:`MacroExpert`)."""

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        if o["order"] is not None or o["view"] == "done":
            return [Action(ActionType.FINISH)]
        if o["sort_open"]:
            return [ESCAPE]
        goal = ShopGoal.from_json(o["goal"])
        wanted = goal.wanted()
        cart = {line["product_id"]: line["quantity"] for line in o["cart"]}
        if cart != wanted:
            return self._fix_cart(o, goal, wanted, cart)
        if o["view"] == "checkout":
            return self._checkout(o, goal)
        if o["view"] == "cart":
            return [click(o["checkout_button"])]
        return [click(o["cart_button"])]

    def _fix_cart(
        self, o: Mapping[str, Any], goal: ShopGoal, wanted: dict[int, int], cart: dict[int, int]
    ) -> list[Action]:
        if o["view"] == "cart":
            # Rows in cart order: the first one to fix is always on screen (at most four
            # rows are asked for, and about eight fit).
            for row in o["cart_rows"]:
                pid = row["product_id"]
                if pid not in wanted:
                    return [click(row["remove"])]
                if cart[pid] != wanted[pid]:
                    return [click(row["minus" if cart[pid] > wanted[pid] else "plus"])]
            return [click(o["continue_button"])]
        missing = [pid for pid, q in wanted.items() if pid not in cart]
        if o["view"] == "catalogue" and missing:
            return self._add(o, goal, missing[0], wanted[missing[0]])
        return [click(o["cart_button"])]

    @staticmethod
    def _add(o: Mapping[str, Any], goal: ShopGoal, pid: int, quantity: int) -> list[Action]:
        """Find the product's card, set its stepper to ``quantity``, add it to the cart."""
        card = next((c for c in o["cards"] if c["product_id"] == pid), None)
        if card is None:
            return _find(o, goal.products[pid].name, pid)
        if card["qty"] != quantity:
            step = "plus" if card["qty"] < quantity else "minus"
            return [click(card[step])] * abs(card["qty"] - quantity)
        return [click(card["add"])]

    @staticmethod
    def _checkout(o: Mapping[str, Any], goal: ShopGoal) -> list[Action]:
        form, asked = o["form"], goal.fields
        wrong = [f for f in ADDRESS_FIELDS if not field_matches(f, form[f], asked[f])]
        if wrong:
            if not any(form[f] for f in ADDRESS_FIELDS):
                text = "\t".join(asked[f] for f in ADDRESS_FIELDS)
                return [click(o["fields"][ADDRESS_FIELDS[0]]), Action(ActionType.TYPE, text=text)]
            f = wrong[0]
            clear = [SELECT_ALL] if form[f] else []
            return [click(o["fields"][f]), *clear, Action(ActionType.TYPE, text=asked[f])]
        for group in ("delivery", "payment"):
            if form[group] != asked[group]:
                return [click(o["choices"][group][asked[group]])]
        if not o["terms"]:
            return [click(o["terms_box"])]
        return [click(o["place_order"])]


def _find(o: Mapping[str, Any], name: str, pid: int) -> list[Action]:
    """Bring a product's card on screen: clear the facets, search its name, turn pages."""
    if o["filters_active"]:
        return [click(o["clear_filters"])]
    if o["query"] != name:
        clear = [SELECT_ALL] if o["search_text"] else []
        return [click(o["search_box"]), *clear, Action(ActionType.TYPE, text=f"{name}\n")]
    index = o["result_ids"].index(pid)
    wanted_page = index // o["page_size"]
    return [click(o["next_page"] if wanted_page > o["page"] else o["prev_page"])]
