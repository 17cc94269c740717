"""ShopCheckout: the seeded catalogues and orders, the scorer, episodes on real Chromium."""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
from task_play import play

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks.base import TaskOptionsError
from uirl_gym.tasks.expert import box_centre, click
from uirl_gym.tasks.shop_checkout.data import (
    FORM_FIELDS,
    Options,
    ShopGoal,
    evaluate_order,
    field_matches,
    generate_goal,
)
from uirl_gym.tasks.shop_checkout.expert import ShopCheckoutExpert
from uirl_gym.tasks.shop_checkout.score import RewardConfig, ShopCheckoutScorer
from uirl_gym.tasks.shop_checkout.task import ShopCheckoutTask

ENV_ID = "uirl/ShopCheckout-v0"


def order_lines(quantities: dict[int, int]) -> list[dict[str, int]]:
    return [{"product_id": pid, "quantity": q} for pid, q in quantities.items()]


def look_alikes(goal: ShopGoal, pid: int) -> list[int]:
    """Other products whose name holds every word of product ``pid``'s name."""
    words = set(goal.products[pid].name.split())
    return [p.id for p in goal.products if p.id != pid and words <= set(p.name.split())]


# -- without a browser ----------------------------------------------------------------


def test_goals_are_seeded_and_respect_the_options() -> None:
    assert generate_goal(7, Options()) == generate_goal(7, Options()) != generate_goal(8, Options())
    kinds: Counter[str] = Counter()
    for seed in range(200):
        opts = Options(
            num_items=1 + seed % 4,
            catalogue_size=20 + seed % 61,
            distractors=seed % 4,
            cart_junk=seed % 4,
            max_quantity=1 + seed % 5,
        )
        goal = generate_goal(seed, opts)
        products = goal.products
        assert len(products) == opts.catalogue_size
        assert len({p.name for p in products}) == len(products)
        assert len(goal.lines) == opts.num_items
        assert len({products[line.product_id].type for line in goal.lines}) == opts.num_items
        for line in goal.lines:
            target = products[line.product_id]
            assert target.in_stock and 1 <= line.quantity <= opts.max_quantity
            kinds[line.description] += 1
            if line.description == "named":
                assert len(look_alikes(goal, target.id)) == opts.distractors
                continue
            same = [p for p in products if (p.brand, p.type) == (target.brand, target.type)]
            in_stock = [p.price_cents for p in same if p.in_stock and p is not target]
            assert all(price > target.price_cents for price in in_stock)  # one cheapest
            if opts.distractors:  # a cheaper one of the brand, out of stock
                assert any(not p.in_stock and p.price_cents < target.price_cents for p in same)
        junk = dict(goal.cart)
        assert len(junk) == opts.cart_junk and not set(junk) & set(goal.wanted())
        assert all(products[pid].in_stock for pid in junk)
        assert re.fullmatch(r"\d{5}", goal.fields["postcode"])
    assert set(kinds) == {"named", "cheapest"}


def test_orders_are_scored_by_lines_strays_and_fields() -> None:
    goal = generate_goal(3, Options(num_items=2, cart_junk=1))
    (a, qa), (b, qb) = goal.wanted().items()
    junk = goal.cart[0][0]
    fields = {**goal.fields, "full_name": f"  {goal.fields['full_name'].upper()} "}
    ev = evaluate_order(goal, order_lines({a: qa, b: qb + 1, junk: 1}), fields)
    assert ev.lines_met == [True, False] and ev.stray_lines == [goal.products[junk].name]
    assert all(ev.fields_met.values()) and not ev.exact
    ev = evaluate_order(goal, order_lines({a: qa, b: qb}), {**fields, "payment": "paypal"})
    assert ev.lines_met == [True, True] and ev.stray_lines == [] and not ev.exact
    assert [f for f, ok in ev.fields_met.items() if not ok] == ["payment"]
    assert evaluate_order(goal, order_lines({a: qa, b: qb}), goal.fields).exact
    assert field_matches("city", "new  york", "New York") and not field_matches("city", None, "X")


def test_instruction_names_or_describes_each_line() -> None:
    task = ShopCheckoutTask()
    text = task.reset(11, {"num_items": 4})["instruction"]
    assert text == ShopCheckoutTask().reset(11, {"num_items": 4})["instruction"]
    goal = task.state.goal
    for line in goal.lines:
        p = goal.products[line.product_id]
        if line.description == "named":
            assert f'{line.quantity} x "{p.name}"' in text
        else:
            assert f"{line.quantity} x the cheapest in-stock {p.type.lower()} by {p.brand}" in text
    f = goal.fields
    assert f"Ship to {f['full_name']}, {f['street']}, {f['city']}, postcode {f['postcode']}" in text
    assert f"with {f['delivery']} delivery, pay by {f['payment']}" in text


