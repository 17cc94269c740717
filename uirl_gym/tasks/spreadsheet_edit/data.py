"""Seeded stock sheets, the edits an episode asks for, and how a sheet is scored.

A sheet is a grocery stock list: a header row (Item, Category, Quantity, Unit price,
Total, then three empty columns) and data rows with a stable ``id`` (the app keeps it
through sorts, inserts and undo; inserted rows get new ids). An episode asks for a mix
of *operations*:

- ``compute``: change a cell to a value computed from the sheet (a row's Total from its
  Quantity and Unit price, a Quantity plus or minus a delivery, a Unit price copied
  from another row);
- ``insert``: a new row with given values above or below a named row;
- ``sort``: the data rows sorted by a column (last, so the result is fully sorted).

The goal is a sheet; :func:`evaluate` scores any sheet against it (which goals are
met, which other changes were made), so the way the agent got there does not matter.
Everything here is pure and deterministic for a seed; the task, the scorer and the
expert all score with :func:`evaluate`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uirl_gym.tasks.base import TaskOptionsError, check_option_names, int_option

COLUMNS = ("A", "B", "C", "D", "E", "F", "G", "H")
HEADER = ("Item", "Category", "Quantity", "Unit price", "Total", "", "", "")
ITEM, CATEGORY, QUANTITY, PRICE, TOTAL = range(5)
NUMERIC_COLUMNS = frozenset({QUANTITY, PRICE, TOTAL})
OPERATIONS = ("compute", "insert", "sort")
# At most this many of each operation per episode (one sort: a second would undo it).
MAX_PER_OPERATION = {"compute": 6, "insert": 3, "sort": 1}
SORT_COLUMNS = (ITEM, QUANTITY, PRICE)
MAX_ROWS = 60
MIN_ROWS = 8
DEFAULT_ROWS = 30
MAX_EDITS = 6
DEFAULT_EDITS = 3
MAX_DISTRACTORS = 5
DEFAULT_DISTRACTORS = 2
OPTION_NAMES = frozenset({"num_edits", "rows", "operations", "distractors"})
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")

# (item, category): families share a word ("Oat milk", "Whole milk") so that a row
# next to the one asked for looks alike.
CATALOGUE = tuple(
    (item, category)
    for category, items in (
        ("Fruit", "Red apples, Green apples, Pears, Plums, Bananas, Lemons, Limes, Oranges, "
                  "Blood oranges, Kiwis, Mangoes, Red grapes, Green grapes, Peaches, Apricots, "
                  "Cherries, Strawberries, Blueberries, Raspberries, Watermelon"),
        ("Vegetables", "Carrots, Red onions, White onions, Spring onions, Potatoes, "
                       "Sweet potatoes, Red peppers, Green peppers, Broccoli, Cauliflower, "
                       "Spinach, Kale, Leeks, Celery, Cucumbers, Cherry tomatoes, Garlic"),
        ("Dairy", "Whole milk, Skim milk, Oat milk, Almond milk, Butter, Cheddar cheese, "
                  "Goat cheese, Cream cheese, Greek yogurt, Plain yogurt, Double cream, "
                  "Sour cream, Free-range eggs"),
        ("Bakery", "White bread, Rye bread, Sourdough bread, Bagels, Croissants, "
                   "Blueberry muffins, Pita bread, Tortillas, Oat cookies"),
        ("Pantry", "Basmati rice, Brown rice, Penne pasta, Spaghetti, Olive oil, Sunflower oil, "
                   "Rolled oats, Plain flour, Brown sugar, White sugar, Honey, Peanut butter, "
                   "Tomato sauce, Black beans, Chickpeas, Red lentils, Sea salt, Black pepper"),
        ("Drinks", "Apple juice, Orange juice, Sparkling water, Still water, Green tea, "
                   "Black tea, Ground coffee, Coffee beans, Lemonade, Cola"),
        ("Frozen", "Frozen peas, Frozen berries, Vanilla ice cream, Chocolate ice cream, "
                   "Fish fingers, Frozen pizza"),
    )
    for item in items.split(", ")
)  # fmt: skip


@dataclass(frozen=True)
class Options:
    """An episode's difficulty (reset options). See docs/tasks/spreadsheet_edit.md.

    Attributes:
        num_edits: how many operations the instruction asks for (1..6).
        rows: data rows in the sheet (8..60; more than 23 need scrolling).
        operations: the kinds the mix is drawn from (``compute``, ``insert``, ``sort``).
        distractors: rows besides the targets whose Total is blank too, look-alike names
            first (0..5).
    """

    num_edits: int = DEFAULT_EDITS
    rows: int = DEFAULT_ROWS
    operations: tuple[str, ...] = OPERATIONS
    distractors: int = DEFAULT_DISTRACTORS


def parse_options(options: Mapping[str, Any]) -> Options:
    """Checked reset options, defaults filled in.

    Raises:
        TaskOptionsError: an unknown option, a value of the wrong type or range, or more
            edits than the chosen operations allow.
    """
    check_option_names(options, OPTION_NAMES)
    num_edits = int_option(options, "num_edits", DEFAULT_EDITS, 1, MAX_EDITS)
    rows = int_option(options, "rows", DEFAULT_ROWS, MIN_ROWS, MAX_ROWS)
    distractors = int_option(options, "distractors", DEFAULT_DISTRACTORS, 0, MAX_DISTRACTORS)
    operations = options.get("operations", OPERATIONS)
    if (
        isinstance(operations, str)
        or not isinstance(operations, Sequence)
        or not operations
        or any(op not in OPERATIONS for op in operations)
        or len(set(operations)) != len(operations)
    ):
        raise TaskOptionsError(
            f"operations: must be a non-empty list of distinct names from {list(OPERATIONS)}, "
            f"got {operations!r}"
        )
    operations = tuple(op for op in OPERATIONS if op in operations)
    capacity = sum(MAX_PER_OPERATION[op] for op in operations)
    if num_edits > capacity:
        raise TaskOptionsError(
            f"num_edits: at most {capacity} with operations {list(operations)} (one sort, "
            f"three inserts, six computed cells), got {num_edits}"
        )
    return Options(num_edits=num_edits, rows=rows, operations=operations, distractors=distractors)


def cents_text(cents: int) -> str:
    """An amount of money as the sheet writes it: ``12.40``."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def parse_number(text: str) -> float | None:
    """A cell's number (plain digits with an optional sign and decimal point), or None."""
    text = text.strip()
    return float(text) if _NUMBER.match(text) else None


