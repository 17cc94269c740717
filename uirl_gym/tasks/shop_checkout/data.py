"""Seeded shop catalogues, the order an episode asks for, and how an order is scored.

A catalogue lists products named ``<brand> <model> <type>`` ("Norvik Fjord Electric
Kettle"), some with a variant word ("... Pro"), each with a price and a stock flag. An
episode asks for a few *lines* (a product and a quantity), each named either by its
exact name or by description (the cheapest in-stock product of a type by a brand), and
for shipping details (an address, a delivery option, a payment method).

Distractors, per asked line: look-alike names (the same name with a variant word) for a
named product; for a described one, a cheaper out-of-stock product of the same brand
and type, a cheaper one of another brand, and a pricier one of the brand. The cart may
start with junk (products nobody asked for, look-alikes first).

Everything here is pure and deterministic for a seed; the task, the scorer and the
expert all score with :func:`evaluate_order`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uirl_gym.tasks.base import check_option_names, int_option
from uirl_gym.tasks.form_fill.data import FIRST_NAMES, LAST_NAMES, STREETS

BRANDS = ("Aurora", "Norvik", "Kestrel", "Lumen", "Pinecrest", "Orbit", "Vela", "Halden")
# (type, category, lowest and highest price in cents)
PRODUCT_TYPES = (
    ("Wireless Headphones", "Audio", 2900, 34900),
    ("Bluetooth Speaker", "Audio", 1900, 19900),
    ("Earbuds", "Audio", 1500, 24900),
    ("Electric Kettle", "Kitchen", 1900, 12900),
    ("Coffee Grinder", "Kitchen", 2500, 19900),
    ("Toaster", "Kitchen", 1900, 14900),
    ("Blender", "Kitchen", 2900, 29900),
    ("Desk Lamp", "Home", 1200, 8900),
    ("Throw Blanket", "Home", 1500, 9900),
    ("Scented Candle", "Home", 600, 4900),
    ("Hiking Backpack", "Outdoor", 2900, 21900),
    ("Camping Tent", "Outdoor", 4900, 39900),
    ("Water Bottle", "Outdoor", 900, 4900),
    ("Office Chair", "Office", 7900, 49900),
    ("Notebook Set", "Office", 500, 3900),
    ("Monitor Stand", "Office", 1900, 12900),
    ("Yoga Mat", "Fitness", 1500, 8900),
    ("Dumbbell Set", "Fitness", 2500, 19900),
    ("Running Shoes", "Fitness", 3900, 18900),
)
CATEGORIES = ("Audio", "Kitchen", "Home", "Outdoor", "Office", "Fitness")
MODELS = (
    "Fjord", "Nova", "Echo", "Atlas", "Zen", "Pulse", "Terra", "Aero", "Summit", "Drift",
    "Orion", "Breeze", "Vista", "Core", "Flux", "Haven", "Ridge", "Luma", "Tide", "Crest",
)  # fmt: skip
VARIANTS = ("Pro", "Mini", "Plus", "Max", "Lite", "II")
# The price facet's ranges: [low, high) in cents (None: no bound), with their labels.
PRICE_RANGES = (
    ("Under $25", None, 2500),
    ("$25 to $50", 2500, 5000),
    ("$50 to $100", 5000, 10000),
    ("$100 to $250", 10000, 25000),
    ("$250 and above", 25000, None),
)
# (label, detail, price in cents)
DELIVERY_OPTIONS = (
    ("Standard", "3-5 business days", 499),
    ("Express", "1-2 business days", 1299),
    ("Next day", "Order by 8 pm", 1999),
)
PAYMENT_METHODS = ("Credit card", "PayPal", "Bank transfer")
ADDRESS_FIELDS = ("full_name", "street", "city", "postcode")
# What an order is scored on besides its lines, in the checkout form's order.
FORM_FIELDS = (*ADDRESS_FIELDS, "delivery", "payment")
FIELD_LABELS = {
    "full_name": "Full name",
    "street": "Street address",
    "city": "City",
    "postcode": "Postcode",
    "delivery": "Delivery",
    "payment": "Payment method",
}
CITIES = (
    "Springfield", "Riverton", "Fairview", "Lakewood", "Greenville", "Bristol", "Salem",
    "Clinton", "Madison", "Georgetown", "Ashland", "Oakridge", "Milford", "Dover",
)  # fmt: skip
DESCRIPTIONS = ("named", "cheapest")

MAX_ITEMS = 4
DEFAULT_ITEMS = 2
MIN_CATALOGUE = 20
MAX_CATALOGUE = 80
DEFAULT_CATALOGUE = 40
MAX_DISTRACTORS = 3
DEFAULT_DISTRACTORS = 2
MAX_CART_JUNK = 3
DEFAULT_CART_JUNK = 1
MAX_QUANTITY = 5
DEFAULT_MAX_QUANTITY = 3
OPTION_NAMES = frozenset(
    {"num_items", "catalogue_size", "distractors", "cart_junk", "max_quantity"}
)


@dataclass(frozen=True)
class Options:
    """An episode's difficulty (reset options). See docs/tasks/shop_checkout.md.

    Attributes:
        num_items: order lines the instruction asks for (1..4).
        catalogue_size: products in the shop (20..80; 8 a page).
        distractors: look-alike products per asked line (0..3).
        cart_junk: products nobody asked for already in the cart (0..3).
        max_quantity: the largest quantity a line asks for (1..5).
    """

    num_items: int = DEFAULT_ITEMS
    catalogue_size: int = DEFAULT_CATALOGUE
    distractors: int = DEFAULT_DISTRACTORS
    cart_junk: int = DEFAULT_CART_JUNK
    max_quantity: int = DEFAULT_MAX_QUANTITY


def parse_options(options: Mapping[str, Any]) -> Options:
    """Checked reset options, defaults filled in.

    Raises:
        TaskOptionsError: an unknown option, or a value of the wrong type or range.
    """
    check_option_names(options, OPTION_NAMES)
    return Options(
        num_items=int_option(options, "num_items", DEFAULT_ITEMS, 1, MAX_ITEMS),
        catalogue_size=int_option(
            options, "catalogue_size", DEFAULT_CATALOGUE, MIN_CATALOGUE, MAX_CATALOGUE
        ),
        distractors=int_option(options, "distractors", DEFAULT_DISTRACTORS, 0, MAX_DISTRACTORS),
        cart_junk=int_option(options, "cart_junk", DEFAULT_CART_JUNK, 0, MAX_CART_JUNK),
        max_quantity=int_option(options, "max_quantity", DEFAULT_MAX_QUANTITY, 1, MAX_QUANTITY),
    )


@dataclass(frozen=True)
class Product:
    id: int
    name: str
    brand: str
    type: str
    category: str
    price_cents: int
    in_stock: bool


@dataclass(frozen=True)
class Line:
    """An asked order line: ``quantity`` of product ``product_id``, described as
    ``description`` (``named``: by its name; ``cheapest``: the cheapest in-stock product
    of its type by its brand)."""

    product_id: int
    quantity: int
    description: str


@dataclass(frozen=True)
class ShopGoal:
    """One episode's catalogue and the order it asks for (JSON: :meth:`to_json`).

    Attributes:
        products: the catalogue, ids ``0..n-1`` in the shop's "Featured" order.
        lines: the asked order lines.
        fields: the asked form values (``FORM_FIELDS``).
        cart: the cart at the start: ``(product_id, quantity)`` junk lines.
    """

    products: tuple[Product, ...]
    lines: tuple[Line, ...]
    fields: Mapping[str, str]
    cart: tuple[tuple[int, int], ...] = ()

    def wanted(self) -> dict[int, int]:
        """product id -> asked quantity."""
        return {line.product_id: line.quantity for line in self.lines}

    def to_json(self) -> dict[str, Any]:
        return {
            "products": [vars(p) for p in self.products],
            "lines": [vars(line) for line in self.lines],
            "fields": dict(self.fields),
            "cart": [list(c) for c in self.cart],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShopGoal:
        return cls(
            products=tuple(Product(**p) for p in data["products"]),
            lines=tuple(Line(**line) for line in data["lines"]),
            fields=dict(data["fields"]),
            cart=tuple((pid, qty) for pid, qty in data["cart"]),
        )


def normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def field_matches(field_id: str, value: Any, target: str) -> bool:
    """Whether a form value counts as the target: text compares after trimming and
    collapsing spaces, ignoring case; the delivery and payment choices exactly."""
    if not isinstance(value, str):
        return False
    if field_id in ("delivery", "payment"):
        return value == target
    return normalise(value) == normalise(target)


@dataclass
class OrderEvaluation:
    """An order (or a cart and a checkout form) scored against the goal.

    Attributes:
        lines_met: per asked line, whether the order holds its product at its quantity.
        stray_lines: the names of products in the order that nobody asked for.
        fields_met: per form field (``FORM_FIELDS``), whether it holds the asked value.
    """

    lines_met: list[bool]
    stray_lines: list[str]
    fields_met: dict[str, bool] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return all(self.lines_met) and not self.stray_lines and all(self.fields_met.values())


def evaluate_order(
    goal: ShopGoal, lines: Sequence[Mapping[str, Any]], fields: Mapping[str, Any]
) -> OrderEvaluation:
    """Score order lines (``[{"product_id", "quantity"}]``) and form values."""
    quantities: dict[int, int] = {}
    for line in lines:
        quantities[line["product_id"]] = quantities.get(line["product_id"], 0) + line["quantity"]
    wanted = goal.wanted()
    names = {p.id: p.name for p in goal.products}
    return OrderEvaluation(
        lines_met=[quantities.get(line.product_id) == line.quantity for line in goal.lines],
        stray_lines=[names.get(pid, f"product {pid}") for pid in quantities if pid not in wanted],
        fields_met={f: field_matches(f, fields.get(f), goal.fields[f]) for f in FORM_FIELDS},
    )


def describe_line(goal: ShopGoal, line: Line) -> str:
    """The instruction's words for an asked line."""
    p = goal.products[line.product_id]
    if line.description == "named":
        return f'{line.quantity} x "{p.name}"'
    return f"{line.quantity} x the cheapest in-stock {p.type.lower()} by {p.brand}"


