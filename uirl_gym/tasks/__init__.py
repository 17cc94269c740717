"""The tasks, by id: what the session server runs and how the env scores it.

Each task has a server side (:class:`~uirl_gym.tasks.base.Task`: its web app, episode
state and record) and an env side (an :class:`~uirl_gym.tasks.base.EpisodeScorer`
and a reward config), and a Gymnasium id (``uirl/<TaskName>-v0``).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks import miniwob
from uirl_gym.tasks.base import EpisodeScorer, Task
from uirl_gym.tasks.calendar_booking import score as calendar_booking_score
from uirl_gym.tasks.calendar_booking.expert import CalendarBookingExpert
from uirl_gym.tasks.calendar_booking.task import CalendarBookingTask
from uirl_gym.tasks.form_fill import score as form_fill_score
from uirl_gym.tasks.form_fill.expert import FormFillExpert
from uirl_gym.tasks.form_fill.task import FormFillTask
from uirl_gym.tasks.mail_triage import score as mail_triage_score
from uirl_gym.tasks.mail_triage.expert import MailTriageExpert
from uirl_gym.tasks.mail_triage.task import MailTriageTask
from uirl_gym.tasks.settings_nav import score as settings_nav_score
from uirl_gym.tasks.settings_nav.expert import SettingsNavExpert
from uirl_gym.tasks.settings_nav.task import SettingsNavTask
from uirl_gym.tasks.shop_checkout import score as shop_checkout_score
from uirl_gym.tasks.shop_checkout.expert import ShopCheckoutExpert
from uirl_gym.tasks.shop_checkout.task import ShopCheckoutTask
from uirl_gym.tasks.simple_data_entry import score as simple_data_entry_score
from uirl_gym.tasks.simple_data_entry.expert import SimpleDataEntryExpert
from uirl_gym.tasks.simple_data_entry.task import SimpleDataEntryTask
from uirl_gym.tasks.spreadsheet_edit import score as spreadsheet_edit_score
from uirl_gym.tasks.spreadsheet_edit.expert import SpreadsheetEditExpert
from uirl_gym.tasks.spreadsheet_edit.task import SpreadsheetEditTask

# Task seeds by split: the env draws an episode's task seed from its split's range, so
# that no test instance is ever trained on. "train" is the range every env used before
# splits existed (the same seed still gives the same instance).
SPLITS: dict[str, range] = {"train": range(0, 2**31), "test": range(2**31, 2**32)}


def split_range(split: str) -> range:
    """The task seeds of ``split`` (``ValueError``: unknown split)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {sorted(SPLITS)}")
    return SPLITS[split]


@dataclass(frozen=True)
class TaskSpec:
    """What the server and the env need to know about a task.

    Attributes:
        name: the task id (``LocalRuntimeConfig.task``, the server's ``--task``).
        env_id: its Gymnasium id.
        task: a new server-side task object.
        rewards: the task's reward config class (default values when called bare).
        scorer: ``scorer(first_progress, rewards)``: one episode's scorer.
        check_options: refuses reset options before any round trip (``ValueError``).
        expert: ``expert(**options)``: a scripted expert, with ``reset()`` and
            ``next_action(oracle) -> Action`` (it reads ``/oracle``, acts through
            agent actions only).
        nondeterministic: the same seed may not give the same episode (Gymnasium's
            ``EnvSpec.nondeterministic``; some MiniWoB++ pages).
        family: the task family it belongs to (``"miniwob"``), None for uirl's own.
    """

    name: str
    env_id: str
    task: Callable[[], Task]
    rewards: Callable[[], Any]
    scorer: Callable[[Mapping[str, Any], Any], EpisodeScorer]
    check_options: Callable[[Mapping[str, Any]], None]
    expert: Callable[..., Any]
    nondeterministic: bool = False
    family: str | None = None


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            name="simple_data_entry",
            env_id="uirl/SimpleDataEntry-v0",
            task=SimpleDataEntryTask,
            rewards=simple_data_entry_score.RewardConfig,
            scorer=simple_data_entry_score.SimpleDataEntryScorer,
            check_options=simple_data_entry_score.check_options,
            expert=SimpleDataEntryExpert,
        ),
        TaskSpec(
            name="settings_nav",
            env_id="uirl/SettingsNav-v0",
            task=SettingsNavTask,
            rewards=settings_nav_score.RewardConfig,
            scorer=settings_nav_score.SettingsNavScorer,
            check_options=settings_nav_score.check_options,
            expert=SettingsNavExpert,
        ),
        TaskSpec(
            name="form_fill",
            env_id="uirl/FormFill-v0",
            task=FormFillTask,
            rewards=form_fill_score.RewardConfig,
            scorer=form_fill_score.FormFillScorer,
            check_options=form_fill_score.check_options,
            expert=FormFillExpert,
        ),
        TaskSpec(
            name="spreadsheet_edit",
            env_id="uirl/SpreadsheetEdit-v0",
            task=SpreadsheetEditTask,
            rewards=spreadsheet_edit_score.RewardConfig,
            scorer=spreadsheet_edit_score.SpreadsheetEditScorer,
            check_options=spreadsheet_edit_score.check_options,
            expert=SpreadsheetEditExpert,
        ),
        TaskSpec(
            name="calendar_booking",
            env_id="uirl/CalendarBooking-v0",
            task=CalendarBookingTask,
            rewards=calendar_booking_score.RewardConfig,
            scorer=calendar_booking_score.CalendarBookingScorer,
            check_options=calendar_booking_score.check_options,
            expert=CalendarBookingExpert,
        ),
        TaskSpec(
            name="shop_checkout",
            env_id="uirl/ShopCheckout-v0",
            task=ShopCheckoutTask,
            rewards=shop_checkout_score.RewardConfig,
            scorer=shop_checkout_score.ShopCheckoutScorer,
            check_options=shop_checkout_score.check_options,
            expert=ShopCheckoutExpert,
        ),
        TaskSpec(
            name="mail_triage",
            env_id="uirl/MailTriage-v0",
            task=MailTriageTask,
            rewards=mail_triage_score.RewardConfig,
            scorer=mail_triage_score.MailTriageScorer,
            check_options=mail_triage_score.check_options,
            expert=MailTriageExpert,
        ),
    )
}
# uirl's own tasks, in the order above (the task families' follow in TASKS).
OWN_TASKS: tuple[str, ...] = tuple(TASKS)