def cell_matches(column: int, value: str, target: str) -> bool:
    """Whether a cell's text counts as the target value.

    Text compares after trimming surrounding spaces (case counts). In the number
    columns (Quantity, Unit price, Total) a number matches when it is within half a cent
    (``5.4`` is ``5.40``); an empty target wants an empty cell.
    """
    value, target = value.strip(), target.strip()
    if column in NUMERIC_COLUMNS and target:
        number, wanted = parse_number(value), parse_number(target)
        return number is not None and wanted is not None and abs(number - wanted) < 0.005
    return value == target


@dataclass(frozen=True)
class Edit:
    """A computed cell: ``row_id``'s cell ``column`` must read ``value``.

    ``kind`` is ``total`` (Quantity x Unit price), ``add``/``remove`` (Quantity plus or
    minus ``amount``) or ``copy`` (the Unit price of row ``source_id``).
    """

    kind: str
    row_id: int
    column: int
    value: str
    amount: int = 0
    source_id: int = -1


@dataclass(frozen=True)
class Insert:
    """A new row with ``cells`` right ``side`` (``above``/``below``) the row ``anchor_id``."""

    anchor_id: int
    side: str
    cells: tuple[str, ...]


@dataclass(frozen=True)
class Sort:
    column: int
    descending: bool


