'''# SettingsNav: `uirl/SettingsNav-v0`

![A SettingsNav episode](../images/tasks/settings_nav.png)

A settings application like an OS's or a SaaS product's: find the settings an
instruction names, which live in nested tabs, behind a "more" menu and in dialogs, set
them to the asked values with custom controls, and save, without touching anything
else.

```python
import gymnasium as gym
import uirl_gym

env = gym.make("uirl/SettingsNav-v0")  # task id settings_nav, TimeLimit of 60 steps
obs, info = env.reset(seed=0, options={"split": "test"})
obs["instruction"]
# 'In the Settings app, turn on "Email notifications", turn off "Spell check" and set
#  "Billing cycle" to "Monthly". Save your changes; do not change any other setting.'
```

## What it tests

- **Navigation**: a sidebar of six sections (Account, Security, Notifications, Display,
  Language & region, Privacy); each has two or three tabs; the section's "more" menu
  (the ⋮ button) has *Advanced settings…* (a modal dialog with two more settings and
  OK / Cancel), *Restore defaults…* (a confirm dialog: a trap, it resets the whole
  section's pending values) and *Export settings*.
- **Controls**: toggles, radio groups (segmented buttons), custom dropdowns (a listbox
  drawn by the page: Chromium's native `<select>` popup is not in headless screenshots),
  number fields with a unit (validated on save and on OK: "Enter a whole number from 5
  to 240"), and text values edited in their own dialog (*Edit* → input → OK / Cancel).
- **Saving**: changes are pending until the section's *Save changes* button. Tabs
  share the section's pending changes; the advanced dialog's OK applies its values to
  the section (still unsaved). Leaving a section with pending changes asks *Discard
  unsaved changes?* (*Discard* drops them, *Keep editing* stays). Only saved values
  count.
- **Reading carefully**: names look alike across sections ("Session timeout", "Idle
  timeout"; "Default language", "Keyboard language", "Email language"; "Login alerts",
  "Session alerts"), and the task charges for changing the wrong one.

Each episode is seeded: which settings each section shows and in which tab or dialog,
their current values and defaults, the targets and their values. Setting names are
fixed (the catalogue in `uirl_gym/tasks/settings_nav/data.py`, 72 settings).

## Options (`reset(options=...)`)

| option | meaning | values | default |
| --- | --- | --- | --- |
| `num_targets` | settings the instruction asks to change (at most 2 per section, names sharing no word) | 1..5 | 3 |
| `depth` | the deepest place a target may live: 1 the section's first tab (shown on opening it), 2 any tab, 3 also the advanced dialog | 1..3 | 3 |
| `distractors` | `true`: settings whose names share a word with a target's are always placed; `false`: they are left out | bool | `true` |
| `settings_per_tab` | at most this many settings per tab (clutter) | 2..5 | 4 |
| `split` | env option: `"train"` or `"test"` task seeds | | the env's |

A bad option is refused before any round trip, with what was expected
(`ValueError` / `TaskOptionsError`: `depth: must be an integer in 1..3, got 4`).

## Record and reward

The task records what is saved (`window.uirlRecord({type: "save", values})` from the
*Save changes* button: every setting of the section, all or nothing). `/progress`
has the targets, the saved values of the targets, and `changed_non_targets`: the
non-target settings saved at a value other than their value at the start of the
episode.

The score of a record is `correct_setting` (1.0) per target saved at its value minus
`changed_setting` (0.5) per changed non-target. The sparse reward of a step is the
change of that score: a change undone (the old value saved back) refunds its charge,
and a target saved right and then wrong again is paid back. The episode terminates
when every target is saved at its value; `is_success` needs, in addition, no
non-target changed at that moment. Dense mode (`reward_mode="dense"`) adds the change
of a potential: `dense_saved` (0.1) per target saved at its value plus
`dense_pending` (0.05) per target the page shows at its value (section, advanced
dialog or edit dialog) but not saved. Refused actions cost `invalid_action` (0.1).
All weights: `uirl_gym.tasks.settings_nav.score.RewardConfig`. Values compare exactly
(text values trimmed; numbers as integers; option labels as shown).

## Expert

`uirl_gym.tasks.settings_nav.expert.SettingsNavExpert` plans from
`env.unwrapped.oracle()` (targets, saved and initial values, where each setting lives,
element boxes from the page) and acts only with clicks, `ctrl+a`, typing and Escape.
It re-plans after each macro (one to three actions), so it recovers from whatever the
page shows: it closes a menu or list it does not need, cancels *Restore defaults*,
discards pending values nobody asked for, sets a saved stray change back to its initial
value before the last target ends the episode. Per section it sets every target there
(dialog targets first, then tab by tab) and saves once.

## Baselines (test split, default options)

| agent | success | mean steps |
| --- | --- | --- |
| `SettingsNavExpert` | 1.00 (20 episodes) | 13.7 |
| `RandomPolicy(seed=0)` | 0.00 (10 episodes) | 60 (the time limit) |
| `RandomPolicy(seed=0)`, easiest (`num_targets=1`, `depth=1`) | 0.00 (10 episodes) | 60 (the time limit) |

Measured on 2026-11-23 with `python scripts/task_report.py --task settings_nav --episodes 20
--random-episodes 10`: episode `k` is `reset(seed=k)` on the test split with the
default options, at most 60 steps (the same run writes this task's row in
docs/tasks.md). Other options: the env's `reset(options=...)`.

The picture above is test-split episode 5 (default options), mid-task under the expert:
the advanced dialog of *Language & region* with the *Date format* list open. It was
made with:

```python
"""docs/images/tasks/settings_nav.png: a test-split SettingsNav episode, mid-task."""

import sys

import gymnasium as gym
from PIL import Image

import uirl_gym  # noqa: F401
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks.settings_nav.expert import SettingsNavExpert

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 4
runtime = LocalRuntime(LocalRuntimeConfig(task="settings_nav", startup_timeout_s=120))
env = gym.make("uirl/SettingsNav-v0", runtime=runtime)
try:
    obs, info = env.reset(seed=seed, options={"split": "test"})
    expert = SettingsNavExpert()
    # Play the expert until a dropdown's list is open inside the advanced dialog.
    for _ in range(40):
        o = env.unwrapped.oracle()
        if o["dialog"] == "advanced" and o["dropdown"] is not None:
            break
        obs, _reward, terminated, _truncated, info = env.step(expert.next_action(o))
        if terminated:
            break
    print(seed, o["dialog"], o["dropdown"], obs["instruction"])
finally:
    env.close()
    runtime.close()
Image.fromarray(obs["screenshot"]).save("docs/images/tasks/settings_nav.png", optimize=True)
```

The tests (`tests/test_task_settings_nav.py`) check that the expert solves 20
test-split episodes with one target each (targets in first tabs, other tabs and the
advanced dialog all occur), and that it still succeeds after random actions.

## Episode end

- **Terminated** when every target setting is saved with its target value: the step that completes it.

## Version history

- `v0` (2026-11-23): the first version.
'''

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.settings_nav import score
from uirl_gym.tasks.settings_nav.expert import SettingsNavExpert
from uirl_gym.tasks.settings_nav.task import SettingsNavTask

TASK_SPEC = TaskSpec(
    name="settings_nav",
    env_id="uirl/SettingsNav-v0",
    task=SettingsNavTask,
    rewards=score.RewardConfig,
    scorer=score.SettingsNavScorer,
    check_options=score.check_options,
    expert=SettingsNavExpert,
    doc=__doc__,
)
