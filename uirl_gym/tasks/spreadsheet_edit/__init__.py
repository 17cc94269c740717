r"""# SpreadsheetEdit: `uirl/SpreadsheetEdit-v0`

![A SpreadsheetEdit episode](../images/tasks/spreadsheet_edit.png)

A spreadsheet app like Google Sheets or Excel, with a grocery stock list. The
instruction asks for a mix of changes: cells set to values the agent computes from the
sheet, new rows with given values, and a sort by a column. The agent works the grid,
the menus and the keyboard. The result is scored, not the way there: the task compares
the final sheet with the goal sheet.

```python
import gymnasium as gym
import uirl_gym

env = gym.make("uirl/SpreadsheetEdit-v0")  # task id spreadsheet_edit, TimeLimit of 60 steps
obs, info = env.reset(seed=0, options={"split": "test"})
obs["instruction"]
# 'In the Stock sheet, set the Total of "Double cream" to its Quantity times its Unit
#  price; insert a row below "Apricots" with Item "Tomato sauce", Category "Pantry",
#  Quantity 6 and Unit price 4.69 (leave its Total empty); then sort the rows by
#  Quantity, largest first. Type plain numbers, not formulas, and change nothing else.'
```

## What it tests

- **Reading and computing.** A computed cell needs values from the sheet: a row's
  Total is its Quantity times its Unit price (`set the Total of "Pears" to its Quantity
  times its Unit price`), a Quantity plus or minus a delivery (`add 24 to the Quantity
  of "Oat milk"`, `subtract 7 from ...`), or a Unit price copied from another row,
  which may be far down the sheet (`set the Unit price of "Kale" to the Unit price of
  "Honey"`). Rows are named by their Item, never by a row number, because inserts and
  sorts move rows.
- **A spreadsheet's ways of working:**
  - click a cell to select it; typing replaces its value; Enter commits and moves
    down, Tab commits and moves right, Escape cancels. A double click, F2 or a click
    in the formula bar edits the current value. Delete or Backspace clears the cell;
  - the menu bar: *Edit* (Undo `ctrl+z`, Redo `ctrl+y`, Delete row, Clear cell),
    *Insert* (Row above, Row below: next to the selected cell's row), *Data* (*Sort
    sheet by column C (A to Z)* and *(Z to A)*: by the selected cell's column; clicking
    a column letter selects the column). *File*, *View*, *Help* and some items are
    greyed out;
  - a context menu on a right click on a cell or a row number: *Insert 1 row above*,
    *Insert 1 row below*, *Delete row*, *Clear cell*;
  - a long sheet: row 1 (the header) stays frozen, about 23 data rows fit on the
    screen, and the rest needs scrolling (the mouse wheel over the grid).
- **Sorting.** The header row never moves. Numbers sort by value, before text; text
  ignores case; blank cells go last either way. The sort is asked last, so the goal
  sheet is fully sorted, and the sort column never has ties (the goal has one order).
- **Distractors.** Some rows besides the targets have a blank Total too, rows whose
  name shares a word with a target first ("Green apples" next to "Red apples"). The
  instruction does not ask to fill them: filling them is a stray change.
- **Leaving the rest alone.** Any other change is charged while it stays: a changed
  cell (the header and the empty columns F to H included), a deleted row, a row nobody
  asked for, and, when no sort is asked, rows out of their original order. Undo takes
  them back.

Each episode is seeded: which items the sheet lists (from a catalogue of 93 grocery
items in 7 categories), their quantities and prices, which cells, rows and sort the
instruction asks for. Quantities and prices are unique within a sheet. Nothing is
fetched from the network.

## Options (`env.reset(options=...)` or `gym.make(..., default_options=...)`)

| option | default | range | effect |
| --- | --- | --- | --- |
| `num_edits` | 3 | 1..6 | How many changes the instruction asks for (computed cells, inserted rows and a sort together). |
| `rows` | 30 | 8..60 | Data rows in the sheet. More than 23 need scrolling. |
| `operations` | `["compute", "insert", "sort"]` | a non-empty list of those names | The kinds the mix is drawn from. At most one sort, three inserts and six computed cells per episode. When `num_edits` is at least the number of kinds, each kind comes up at least once. |
| `distractors` | 2 | 0..5 | Rows besides the targets whose Total is blank. |
| `split` | the env's | `train`, `test` | Which range of task seeds the episode comes from (the env's option, as for every task). |

A bad option raises `TaskOptionsError` (a `ValueError`) in `env.reset`, before any
request reaches the server. The message says what was expected, e.g.
`rows: must be an integer in 8..60, got 61` or
`num_edits: at most 1 with operations ['sort'] (one sort, three inserts, six computed cells), got 2`.

## Record and reward

After every change (a committed edit, an insert, a delete, a sort, an undo or redo,
a cleared cell) the app records the whole sheet with `window.uirlRecord({type:
"sheet", header, rows})`. Every data row carries a stable id, kept through sorts and
undo; inserted rows get new ids. `/progress` scores the recorded sheet against the
goal (`uirl_gym.tasks.spreadsheet_edit.data.evaluate`):

- `goals`: each goal's kind (`compute`, `insert`, `sort`), in the order of `met`;
- `met`: per goal, whether the sheet meets it now. A computed cell is met when the
  row's cell holds the value. An inserted row is met when a new row holds exactly the
  given values (Total and F to H empty) right above or below the named row (anywhere
  when a sort is asked, since the sort places it). The sort is met when the data rows
  are in its order;
- `num_stray` and `stray` (the first 10, one line each, e.g. `'Kale' Unit price
  changed`, `row 'Cola' deleted`, `extra row 14`, `rows reordered`);
- `num_changes`: how many changes the app has recorded.

Cells compare after trimming spaces. In the number columns (Quantity, Unit price,
Total) a number matches within half a cent (`5.4` is `5.40`); a formula such as
`=C5*D5` is text, not a number, and does not match. Text compares exactly (case counts).

The score of a record is `correct_goal` (1.0) per goal met minus `stray_change` (0.5)
per stray change. The sparse reward of a step is the change of that score: undoing a
mistake refunds its charge, and a goal met and then broken again is paid back. The
episode terminates when every goal is met; `is_success` needs, in addition, no stray
change at that moment. Dense mode (`reward_mode="dense"`) adds the change of a
potential: `dense_goal` (0.1) per goal the page's sheet meets, `dense_pending` (0.05)
per unmet computed cell whose open editor holds the right value, and `dense_cell`
(0.02) per given value (Item, Category, Quantity, Unit price) already right in a row
inserted for an unmet insert. Refused actions cost `invalid_action` (0.1). All weights:
`uirl_gym.tasks.spreadsheet_edit.score.RewardConfig`. Info on every step:
`is_success`, `num_met`, `num_stray`, `progress`; reset info has `goals`.

## Expert

`uirl_gym.tasks.spreadsheet_edit.expert.SpreadsheetEditExpert` plans from
`env.unwrapped.oracle()` (the goal, the page's sheet with row ids, the open editor and
menus, and element boxes: cells of the visible rows, row numbers, column letters,
menu items) and acts only with clicks, right clicks, typing, keys and the mouse wheel.
It scores the page's sheet with the task's own `evaluate` and fixes what is wrong, in
this order:

1. an editor it did not leave open: Escape;
2. a deleted row, or rows out of order when no sort is asked: `ctrl+z` (nothing else
   can restore them);
3. rows nobody asked for: right click on the row number, *Delete row*;
4. changed cells: typed back (or cleared with Delete);
5. computed cells: click the cell, type the value and Enter;
6. inserted rows: select a cell of the named row, then *Insert > Row above/below* (or
   the row number's context menu, for odd anchor rows), then type the row's values in
   one go with Tab between cells (`Cola\tDrinks\t12\t3.85\n`);
7. the sort: click the column letter, *Data*, *Sort sheet by column ...*.

It re-plans after each macro (one or two actions), so it recovers from whatever the
page shows, and scrolls a row into view before it clicks it.

## Baselines (test split, default options)

| agent | success | mean steps |
| --- | --- | --- |
| `SpreadsheetEditExpert` | 1.00 (20 episodes) | 9.7 |
| `RandomPolicy(seed=0)` | 0.00 (10 episodes; 4 to 11 stray changes each) | 60 (the time limit) |

Measured on 2026-11-24 with `python scripts/task_report.py --task spreadsheet_edit --episodes 20
--random-episodes 10`: episode `k` is `reset(seed=k)` on the test split with the
default options, at most 60 steps (the same run writes this task's row in
docs/tasks.md). Other options: the env's `reset(options=...)`.

The picture above is test-split episode 0 (default options) at reset, as
`scripts/task_report.py` makes it.

The tests (`tests/test_task_spreadsheet_edit.py`) check that the expert solves 20
test-split episodes of three changes each (every kind of computed cell, inserts above
and below, sorts both ways; every fourth sheet long enough to scroll), that stray
changes made through the menus (a sort, a deleted row, a changed cell) are charged and
refunded by undo, and that the expert still succeeds after random actions.

## Episode end

- **Terminated** when every goal of the instruction is met by the sheet: the step that completes it.

## Version history

- `v0` (2026-11-24): the first version.
"""

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.spreadsheet_edit import score
from uirl_gym.tasks.spreadsheet_edit.expert import SpreadsheetEditExpert
from uirl_gym.tasks.spreadsheet_edit.task import SpreadsheetEditTask

TASK_SPEC = TaskSpec(
    name="spreadsheet_edit",
    env_id="uirl/SpreadsheetEdit-v0",
    task=SpreadsheetEditTask,
    rewards=score.RewardConfig,
    scorer=score.SpreadsheetEditScorer,
    check_options=score.check_options,
    expert=SpreadsheetEditExpert,
    doc=__doc__,
)