def test_task_records_orders_and_the_scorer_pays_the_first() -> None:
    task = ShopCheckoutTask()
    task.reset(4, {"num_items": 2, "cart_junk": 1})
    goal, episode = task.state.goal, task.episode_id
    scorer = ShopCheckoutScorer(task.progress(), RewardConfig())
    assert scorer.reset_info() == {"num_lines": 2} and not scorer.done
    assert task.handle_event({"type": "refused", "episode": episode}) == {"recorded": True}
    assert scorer.reward(task.progress()) == 0.0 and scorer.status()["num_refused"] == 1
    (a, qa), (b, _qb) = goal.wanted().items()
    junk = goal.cart[0][0]
    fields = {**goal.fields, "city": "Nowhere"}
    lines = order_lines({a: qa, junk: 2})
    task.handle_event({"type": "order", "episode": episode, "lines": lines, "fields": fields})
    assert scorer.reward(task.progress()) == pytest.approx(1.0 + 5 * 0.25 - 0.5)
    assert scorer.done and scorer.status() == {
        "is_success": False,
        "num_lines_met": 1,
        "num_fields_met": 5,
        "num_stray_lines": 1,
        "num_refused": 1,
    }
    # Only the first order counts: a second, exact one changes nothing.
    exact = {"type": "order", "episode": episode, "lines": order_lines(goal.wanted())}
    task.handle_event({**exact, "fields": dict(goal.fields)})
    assert scorer.reward(task.progress()) == 0.0 and task.progress()["num_orders"] == 2
    # An exact first order is a success.
    task.reset(4, {"num_items": 2, "cart_junk": 1})
    scorer = ShopCheckoutScorer(task.progress(), RewardConfig())
    task.handle_event({**exact, "episode": task.episode_id, "fields": dict(goal.fields)})
    assert scorer.reward(task.progress()) == pytest.approx(2 * 1.0 + 6 * 0.25)
    assert scorer.status()["is_success"] is True
    # Malformed and stale events change nothing.
    ok = {**exact, "episode": task.episode_id, "fields": dict(goal.fields)}
    with pytest.raises(ValueError, match="unknown event type 'cart'"):
        task.handle_event({**ok, "type": "cart"})
    with pytest.raises(ValueError, match=re.escape("quantity in 1..10, got 0 and 0")):
        task.handle_event({**ok, "lines": [{"product_id": 0, "quantity": 0}]})
    with pytest.raises(ValueError, match="a product may appear in one line only"):
        task.handle_event({**ok, "lines": order_lines({a: 1}) * 2})
    with pytest.raises(ValueError, match=re.escape("fields: expected an object of strings")):
        task.handle_event({**ok, "fields": {"full_name": "x"}})
    assert task.handle_event({**ok, "episode": task.episode_id - 1})["recorded"] is False
    assert task.progress()["num_orders"] == 1


def test_potential_counts_the_cart_and_form_until_an_order_is_placed() -> None:
    task = ShopCheckoutTask()
    task.reset(5, {"num_items": 2, "cart_junk": 2})
    goal = task.state.goal
    scorer = ShopCheckoutScorer(task.progress(), RewardConfig())
    form = dict.fromkeys(FORM_FIELDS, "")
    junk = order_lines(dict(goal.cart))
    assert scorer.potential(task.oracle({"cart": junk, "form": form})) == pytest.approx(-0.2)
    (a, qa), (b, qb) = goal.wanted().items()
    cart = order_lines({a: qa, b: qb + 1})
    form.update(city=goal.fields["city"], payment=goal.fields["payment"])
    oracle = task.oracle({"cart": cart, "form": form})
    assert scorer.potential(oracle) == pytest.approx(0.1 + 2 * 0.02)
    # Once placed, the order is what counts (the app empties the cart).
    lines = order_lines(goal.wanted())
    task.handle_event(
        {"type": "order", "episode": task.episode_id, "lines": lines, "fields": dict(goal.fields)}
    )
    placed = task.oracle({"cart": [], "form": dict.fromkeys(FORM_FIELDS, "")})
    assert scorer.potential(placed) == pytest.approx(2 * 0.1 + 6 * 0.02)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"items": 2}, "unknown option(s) ['items']; allowed: ['cart_junk', 'catalogue_size', "),
        ({"num_items": 5}, "num_items: must be an integer in 1..4, got 5"),
        ({"catalogue_size": 10}, "catalogue_size: must be an integer in 20..80, got 10"),
        ({"distractors": True}, "distractors: must be an integer in 0..3, got True"),
        ({"cart_junk": -1}, "cart_junk: must be an integer in 0..3, got -1"),
        ({"max_quantity": "2"}, "max_quantity: must be an integer in 1..5, got '2'"),
    ],
    ids=["unknown", "items", "catalogue", "distractors", "junk", "quantity"],
)
def test_options_errors_are_clear(options: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskOptionsError, match=re.escape(message)):
        ShopCheckoutTask().reset(0, options)


