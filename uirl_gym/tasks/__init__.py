"""The task registry: every task by id, what the session server runs and how the env
scores it.

Each task has a server side (:class:`~uirl_gym.tasks.base.Task`: its web app, episode
state and record), an env side (an :class:`~uirl_gym.tasks.base.EpisodeScorer` and a
reward config), a scripted expert and a Gymnasium id (``uirl/<TaskName>-v0``), all
named by its :class:`~uirl_gym.tasks.base.TaskSpec`. Nothing here lists them: a task
is a plug-in, found in one of two places (docs/tasks.md, "Adding a task"):

- a subpackage of ``uirl_gym.tasks`` that exports ``TASK_SPEC`` (uirl's own tasks);
- an entry point of group ``uirl.tasks`` of any installed package, naming the same
  kind of object (``todo = "my_tasks.todo:TASK_SPEC"`` in its ``pyproject.toml``).

``TASK_SPEC`` is a :class:`~uirl_gym.tasks.base.TaskSpec`, or for a task family a
function returning a list of them (MiniWoB++: one per page of the installed wheel).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib
import importlib.metadata
import inspect
import logging
import pkgutil
import sys
import types
from collections.abc import Callable, Iterator

from gymnasium.envs.registration import parse_env_id, register, registry

from uirl_gym.tasks.base import Task, TaskSpec

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_EPISODE_STEPS",
    "OWN_TASKS",
    "SPLITS",
    "TASKS",
    "TASK_GROUPS",
    "TaskSpec",
    "browsergym_env_id",
    "discover_tasks",
    "expand_tasks",
    "make_task",
    "split_range",
    "task_spec",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "uirl.tasks"
# Every Gymnasium id's step limit (``gym.make(..., max_episode_steps=...)`` changes it).
MAX_EPISODE_STEPS = 60

# Task seeds by split: the env draws an episode's task seed from its split's range, so
# that no test instance is ever trained on. "train" is the range every env used before
# splits existed (the same seed still gives the same instance).
SPLITS: dict[str, range] = {"train": range(0, 2**31), "test": range(2**31, 2**32)}


def split_range(split: str) -> range:
    """The task seeds of ``split`` (``ValueError``: unknown split)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {sorted(SPLITS)}")
    return SPLITS[split]


def _specs_of(exported: object, where: str) -> list[TaskSpec]:
    """The specs ``exported`` names: a spec, or a function returning a list of them.

    Raises:
        TypeError: anything else (``where`` says who exported it).
    """
    if isinstance(exported, TaskSpec):
        return [exported]
    specs: list[TaskSpec] = []
    for spec in exported() if callable(exported) else [exported]:
        if not isinstance(spec, TaskSpec):
            raise TypeError(
                f"{where}: expected a TaskSpec or a function returning a list of them, "
                f"got {type(spec).__name__}"
            )
        specs.append(spec)
    return specs