def _miniwob_specs() -> list[TaskSpec]:
    """One spec per MiniWoB++ task of the installed ``miniwob`` wheel (none without it)."""
    infos = miniwob.miniwob_tasks()
    if not infos:
        return []
    from uirl_gym.tasks.miniwob import score as miniwob_score
    from uirl_gym.tasks.miniwob.expert import MiniWobExpert
    from uirl_gym.tasks.miniwob.task import MiniWobTask

    return [
        TaskSpec(
            name=info.name,
            env_id=f"uirl/{info.name}-v0",
            task=functools.partial(MiniWobTask, info.subdomain),
            rewards=miniwob_score.RewardConfig,
            scorer=miniwob_score.MiniWobScorer,
            check_options=functools.partial(miniwob_score.check_options, info=info),
            expert=functools.partial(MiniWobExpert, info.subdomain),
            nondeterministic=info.nondeterministic,
            family="miniwob",
        )
        for info in infos.values()
    ]


TASKS.update((spec.name, spec) for spec in _miniwob_specs())
# Named groups of tasks (``evaluate.py --task``): "all" is uirl's own tasks (as before
# task families existed); a family's name is all of its tasks.
TASK_GROUPS: dict[str, tuple[str, ...]] = {
    "all": OWN_TASKS,
    "miniwob": tuple(n for n, s in TASKS.items() if s.family == "miniwob"),
    "miniwob-deterministic": tuple(
        n for n, s in TASKS.items() if s.family == "miniwob" and not s.nondeterministic
    ),
}


def expand_tasks(text: str) -> list[str]:
    """Task ids from ``text``: comma-separated ids, group names (:data:`TASK_GROUPS`)
    and globs (``miniwob.click-*``), in order, without repeats.

    Raises:
        ValueError: an unknown id or group, a glob that matches nothing, or nothing at all.
    """
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part in TASK_GROUPS:
            found = list(TASK_GROUPS[part])
            if not found:
                raise ValueError(f"task group {part!r} is empty (is its package installed?)")
        elif any(c in part for c in "*?["):
            found = fnmatch.filter(TASKS, part)
            if not found:
                raise ValueError(f"{part!r} matches no task id")
        else:
            found = [task_spec(part).name]
        names += [n for n in found if n not in names]
    if not names:
        raise ValueError("expected a task id, a comma list, a group or a glob")
    return names


def task_spec(name: str) -> TaskSpec:
    """The spec of task ``name``.

    Raises:
        ValueError: unknown name (with the closest known one, if any).
    """
    if name not in TASKS:
        close = difflib.get_close_matches(name, TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}.{hint}")
    return TASKS[name]


def make_task(name: str) -> Task:
    """A new server-side task object for ``name`` (``ValueError``: unknown name)."""
    return task_spec(name).task()
