"""# FormFill (`uirl/FormFill-v0`, task id `form_fill`)

![A FormFill episode: the letter on the left, the claim form on the right with the calendar open](../images/tasks/form_fill.png)

The left half of the screen shows a policyholder's claim letter; the right half shows
an insurance claim form. The agent fills the form from the letter and submits it.

## What it tests

- **Reading a document for values in its own wording.** The letter gives the phone in
  one of several styles (`(580) 971-5947`, `580.971.5947`, `+1 580 971 5947`,
  `5809715947`...). The form wants `NNN-NNN-NNNN`, and the instruction says so. The
  incident date is written out (`8 February 2024`). The claim type, the preferred
  contact and the enclosed documents are given in sentences.
- **Distractors.** The letter has decoy sentences with values of the same kinds: a
  partner's phone, a closed policy number, an earlier claim's date, an old email address,
  and another claim type.
- **Widgets that agents get wrong:**
  - text inputs;
  - a custom dropdown (claim type), a listbox that opens on click and also works with
    the arrow keys and Enter. It is not a native `<select>`. (A check with Chromium
    156 in Playwright's headless mode found that a native popup does appear in CDP
    captures. The page draws its own listbox anyway, because that is how most web apps
    build dropdowns, and because it does not depend on how the browser draws popups.);
  - a calendar date picker. It opens on the letter's month ("today" is outlined), and
    ‹ › step one month at a time. The incident is 3 to 110 days before the letter, so
    the agent usually has to go back a few months. Typing `MM/DD/YYYY` (or ISO
    `YYYY-MM-DD`) into the field also works;
  - radio buttons (preferred contact);
  - checkboxes (documents enclosed: tick exactly the enclosed ones).
- **Recovering from validation errors.** With `validation` on, Submit refuses the form
  and shows messages under the fields. It refuses an empty required field, a phone that
  is not `NNN-NNN-NNNN`, an email that is not an address, and a date it cannot read. The
  agent must fix the fields and submit again.

The form fits on the 1280x800 screen without scrolling at every difficulty. The data is
seeded, and nothing is fetched from the network.

Instruction (the sentences about the phone, the date and the documents appear only when
their fields are on the form):

> Fill in the insurance claim form on the right with the policyholder's details from the
> letter on the left, then submit it. Enter the phone number as NNN-NNN-NNNN (e.g.
> 555-123-4567). Pick the date of the incident in the calendar or type it as
> MM/DD/YYYY. Tick exactly the documents the letter says are enclosed.

## Options (`env.reset(options=...)` or `gym.make(..., default_options=...)`)

| option | default | range | effect |
|---|---|---|---|
| `num_fields` | 8 | 3..8 | How many of the form's fields are shown and asked for. The subset is drawn per episode from: full name, policy number, email, phone, claim type (dropdown), date of incident (calendar), preferred contact (radios) and documents enclosed (checkboxes), and it stays in that order. |
| `distractors` | 2 | 0..4 | How many decoy sentences the letter has. |
| `validation` | `true` | bool | With `true`, the form checks formats and refuses bad submissions (see above). With `false`, every submission is recorded and scored. |
| `split` | the env's | `train`, `test` | Which range of task seeds the episode comes from (the env's option, as for every task). |

An unknown option, or a value of the wrong type or out of range, raises
`TaskOptionsError` (a `ValueError`) in `env.reset`, before any request reaches the
server. The message names the option, the allowed range and the value given, e.g.
`num_fields: must be an integer in 3..8, got 2`.

## Record, reward and success

The task records every **submission** with its field values and with whether each field
matches the target. A submission is **correct** when every field matches. A field
matches its target under these rules (`uirl_gym.tasks.form_fill.data.field_matches`):

- text is compared after trimming surrounding whitespace;
- the name must have the same case; the email and the policy number may differ in case;
- the phone must be exactly `NNN-NNN-NNNN`;
- the date may be in either format the field accepts (`MM/DD/YYYY` or `YYYY-MM-DD`), but
  it must be the right day;
- the claim type and the preferred contact must be the target's option;
- the documents must be exactly the set the letter encloses.

A submission that validation **refuses** is not a submission: it is counted in
`num_refused_submissions` and `info["num_refused"]` for analysis, and it is never
charged. The agent sees the error messages instead.

| event | sparse reward (`RewardConfig`) |
|---|---|
| the first correct submission | `+correct_submission` (1.0); the episode terminates |
| a recorded submission with a wrong field | `-wrong_submission` (1.0) each; the page then shows the confirmation with "Edit your response", which goes back to the form with its values kept |
| a refused submission (validation) | 0 |
| an invalid action | `-invalid_action` (0.1) |

Success: `info["is_success"]` is true when a correct submission came with no wrong one
before it. `info` also has `num_wrong`, `num_refused` and `progress` (the task's
counts).

Dense mode (`reward_mode="dense"`): the potential is `dense_field` (0.1) times the number
of fields that hold their target value now, matched by the same rules. The reward adds
the potential's change over each step, on top of the sparse reward.

## Expert and random agent (test split, default difficulty)

`uirl_gym.tasks.form_fill.expert.FormFillExpert` plans from `env.unwrapped.oracle()`
and acts only through pixel actions: `left_click`, `keys`, and `type`. Each time, it
takes the first field in form order that does not hold its target and plans a short
macro for it:

- a text field: click, `ctrl+a`, then type the normalised value;
- the dropdown: open it, then click the option;
- the calendar: open it, step one month per click, then click the day;
- a radio button: click it;
- checkboxes: click each one that is wrong.

Then it plans again. An open popup that it no longer needs is closed with `Escape`.
After a wrong submission, it clicks "Edit your response". Once every field holds its
target, it clicks Submit.

| agent | episodes | success | mean steps |
|---|---|---|---|
| expert | 20 | 20/20 (100%) | 17.9 |
| random (`uirl_agents.policies.random.RandomPolicy`, 60-step limit) | 20 | 0/20 (0%) | 60.0 (every episode hit the limit) |

Measured with `python scripts/task_report.py --task form_fill --episodes 20
--random-episodes 20`: episode `k` is `reset(seed=k)` on the test split with the
default options, at most 60 steps (the same run writes this task's row in
docs/tasks.md). Other options: the env's `reset(options=...)`.

The tests (`tests/test_task_form_fill.py`) run the expert on 20 test-split episodes
with 3 fields each (so that they stay fast) and check that it solves all of them and
that every widget comes up across those episodes.

## Screenshot

`docs/images/tasks/form_fill.png` is test-split episode 0 at the default difficulty,
with the expert paused on the calendar:

```python
import gymnasium as gym
from PIL import Image

import uirl_gym  # noqa: F401
from uirl_gym.tasks.form_fill.expert import FormFillExpert

env = gym.make("uirl/FormFill-v0", split="test")
obs, info = env.reset(seed=0)  # default difficulty: 8 fields, 2 distractors, validation
expert = FormFillExpert()
while not (oracle := env.unwrapped.oracle())["calendar"]["open"]:  # fill up to the date
    obs, *_ = env.step(expert.next_action(oracle))
obs, *_ = env.step(expert.next_action(oracle))  # one month back in the calendar
Image.fromarray(obs["screenshot"]).quantize(64).save(
    "docs/images/tasks/form_fill.png", optimize=True
)
env.close()
```

## Oracle (for experts and tests)

`env.unwrapped.oracle()` holds:

- `fields` and `targets`: target values as the form submits them. Dates are ISO, and the
  documents are a list;
- `submissions`: each one's values, matches and `correct`;
- `view` (`form` or `done`) and `form_values`: what each field holds now;
- `controls`: the box of each input, and each radio button's and checkbox's box and
  checked state;
- `dropdown`: whether it is open, and the option boxes;
- `calendar`: whether it is open, the month shown, the ‹ › boxes and a box for each day;
- `errors`: the validation messages shown;
- `submit_button` and `edit_link`: their boxes.

Boxes are `[x, y, width, height]` in screen pixels.

## Episode end

- **Terminated** when a submission holds every field's target value (refused and wrong submissions do not end it): the step that completes it.

## Version history

- `v0` (2026-11-23): the first version.
"""

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.form_fill import score
from uirl_gym.tasks.form_fill.expert import FormFillExpert
from uirl_gym.tasks.form_fill.task import FormFillTask

TASK_SPEC = TaskSpec(
    name="form_fill",
    env_id="uirl/FormFill-v0",
    task=FormFillTask,
    rewards=score.RewardConfig,
    scorer=score.FormFillScorer,
    check_options=score.check_options,
    expert=FormFillExpert,
    doc=__doc__,
)