# -- on real Chromium -----------------------------------------------------------------


def _expert_episodes(env: gym.Env, seeds: range) -> Counter[str]:
    """The expert on each seed (every fifth one with four lines, three junk lines and the
    largest catalogue); the descriptions and junk that came up."""
    seen: Counter[str] = Counter()
    for seed in seeds:
        big = {"num_items": 4, "cart_junk": 3, "catalogue_size": 80, "max_quantity": 5}
        options = {"split": "test", **(big if seed % 5 == 0 else {})}
        env.reset(seed=seed, options=options)
        goal = ShopGoal.from_json(env.unwrapped.oracle()["goal"])
        seen.update(line.description for line in goal.lines)
        seen["junk"] += len(goal.cart)
        total, info, actions = play(env, ShopCheckoutExpert())
        assert info["is_success"] and len(actions) < 60, (seed, info, len(actions))
        n = len(goal.lines)
        # Paid lines and fields, plus the dense potential's change (junk removed).
        assert total == pytest.approx(1.1 * n + 6 * 0.27 + 0.1 * len(goal.cart)), (seed, total)
    return seen


@pytest.mark.slow  # about 400 steps, on two sessions at once
def test_expert_solves_20_test_split_episodes(env: gym.Env, task_runtime: LocalRuntime) -> None:
    # Two sessions play ten episodes each: a step is a serial round trip (client,
    # server, Chromium), so a second session uses the second core.
    other = gym.make(ENV_ID, runtime=task_runtime, image_format="jpeg", reward_mode="dense")
    try:
        with ThreadPoolExecutor(2) as pool:
            halves = pool.map(_expert_episodes, (env, other), (range(0, 10), range(10, 20)))
            seen = sum(halves, Counter())
    finally:
        other.close()
    assert seen["named"] and seen["cheapest"] and seen["junk"], seen


def test_facets_and_sort_find_the_cheapest_in_stock_product(env: gym.Env) -> None:
    """What a "cheapest in-stock ... by ..." line asks, done the shopper's way: search
    the type, tick the brand and "In stock only", sort by price: the target comes first.
    Pages turn with Next."""
    env.reset(seed=1, options={"num_items": 4, "catalogue_size": 80})
    o = env.unwrapped.oracle()
    goal = ShopGoal.from_json(o["goal"])
    line = next(li for li in goal.lines if li.description == "cheapest")
    target = goal.products[line.product_id]
    env.step(click(o["next_page"]))
    o = env.unwrapped.oracle()
    assert o["page"] == 1 and [c["product_id"] for c in o["cards"]] == list(range(8, 16))
    env.step(click(o["search_box"]))
    env.step(Action(ActionType.TYPE, text=f"{target.type.lower()}\n"))
    o = env.unwrapped.oracle()
    assert o["page"] == 0 and o["query"] == target.type.lower()
    brand = next(b for b in _facet_boxes(o) if b[0] == target.brand)
    env.step(Action(ActionType.LEFT_CLICK, *brand[1:]))
    env.step(Action(ActionType.LEFT_CLICK, *_facet_boxes(o, "In stock only")[0][1:]))
    env.step(click(env.unwrapped.oracle()["sort_button"]))
    o = env.unwrapped.oracle()
    assert o["sort_open"] and o["brands"] == [target.brand] and o["in_stock"]
    env.step(click(o["sort_options"]["price_asc"]))
    o = env.unwrapped.oracle()
    assert o["sort"] == "price_asc" and not o["sort_open"]
    shown = [goal.products[c["product_id"]] for c in o["cards"]]
    assert shown[0] == target and all(p.in_stock and p.brand == target.brand for p in shown)