@dataclass(frozen=True)
class SheetGoal:
    """One episode's sheet and what it asks for (JSON: :meth:`to_json`/:meth:`from_json`).

    Attributes:
        rows: the starting data rows (ids ``0..n-1``, in order), each 8 cells.
        edits, inserts, sort: the goals.
    """

    rows: tuple[tuple[str, ...], ...]
    edits: tuple[Edit, ...] = ()
    inserts: tuple[Insert, ...] = ()
    sort: Sort | None = None

    @property
    def num_goals(self) -> int:
        return len(self.edits) + len(self.inserts) + (self.sort is not None)

    def goal_kinds(self) -> list[str]:
        """Each goal's operation, in :func:`evaluate`'s order."""
        return (
            ["compute"] * len(self.edits)
            + ["insert"] * len(self.inserts)
            + ["sort"] * (self.sort is not None)
        )

    def wanted(self, row_id: int) -> tuple[str, ...]:
        """An original row's cells as the goal wants them."""
        cells = list(self.rows[row_id])
        for e in self.edits:
            if e.row_id == row_id:
                cells[e.column] = e.value
        return tuple(cells)

    def goal_rows(self) -> list[tuple[str, ...]]:
        """The goal sheet's data rows, in order."""
        order: list[tuple[str, ...]] = []
        for row_id in range(len(self.rows)):
            above = [i.cells for i in self.inserts if i.anchor_id == row_id and i.side == "above"]
            below = [i.cells for i in self.inserts if i.anchor_id == row_id and i.side == "below"]
            order += [*above, self.wanted(row_id), *below]
        return sort_rows(order, self.sort) if self.sort is not None else order

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [list(r) for r in self.rows],
            "edits": [vars(e) for e in self.edits],
            "inserts": [{**vars(i), "cells": list(i.cells)} for i in self.inserts],
            "sort": vars(self.sort) if self.sort else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SheetGoal:
        return cls(
            rows=tuple(tuple(r) for r in data["rows"]),
            edits=tuple(Edit(**e) for e in data["edits"]),
            inserts=tuple(Insert(**{**i, "cells": tuple(i["cells"])}) for i in data["inserts"]),
            sort=Sort(**data["sort"]) if data["sort"] else None,
        )


def sort_key(text: str) -> tuple[int, float, str]:
    """The app's sort order (ascending): numbers, then text (ignoring case), blanks last."""
    text = text.strip()
    if not text:
        return (2, 0.0, "")
    number = parse_number(text)
    return (0, number, "") if number is not None else (1, 0.0, text.lower())


def sort_rows(rows: Sequence[Sequence[str]], sort: Sort) -> list[tuple[str, ...]]:
    """Rows in ``sort``'s order as the app sorts them: stable, blanks last either way."""
    filled = [tuple(r) for r in rows if r[sort.column].strip()]
    blank = [tuple(r) for r in rows if not r[sort.column].strip()]
    ordered = sorted(filled, key=lambda r: sort_key(r[sort.column]), reverse=sort.descending)
    return ordered + blank


def is_sorted(rows: Sequence[Sequence[str]], sort: Sort) -> bool:
    """Whether data rows are in ``sort``'s order (blanks last either way)."""
    keys = [sort_key(r[sort.column]) for r in rows]
    for a, b in zip(keys, keys[1:], strict=False):
        if a[0] == 2 or b[0] == 2:
            if a[0] == 2 and b[0] != 2:
                return False
            continue
        if (a > b) if not sort.descending else (a < b):
            return False
    return True


@dataclass
class Evaluation:
    """A sheet scored against the goal.

    Attributes:
        met: per goal (edits, inserts, then the sort), whether the sheet meets it.
        stray: the sheet's other changes, one line each (changed cells, deleted rows,
            rows nobody asked for, the original order broken when no sort was asked).
        candidates: per insert goal, the id of the inserted row taken for it (the one
            in the right place with the most right cells), or None.
    """

    met: list[bool]
    stray: list[str]
    candidates: list[int | None] = field(default_factory=list)


