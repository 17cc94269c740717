r"""# ShopCheckout: `uirl/ShopCheckout-v0`

![A ShopCheckout episode](../images/tasks/shop_checkout.png)

An online shop like Amazon's or any web store: find the products an instruction asks
for in a catalogue with search, facets, sorting and pages, put them in the cart at the
asked quantities, clear out what else is in the cart, and check out with the given
shipping details. The placed order is scored, not the way there.

```python
import gymnasium as gym
import uirl_gym

env = gym.make("uirl/ShopCheckout-v0")  # task id shop_checkout, TimeLimit of 60 steps
obs, info = env.reset(seed=0, options={"split": "test"})
obs["instruction"]
# 'In the Northwind Market shop, buy 1 x the cheapest in-stock water bottle by Vela and
#  3 x the cheapest in-stock yoga mat by Pinecrest. The order must hold only these
#  items. Ship to John Walker, 875 Harbor Road, Clinton, postcode 48364, with Express
#  delivery, pay by Bank transfer, accept the terms and place the order.'
```

## What it tests

- **Finding products.** The catalogue shows 8 product cards a page (brand, name,
  price, "In stock" or "Currently unavailable") with *Previous*, page numbers and
  *Next* below. The search box (Enter or *Search*) keeps the products whose name,
  brand, department or type holds every word of the query. The department bar (*All
  departments*, Audio, Kitchen, Home, Outdoor, Office, Fitness), the sidebar's facets
  (Brand checkboxes, Price ranges, *In stock only*, *Clear all filters*) and the *Sort
  by* menu (Featured, Price: Low to High, Price: High to Low, Name: A to Z) narrow and
  order the results.
- **Reading a description.** An asked line names its product exactly
  (`2 x "Norvik Fjord Electric Kettle"`) or describes it
  (`1 x the cheapest in-stock electric kettle by Norvik`): the agent has to combine the
  brand facet, *In stock only* and a price sort (or compare prices itself).
- **Distractors.** Per asked line, look-alikes: a named product has products with the
  same name plus a variant word ("Norvik Fjord Pro Electric Kettle", "... Mini ...",
  some out of stock), so a search for the name lists them all; a described one has a
  cheaper product of the brand that is out of stock, a cheaper one of another brand,
  and a pricier one of the brand.
- **Quantities and the cart.** Each card has a stepper (− n +) and *Add to cart*
  (adding again adds to the line). The cart page has a stepper and *Remove* per line,
  the subtotal, *Proceed to checkout* and *Continue shopping*. The cart can start with
  junk (products nobody asked for, look-alikes of the asked ones first) that has to go.
- **A checkout form.** Full name, street address, city and postcode (text inputs; Tab
  moves between them), the delivery option and the payment method as radio cards, and
  a terms checkbox. *Place your order* with a missing field, a postcode that is not 5
  digits, no delivery or payment choice, or the terms unticked shows the errors under
  the fields (fixed-height, so nothing moves) and a banner, and places nothing. A
  placed order shows a confirmation page and empties the cart.

Each episode is seeded: the catalogue (products from 19 types in 6 departments by 8
brands, with prices and stock), which lines are asked and how they are described, their
quantities, the cart's junk, and the shipping details. Nothing is fetched from the
network.

## Options (`env.reset(options=...)` or `gym.make(..., default_options=...)`)

| option | default | range | effect |
| --- | --- | --- | --- |
| `num_items` | 2 | 1..4 | Order lines the instruction asks for (each of another product type). |
| `catalogue_size` | 40 | 20..80 | Products in the shop, 8 a page (3 to 10 pages unfiltered). |
| `distractors` | 2 | 0..3 | Look-alike products per asked line (see above). |
| `cart_junk` | 1 | 0..3 | Lines already in the cart that nobody asked for (quantity 1 or 2). |
| `max_quantity` | 3 | 1..5 | The largest quantity a line asks for. |
| `split` | the env's | `train`, `test` | Which range of task seeds the episode comes from (the env's option, as for every task). |

A bad option raises `TaskOptionsError` (a `ValueError`) in `env.reset`, before any
request reaches the server. The message says what was expected, e.g.
`num_items: must be an integer in 1..4, got 5` or
`unknown option(s) ['items']; allowed: ['cart_junk', 'catalogue_size', ...]`.

## Record and reward

*Place your order* records the order with `window.uirlRecord({type: "order", lines,
fields})` (the cart's lines and the form's values), or, when the form has errors, a
refusal (`{type: "refused"}`). `/progress` scores the first placed order
(`uirl_gym.tasks.shop_checkout.data.evaluate_order`):

- `num_lines`: the asked lines; `num_orders`: the orders placed;
- `lines_met`: per asked line, whether the order holds its product at the asked
  quantity;
- `stray_lines`: the names of the products in the order that nobody asked for;
- `fields_met`: per field (`full_name`, `street`, `city`, `postcode`, `delivery`,
  `payment`), whether the order has the asked value. Text compares after trimming and
  collapsing spaces, ignoring case;
- `num_refused`: the refused attempts (never charged).

Nothing is paid before an order is placed. The first order pays `correct_line` (1.0)
per line met and `correct_field` (0.25) per field met, and charges `stray_line` (0.5)
per stray product; placing it ends the episode (terminated). `is_success` needs an
exact order: every line and field met, no stray product. Dense mode
(`reward_mode="dense"`) adds the change of a potential: `dense_line` (0.1) per asked
line the cart holds at its quantity minus as much per product in the cart nobody
asked for, and `dense_field` (0.02) per checkout field holding its value (after the
order: the order's lines and fields). Refused actions cost `invalid_action` (0.1). All
weights: `uirl_gym.tasks.shop_checkout.score.RewardConfig`. Info on every step:
`is_success`, `num_lines_met`, `num_fields_met`, `num_stray_lines`, `num_refused`,
`progress`; reset info has `num_lines`.

## Expert

`uirl_gym.tasks.shop_checkout.expert.ShopCheckoutExpert` plans from
`env.unwrapped.oracle()` (the goal: catalogue, asked lines and fields; the page's view,
cart, form, search and facets, the result ids in order, and element boxes: cards with
their steppers and *Add to cart*, cart rows, form fields, radio cards, buttons) and acts
only with clicks, keys and typing. It knows which product a description means and
searches its exact name (a shopper would use the facets and a price sort instead: the
tests check that this finds the same product). In order:

1. an open sort menu: Escape;
2. while the cart differs from the asked lines: on the cart page, remove the first
   line nobody asked for or step a wrong quantity (− or +), else *Continue shopping*;
   in the catalogue, for the first asked product not in the cart, clear the facets if
   any are set, search its name (click the box, `ctrl+a` if it holds text, type the
   name and Enter), turn to its page if needed, click the card's + or − to the asked
   quantity and *Add to cart*; elsewhere, the header's *Cart*;
3. with the right cart: *Cart*, *Proceed to checkout*;
4. at checkout: a blank address typed in one go (`John Walker\t875 Harbor Road\tClinton\t48364`),
   or a wrong field clicked, `ctrl+a`, retyped; the delivery and payment cards; the
   terms; *Place your order*.

It re-plans after each macro (one to five actions), so it recovers from whatever the
page shows.

## Baselines (test split, default options)

| agent | success | mean steps |
| --- | --- | --- |
| `ShopCheckoutExpert` | 1.00 (20 episodes) | 17.2 |
| `ShopCheckoutExpert`, hardest (`num_items=4`, `cart_junk=3`, `catalogue_size=80`, `max_quantity=5`, `distractors=3`) | 1.00 (10 episodes) | 34.1 |
| `RandomPolicy(seed=0)` | 0.00 (10 episodes; no order placed) | 60 (the time limit) |
| `RandomPolicy(seed=0)`, easiest (`num_items=1`, `cart_junk=0`, `catalogue_size=20`, `distractors=0`, `max_quantity=1`) | 0.00 (10 episodes; no order placed) | 60 (the time limit) |

Measured on 2026-11-25 with `python scripts/task_report.py --task shop_checkout --episodes 20
--random-episodes 10`: episode `k` is `reset(seed=k)` on the test split with the
default options, at most 60 steps (the same run writes this task's row in
docs/tasks.md). Other options: the env's `reset(options=...)`.

The picture above is test-split episode 0 (default options) at reset, as
`scripts/task_report.py` makes it.

The tests (`tests/test_task_shop_checkout.py`) check that the expert solves 20
test-split episodes (every fifth with four lines, three junk lines, 80 products and
quantities up to 5; both kinds of description and junk removal come up) with the
exact reward, that the facets, *In stock only* and the price sort put a described
product first, that an incomplete form is refused with its errors and a wrong order
(junk in it) is charged and ends the episode, and that the expert still succeeds after
random actions and after a shopper's detours (a facet, a sort, another search, an extra
product, a wrong name at checkout).

## Episode end

- **Terminated** when an order is placed (right or wrong: a wrong order ends it too): the step that completes it.

## Version history

- `v0` (2026-11-25): the first version.
"""

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.shop_checkout import score
from uirl_gym.tasks.shop_checkout.expert import ShopCheckoutExpert
from uirl_gym.tasks.shop_checkout.task import ShopCheckoutTask

TASK_SPEC = TaskSpec(
    name="shop_checkout",
    env_id="uirl/ShopCheckout-v0",
    task=ShopCheckoutTask,
    rewards=score.RewardConfig,
    scorer=score.ShopCheckoutScorer,
    check_options=score.check_options,
    expert=ShopCheckoutExpert,
    doc=__doc__,
)
