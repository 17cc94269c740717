"""# SimpleDataEntry (`uirl/SimpleDataEntry-v0`, task `simple_data_entry`)

![SimpleDataEntry](../images/tasks/simple_data_entry.png)

A spreadsheet on the left, a web form on the right: copy the requested rows (First
name, Last name, Email) into the form and submit once per row. It tests reading a
table by its row numbers (the sheet's left margin), clicking into fields, typing
exactly (or copying and pasting between the two apps), submitting and starting over.

## Options (`env.reset(options=...)` or `gym.make(..., default_options=...)`)

| option | meaning | default |
| --- | --- | --- |
| `rows` | 0-based data rows to copy (at most 20, no repeats) | drawn |
| `num_rows` | how many random rows to copy (1..20) | 1 |
| `row_pool` | draw the `num_rows` rows from this list of data rows (seeded; not with `rows`) | all rows |
| `data_seed` | the sheet's data | drawn from the task seed |
| `num_data_rows` | rows in the sheet (1..1000) | 100 |

The trainers take them as any task's: `env.task_options: {simple_data_entry: {rows:
[2]}}` (docs/training.md).

## Record and reward

The record (`/progress`) lists the data row each submission matched
(`submitted_row_indices`) and counts those that matched none. Sparse (default), per
step: `+correct_submission` (1.0) for a target row submitted correctly for the first
time, `-wrong_submission` (1.0) for each other submission (no row, a non-target row, a
target row again), `-invalid_action` (0.1) for a refused action. Dense mode adds
shaping from the form's fields and the selected cell: docs/env.md, "Reward", has the
exact rules. `info["is_success"]`: every target row in and no wrong submission.

## Expert

`uirl_gym.tasks.simple_data_entry.expert.SimpleDataEntryExpert` (`mode="type"` or
`"copy_paste"`).

## Episode end

- **Terminated** when every target row has been submitted correctly (wrong submissions do not end it): the step that completes it.

## Version history

- `v0` (2026-11-22): the first version.
"""

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.simple_data_entry import score
from uirl_gym.tasks.simple_data_entry.expert import SimpleDataEntryExpert
from uirl_gym.tasks.simple_data_entry.task import SimpleDataEntryTask

TASK_SPEC = TaskSpec(
    name="simple_data_entry",
    env_id="uirl/SimpleDataEntry-v0",
    task=SimpleDataEntryTask,
    rewards=score.RewardConfig,
    scorer=score.SimpleDataEntryScorer,
    check_options=score.check_options,
    expert=SimpleDataEntryExpert,
    doc=__doc__,
)