def _package_exports() -> Iterator[tuple[str, Callable[[], object]]]:
    """``(source, load)`` for each subpackage of ``uirl_gym.tasks``, by name."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.ispkg:
            name = f"{__name__}.{info.name}"
            yield name, functools.partial(_package_export, name)


def _package_export(name: str) -> object:
    return vars(importlib.import_module(name)).get("TASK_SPEC")


def _entry_point_exports() -> Iterator[tuple[str, Callable[[], object]]]:
    """``(source, load)`` for each entry point of group ``uirl.tasks``, by name."""
    for point in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)):
        yield f"entry point {point.name} = {point.value}", point.load


def _importing(error: BaseException) -> bool:
    """Whether a plug-in's load failed because its module is being imported right now
    (the plug-in was imported before ``uirl_gym``, and its import of ``uirl_gym`` is what
    loads the plug-ins): a missing name of a partially initialized module."""
    if isinstance(error, AttributeError):
        module = error.obj
    elif isinstance(error, ImportError) and error.name is not None:
        module = sys.modules.get(error.name)
    else:
        return False
    if not isinstance(module, types.ModuleType):
        return False
    # Being imported = its own top-level code is running on this thread's stack (below
    # us): found with the public frame API, not the import system's private flags.
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_globals is vars(module) and frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back
    return False


TASKS: dict[str, TaskSpec] = {}


def _add(spec: TaskSpec) -> bool:
    """Put ``spec`` in :data:`TASKS` and Gymnasium's registry; False (and a warning)
    when its name or Gymnasium id is taken."""
    if spec.name in TASKS:
        if TASKS[spec.name] != spec:
            logger.warning("task %r is defined twice; the second is ignored", spec.name)
        return False
    if spec.env_id in registry and registry[spec.env_id].kwargs.get("task") != spec.name:
        logger.warning("Gymnasium id %r of task %r is taken; ignored", spec.env_id, spec.name)
        return False
    TASKS[spec.name] = spec
    if spec.env_id not in registry:
        register(
            id=spec.env_id,
            entry_point="uirl_gym.env:make_env",
            vector_entry_point="uirl_gym.vector:SessionVectorEnv",
            max_episode_steps=MAX_EPISODE_STEPS,
            nondeterministic=spec.nondeterministic,
            disable_env_checker=True,
            kwargs={"task": spec.name},
        )
    browsergym_id = browsergym_env_id(spec.env_id)
    if browsergym_id in registry and registry[browsergym_id].kwargs.get("task") != spec.name:
        logger.warning("Gymnasium id %r of task %r is taken; ignored", browsergym_id, spec.name)
    elif browsergym_id not in registry:
        # BrowserGym's contract (uirl_gym.browsergym): nondeterministic, as BrowserGym
        # registers its tasks (timestamps and elapsed time in every observation).
        register(
            id=browsergym_id,
            entry_point="uirl_gym.browsergym:make_browsergym_env",
            max_episode_steps=MAX_EPISODE_STEPS,
            nondeterministic=True,
            disable_env_checker=True,
            kwargs={"task": spec.name},
        )
    return True


def browsergym_env_id(env_id: str) -> str:
    """The BrowserGym id of a uirl id: ``uirl/miniwob.click-button-v0`` ->
    ``browsergym/uirl.miniwob.click-button`` (BrowserGym's ids have no version)."""
    _, name, _ = parse_env_id(env_id)
    return f"browsergym/uirl.{name}"


_loaded: set[str] = set()


def _load(exports: Iterator[tuple[str, Callable[[], object]]], *, plugins: bool) -> list[str]:
    """Add the specs of the exports not loaded before; their names. A plug-in that fails
    to load is logged and skipped (it must not break every other task); uirl's own
    packages fail loudly."""
    added = []
    for source, load in exports:
        if source in _loaded:
            continue
        _loaded.add(source)
        try:
            exported = load()
            specs = [] if exported is None else _specs_of(exported, source)
        except Exception as exc:
            if not plugins:
                raise
            if _importing(exc):
                # Not an error of the plug-in: tried again by the next discover_tasks().
                _loaded.discard(source)
                logger.warning(
                    "task plug-in %s is being imported (it was imported before uirl_gym); "
                    "its task is added once it has loaded, at the next lookup of a task "
                    "(or call uirl_gym.tasks.discover_tasks()). Import uirl_gym first to "
                    "have its Gymnasium id registered at once.",
                    source,
                )
                continue
            logger.exception("task plug-in %s failed to load; skipped", source)
            continue
        added += [spec.name for spec in specs if _add(spec)]
    return added


def discover_tasks() -> list[str]:
    """Load the task plug-ins (entry points of group ``uirl.tasks``) not loaded yet and
    register their Gymnasium ids: done at import; call it again after installing a
    plug-in into a running process.

    Returns:
        the ids of the tasks added.
    """
    importlib.invalidate_caches()
    return _load(_entry_point_exports(), plugins=True)


_package_tasks = _load(_package_exports(), plugins=False)
# uirl's own tasks, by name (not a family's: MiniWoB++ has its groups below).
OWN_TASKS: tuple[str, ...] = tuple(n for n in _package_tasks if TASKS[n].family is None)
discover_tasks()
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
        discover_tasks()  # a plug-in imported before uirl_gym, or installed since
    if name not in TASKS:
        close = difflib.get_close_matches(name, TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}.{hint}")
    return TASKS[name]


def make_task(name: str) -> Task:
    """A new server-side task object for ``name`` (``ValueError``: unknown name)."""
    return task_spec(name).task()