def _facet_boxes(o: dict[str, Any], label: str | None = None) -> list[tuple[str, int, int]]:
    """(label, x, y) of the sidebar's facets (``label``: only that one)."""
    out = [(name, *box_centre(b)) for name, b in o["facets"].items()]
    return [f for f in out if label is None or f[0] == label]


def test_checkout_refuses_incomplete_orders_and_scores_a_wrong_one(env: gym.Env) -> None:
    """Place order with an empty form: errors, a refusal, no order. Then the junk cart,
    ordered as it is with the right details: stray lines are charged, no success."""
    env.reset(seed=2, options={"cart_junk": 2})
    goal = ShopGoal.from_json(env.unwrapped.oracle()["goal"])
    env.step(click(env.unwrapped.oracle()["cart_button"]))
    env.step(click(env.unwrapped.oracle()["checkout_button"]))
    o = env.unwrapped.oracle()
    assert o["view"] == "checkout"
    _obs, reward, terminated, _trunc, info = env.step(click(o["place_order"]))
    o = env.unwrapped.oracle()
    assert reward == 0.0 and not terminated and info["num_refused"] == 1
    assert set(o["errors"]) == {*FORM_FIELDS, "terms"} and o["order"] is None
    env.step(click(o["fields"]["full_name"]))
    env.step(Action(ActionType.TYPE, text=goal.fields["full_name"] + "\tx\ty\t123"))
    o = env.unwrapped.oracle()
    assert o["form"]["postcode"] == "123"
    env.step(click(o["terms_box"]))
    _obs, reward, terminated, _trunc, info = env.step(click(o["place_order"]))
    assert not terminated and env.unwrapped.oracle()["errors"].keys() == {
        "postcode",
        "delivery",
        "payment",
    }
    for field in ("street", "city", "postcode"):
        env.step(click(env.unwrapped.oracle()["fields"][field]))
        env.step(Action(ActionType.KEYS, keys="ctrl+a"))
        env.step(Action(ActionType.TYPE, text=goal.fields[field]))
    o = env.unwrapped.oracle()
    env.step(click(o["choices"]["delivery"][goal.fields["delivery"]]))
    env.step(click(o["choices"]["payment"][goal.fields["payment"]]))
    assert env.unwrapped.oracle()["form"] == goal.fields
    _obs, reward, terminated, _trunc, info = env.step(click(o["place_order"]))
    assert terminated and info["num_stray_lines"] == 2 and not info["is_success"]
    assert info["num_fields_met"] == 6 and info["num_lines_met"] == 0
    assert reward == pytest.approx(6 * 0.25 - 2 * 0.5)  # (the potential had them already)
    o = env.unwrapped.oracle()
    assert o["view"] == "done" and o["cart"] == [] and o["order"]["fields"] == goal.fields


def test_expert_recovers_from_facets_a_stale_search_and_wrong_fields(env: gym.Env) -> None:
    """A shopper's detours: a brand facet, a sort, another search, an extra product, a
    wrong name typed at checkout. The expert clears, re-searches, removes and retypes."""
    env.reset(seed=3, options={"split": "test", "cart_junk": 0})
    o = env.unwrapped.oracle()
    goal = ShopGoal.from_json(o["goal"])
    other = next(
        c
        for c in o["cards"]
        if c["product_id"] not in goal.wanted() and goal.products[c["product_id"]].in_stock
    )
    env.step(click(other["plus"]))
    env.step(click(other["add"]))  # 2 of a product nobody asked for
    env.step(click(o["search_box"]))
    env.step(Action(ActionType.TYPE, text="lamp\n"))
    env.step(Action(ActionType.LEFT_CLICK, *_facet_boxes(o, "In stock only")[0][1:]))
    env.step(click(env.unwrapped.oracle()["sort_button"]))
    o = env.unwrapped.oracle()
    assert (
        o["filters_active"]
        and o["sort_open"]
        and o["cart"] == order_lines({other["product_id"]: 2})
    )
    env.step(click(o["cart_button"]))
    env.step(click(env.unwrapped.oracle()["checkout_button"]))
    env.step(click(env.unwrapped.oracle()["fields"]["full_name"]))
    env.step(Action(ActionType.TYPE, text="Somebody Else"))
    total, info, actions = play(env, ShopCheckoutExpert())
    assert info["is_success"] and len(actions) < 40, (info, len(actions))