def evaluate(
    goal: SheetGoal, header: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> Evaluation:
    """Score a sheet (its header and ``[{"id", "cells"}]`` data rows) against ``goal``."""
    n = len(goal.rows)
    stray = [
        f"header {COLUMNS[c]} changed" for c, text in enumerate(header) if text.strip() != HEADER[c]
    ]
    present = {r["id"]: r for r in rows if r["id"] < n}
    targets = {(e.row_id, e.column) for e in goal.edits}
    for row_id in range(n):
        name = goal.rows[row_id][ITEM]
        if row_id not in present:
            stray.append(f"row {name!r} deleted")
            continue
        wanted = goal.wanted(row_id)
        cells = present[row_id]["cells"]
        stray += [
            f"{name!r} {HEADER[c] or COLUMNS[c]} changed"
            for c in range(len(COLUMNS))
            if (row_id, c) not in targets and not cell_matches(c, cells[c], wanted[c])
        ]
    met = [
        e.row_id in present
        and cell_matches(e.column, present[e.row_id]["cells"][e.column], e.value)
        for e in goal.edits
    ]
    candidates = _insert_candidates(goal, rows)
    for ins, candidate in zip(goal.inserts, candidates, strict=True):
        cells = next((r["cells"] for r in rows if r["id"] == candidate), None)
        met.append(cells is not None and _row_matches(cells, ins.cells))
    taken = set(candidates)
    stray += [
        f"extra row {i + 2}" for i, r in enumerate(rows) if r["id"] >= n and r["id"] not in taken
    ]
    if goal.sort is not None:
        met.append(is_sorted([r["cells"] for r in rows], goal.sort))
    else:
        order = [r["id"] for r in rows if r["id"] < n]
        if order != sorted(order):
            stray.append("rows reordered")
    return Evaluation(met=met, stray=stray, candidates=candidates)


def _row_matches(cells: Sequence[str], wanted: Sequence[str]) -> bool:
    return all(cell_matches(c, cells[c], wanted[c]) for c in range(len(COLUMNS)))


def _insert_candidates(goal: SheetGoal, rows: Sequence[Mapping[str, Any]]) -> list[int | None]:
    n = len(goal.rows)
    taken: set[int] = set()
    out: list[int | None] = []
    for ins in goal.inserts:
        best, best_score = None, -1
        for i, r in enumerate(rows):
            if r["id"] < n or r["id"] in taken:
                continue
            if goal.sort is None:
                # Right below the anchor (for "below") or right above it (for "above").
                j = i - 1 if ins.side == "below" else i + 1
                if not 0 <= j < len(rows) or rows[j]["id"] != ins.anchor_id:
                    continue
            score = sum(cell_matches(c, r["cells"][c], ins.cells[c]) for c in range(len(COLUMNS)))
            if score > best_score:
                best, best_score = r["id"], score
        if best is not None:
            taken.add(best)
        out.append(best)
    return out


# -- generation ---------------------------------------------------------------------


def generate_goal(seed: int, opts: Options) -> SheetGoal:
    """The sheet and goals for a seed; the same seed and options give the same goal."""
    rng = random.Random(seed)
    for _ in range(100):
        goal = _draw(rng, opts)
        if goal is not None:
            return goal
    raise AssertionError(f"no valid sheet for seed {seed} after 100 draws")  # pragma: no cover


def _plan_operations(rng: random.Random, opts: Options) -> list[str]:
    kinds = list(opts.operations)
    plan = kinds if opts.num_edits >= len(kinds) else rng.sample(kinds, opts.num_edits)
    plan = list(plan)
    while len(plan) < opts.num_edits:
        open_kinds = [k for k in kinds if plan.count(k) < MAX_PER_OPERATION[k]]
        plan.append(rng.choice(open_kinds))
    return plan


def _draw(rng: random.Random, opts: Options) -> SheetGoal | None:
    """One attempt; None when no anchors fit or the sheet is already in the sort's order."""
    plan = _plan_operations(rng, opts)
    n_inserts = plan.count("insert")
    names = rng.sample(CATALOGUE, opts.rows + n_inserts)
    sheet_items, new_items = names[: opts.rows], names[opts.rows :]
    quantities = rng.sample(range(3, 250), opts.rows + n_inserts)
    prices = rng.sample(range(49, 2000), opts.rows + n_inserts)
    rows = [
        [
            item,
            cat,
            str(quantities[i]),
            cents_text(prices[i]),
            cents_text(quantities[i] * prices[i]),
        ]
        + [""] * 3
        for i, (item, cat) in enumerate(sheet_items)
    ]
    n = opts.rows
    edit_rows = rng.sample(range(n), plan.count("compute"))
    edits = [_draw_edit(rng, rows, row_id, edit_rows) for row_id in edit_rows]
    for e in edits:
        rows[e.row_id][TOTAL] = ""
    # Distractors: other rows with a blank Total, look-alike names first.
    words = {w.lower() for e in edits for w in rows[e.row_id][ITEM].split()}
    others = [i for i in range(n) if i not in edit_rows]
    rng.shuffle(others)
    others.sort(key=lambda i: not words & {w.lower() for w in rows[i][ITEM].split()})
    for i in others[: opts.distractors]:
        rows[i][TOTAL] = ""
    anchors = _draw_anchors(rng, n, n_inserts)
    if anchors is None:
        return None
    inserts = [
        Insert(
            anchor_id=a,
            side=rng.choice(("above", "below")),
            cells=(item, cat, str(quantities[n + k]), cents_text(prices[n + k]), "", "", "", ""),
        )
        for k, (a, (item, cat)) in enumerate(zip(anchors, new_items, strict=True))
    ]
    goal = SheetGoal(rows=tuple(tuple(r) for r in rows), edits=tuple(edits), inserts=tuple(inserts))
    if "sort" not in plan:
        return goal
    # A column without ties, so that the goal has one order.
    final = goal.goal_rows()
    columns = [c for c in SORT_COLUMNS if len({r[c] for r in final}) == len(final)]
    sort = Sort(column=rng.choice(columns), descending=rng.random() < 0.5)
    if is_sorted(goal.rows, sort):
        return None
    return SheetGoal(rows=goal.rows, edits=goal.edits, inserts=goal.inserts, sort=sort)


def _draw_edit(rng: random.Random, rows: list[list[str]], row_id: int, targets: list[int]) -> Edit:
    row = rows[row_id]
    quantity = int(row[QUANTITY])
    kind = rng.choice(("total", "total", "add", "remove", "copy"))
    if kind == "total":
        cents = round(float(row[PRICE]) * 100)
        return Edit("total", row_id, TOTAL, cents_text(quantity * cents))
    if kind == "copy":
        source = rng.choice([i for i in range(len(rows)) if i not in targets])
        return Edit("copy", row_id, PRICE, rows[source][PRICE], source_id=source)
    if kind == "remove" and quantity > 3:
        amount = rng.randint(1, min(quantity - 1, 60))
        return Edit("remove", row_id, QUANTITY, str(quantity - amount), amount=amount)
    amount = rng.randint(5, 60)
    return Edit("add", row_id, QUANTITY, str(quantity + amount), amount=amount)


def _draw_anchors(rng: random.Random, n: int, count: int) -> list[int] | None:
    """Anchor rows at least two apart, so that no two inserts compete for one gap."""
    for _ in range(50):
        anchors = rng.sample(range(n), count)
        ordered = sorted(anchors)
        if all(b - a >= 2 for a, b in zip(ordered, ordered[1:], strict=False)):
            return anchors
    return None