# -- generation ---------------------------------------------------------------------


@dataclass
class _Draft:
    """A product before ids are given (the catalogue is shuffled first)."""

    name: str
    brand: str
    type: str
    category: str
    price_cents: int
    in_stock: bool
    role: str = "filler"  # filler, target, distractor


def _price(rng: random.Random, low: int, high: int) -> int:
    """A shop-like price in ``low..high``: whole dollars minus a cent, or .49."""
    dollars = rng.randint(max(1, low // 100), max(1, high // 100))
    return dollars * 100 - rng.choice((1, 1, 51))


ProductType = tuple[str, str, int, int]


class _CatalogueDraft:
    """The products of a catalogue being drawn (unique names), before ids are given."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.drafts: list[_Draft] = []
        self.names: set[str] = set()

    def add(self, brand: str, model: str, kind: ProductType, price: int, stock: bool,
            role: str = "filler") -> _Draft:  # fmt: skip
        d = _Draft(f"{brand} {model} {kind[0]}", brand, kind[0], kind[1], price, stock, role)
        self.names.add(d.name)
        self.drafts.append(d)
        return d

    def free_model(self, brand: str, ptype: str) -> str:
        """A model word that gives a new name for this brand and type."""
        return self.rng.choice([m for m in MODELS if f"{brand} {m} {ptype}" not in self.names])

    def add_named(self, kind: ProductType, brand: str, distractors: int) -> _Draft:
        """A target asked by name, and look-alikes: its name with a variant word."""
        rng, (ptype, _category, low, high) = self.rng, kind
        model = self.free_model(brand, ptype)
        target = self.add(brand, model, kind, _price(rng, low, high), True, "target")
        for variant in rng.sample(VARIANTS, distractors):
            price = _price(rng, low, high)
            stock = rng.random() < 0.6
            self.add(brand, f"{model} {variant}", kind, price, stock, "distractor")
        return target

    def add_cheapest(self, kind: ProductType, brand: str, distractors: int) -> _Draft:
        """A target asked as the cheapest in-stock product of its type by its brand, and
        (in this order) a cheaper one of the brand out of stock, a cheaper one of another
        brand, a pricier one of the brand."""
        rng, (ptype, _category, low, high) = self.rng, kind
        # Room below the target's price for the cheaper distractors.
        price = _price(rng, low + (high - low) // 4, low + (high - low) // 2)
        target = self.add(brand, self.free_model(brand, ptype), kind, price, True, "target")
        below = price // 100 * 100 - 100
        plan = [
            (brand, _price(rng, low, below), False),
            (rng.choice([b for b in BRANDS if b != brand]), _price(rng, low, below), True),
            (brand, _price(rng, price // 100 * 100 + 200, high), True),
        ]
        for b, p, stock in plan[:distractors]:
            self.add(b, self.free_model(b, ptype), kind, p, stock, "distractor")
        return target

    def fill(self, size: int) -> None:
        """Random products up to ``size``, most in stock."""
        while len(self.drafts) < size:
            kind = self.rng.choice(PRODUCT_TYPES)
            brand = self.rng.choice(BRANDS)
            model = self.free_model(brand, kind[0])
            price = _price(self.rng, kind[2], kind[3])
            self.add(brand, model, kind, price, self.rng.random() < 0.8)

    def keep_cheapest(self, target: _Draft) -> None:
        """Fillers of the target's brand and type in stock cost more than it."""
        for d in self.drafts:
            same = d is not target and (d.brand, d.type) == (target.brand, target.type)
            if same and d.in_stock and d.price_cents <= target.price_cents:
                d.price_cents = target.price_cents + 100 * self.rng.randint(3, 40)


def generate_goal(seed: int, opts: Options) -> ShopGoal:
    """The catalogue and order for a seed; the same seed and options give the same goal."""
    rng = random.Random(seed)
    draft = _CatalogueDraft(rng)
    targets: list[tuple[_Draft, str]] = []
    for kind in rng.sample(PRODUCT_TYPES, opts.num_items):
        brand = rng.choice(BRANDS)
        description = rng.choice(DESCRIPTIONS)
        add = draft.add_named if description == "named" else draft.add_cheapest
        targets.append((add(kind, brand, opts.distractors), description))
    draft.fill(opts.catalogue_size)
    for target, description in targets:
        if description == "cheapest":
            draft.keep_cheapest(target)
    drafts = draft.drafts
    rng.shuffle(drafts)
    products = tuple(
        Product(i, d.name, d.brand, d.type, d.category, d.price_cents, d.in_stock)
        for i, d in enumerate(drafts)
    )
    index = {id(d): i for i, d in enumerate(drafts)}
    quantities = [rng.randint(1, opts.max_quantity) for _ in targets]
    lines = tuple(
        Line(index[id(t)], q, description)
        for (t, description), q in zip(targets, quantities, strict=True)
    )
    # Junk: in-stock products nobody asked for, look-alikes first.
    junk = [i for i, d in enumerate(drafts) if d.role != "target" and d.in_stock]
    rng.shuffle(junk)
    junk.sort(key=lambda i: drafts[i].role != "distractor")
    cart = tuple((i, rng.randint(1, 2)) for i in junk[: opts.cart_junk])
    fields = {
        "full_name": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
        "street": f"{rng.randint(2, 980)} {rng.choice(STREETS)}",
        "city": rng.choice(CITIES),
        "postcode": f"{rng.randint(10000, 99999)}",
        "delivery": rng.choice(DELIVERY_OPTIONS)[0],
        "payment": rng.choice(PAYMENT_METHODS),
    }
    return ShopGoal(products=products, lines=lines, fields=fields, cart=cart)
