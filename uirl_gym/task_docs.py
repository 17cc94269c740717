"""A task's docs page, made from its package docstring (``TaskSpec.doc``).

The docstring is the page, Gymnasium-style: Markdown with at least the sections
:data:`REQUIRED_SECTIONS` names (its options, its reward, its episode end), and last its
version history (what changed in the id's episodes, dated, as Gymnasium's envs keep one).
The page adds what every task shares, so that no docstring repeats it: the changes made
for every task at once (:data:`SHARED_HISTORY`), the observation and action spaces (read
from the code), the Gymnasium id's step limit, truncation on a failed session and the
``finish`` action. ``scripts/gen_task_docs.py``
(``python -m uirl_gym.task_docs``, for a plug-in's own docs) writes the pages to
``docs/tasks/<task>.md``; a test checks the checked-in ones are current.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import re
from pathlib import Path

from gymnasium import spaces

from uirl_gym.actions import action_space
from uirl_gym.env import observation_space
from uirl_gym.tasks import MAX_EPISODE_STEPS, TASKS, task_spec
from uirl_gym.tasks.base import TaskSpec

logger = logging.getLogger(__name__)
# (what the heading must contain, case-insensitive; what it is for)
REQUIRED_SECTIONS = (
    ("options", "the reset options, with defaults and ranges"),
    ("reward", "what is paid for what, and what counts as a success"),
    ("episode end", "when it terminates and when it is truncated"),
)
HISTORY_HEADING = "## Version history"
# Changes to what every task's id does, made once in the server or the env, newest last: a
# task's page lists them under its own history. A change to one task goes in its docstring.
SHARED_HISTORY = (
    "2026-11-26 (issue 25): `/progress` and `X-Progress` give the task record's detail only "
    "with the session token (without it, the task's public keys); the env holds the token, "
    "so its rewards are unchanged.",
    "2026-11-26 (issue 24): `reset` takes the episode's screen size (the default stays "
    "1280x800); no native popup opens on any page (a `<select>`'s list, a date, time or "
    "colour picker): a press on such a field focuses it and the keyboard picks.",
)


class TaskDocError(ValueError):
    """A task's docstring cannot make its docs page."""


def check_doc(spec: TaskSpec) -> str:
    """The docstring of ``spec``, dedented.

    Raises:
        TaskDocError: no docstring, no ``# `` title, a required section missing, or the
            version history missing or not last.
    """
    if not spec.doc:
        raise TaskDocError(f"task {spec.name!r} has no doc: set TaskSpec.doc=__doc__")
    doc = inspect.cleandoc(spec.doc)
    if not doc.startswith("# "):
        raise TaskDocError(f"task {spec.name!r}: the docstring must start with a '# ' title")
    headings = [h.lower() for h in re.findall(r"^## (.+)$", doc, flags=re.MULTILINE)]
    missing = [
        f"'## ...{word}...' ({why})"
        for word, why in REQUIRED_SECTIONS
        if not any(word in h for h in headings)
    ]
    if missing:
        raise TaskDocError(f"task {spec.name!r}: its docstring lacks {', '.join(missing)}")
    if not headings or headings[-1] != HISTORY_HEADING[3:].lower():
        raise TaskDocError(
            f"task {spec.name!r}: its docstring must end with a '{HISTORY_HEADING}' section "
            "(a dated list of what changed in the id's episodes, e.g. '- `v0` (2026-11-27): "
            "the first version.')"
        )
    return doc


def _space(space: spaces.Space) -> str:
    """One line for a leaf space (Text's charset is long and always printable ASCII)."""
    if isinstance(space, spaces.Text):
        return f"`Text({space.min_length}..{space.max_length} characters)`"
    return f"`{space!r}`"


def _table(space: spaces.Dict) -> list[str]:
    rows = ["| key | space |", "| --- | --- |"]
    rows += [f"| `{key}` | {_space(sub)} |" for key, sub in space.spaces.items()]
    return rows


def task_page(spec: TaskSpec) -> str:
    """The Markdown of ``docs/tasks/<spec.name>.md``.

    Raises:
        TaskDocError: see :func:`check_doc`.
    """
    lines = [
        "<!-- Made by scripts/gen_task_docs.py from the task package's docstring "
        "(TaskSpec.doc): edit that, then rerun the script. -->",
        "",
        check_doc(spec),
        "",
        "Changes made for every task at once (the session server's and the env's):",
        "",
        *(f"- {line}" for line in SHARED_HISTORY),
        "",
        "## Spaces",
        "",
        f'Those of every task (docs/env.md, "Spaces"): `gym.make({spec.env_id!r})`. '
        "Every task's episode is also **truncated** after "
        f"{MAX_EPISODE_STEPS} steps (the Gymnasium id's `max_episode_steps`; "
        "`gym.make(..., max_episode_steps=N)` changes it) or when the session fails "
        '(`info["error"]`), and the `finish` action terminates it at once, with reward 0 '
        "(the agent says it is done).",
        "",
        "Observation (`Dict`):",
        "",
        *_table(observation_space()),
        "",
        "Action (`Dict`; `step` also takes a `uirl_gym.Action`):",
        "",
        *_table(action_space()),
        "",
    ]
    return "\n".join(lines)


def write_pages(names: list[str], out: Path) -> list[Path]:
    """Write the page of each task of ``names`` to ``out/<task>.md``; the paths.

    Raises:
        ValueError: an unknown task; TaskDocError: see :func:`check_doc`.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = out / f"{name}.md"
        path.write_text(task_page(task_spec(name)), "utf-8")
        logger.info("wrote %s", path)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None, default_out: Path = Path("docs/tasks")) -> None:
    """``--task`` (repeatable; default: every task that has a doc) and ``--out``."""
    p = argparse.ArgumentParser(description="Write each task's docs page from its docstring.")
    p.add_argument("--task", action="append", help="default: every task that has a doc")
    p.add_argument("--out", type=Path, default=default_out, help="the pages' folder")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    write_pages(args.task or sorted(n for n, s in TASKS.items() if s.doc), args.out)


if __name__ == "__main__":
    main()
