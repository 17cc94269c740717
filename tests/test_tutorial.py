"""docs/tasks.md, "Adding a task", built from its own code blocks: the to-do task is
written out, installed with pip as a plug-in (its entry point), found by the registry,
held to uirl's task contract, its own tests run and its docs page written. The
tutorial cannot drift from the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from task_contract import CHECKS
from task_play import task_runtime

from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.task_docs import main as write_docs
from uirl_gym.tasks import TASKS, discover_tasks

REPO = Path(__file__).resolve().parents[1]
# A fenced block the tutorial means as a file: ```python file=todo_task/task.py
FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TASK, ENV_ID = "todo", "my_tasks/Todo-v0"


def tutorial_files() -> dict[str, str]:
    """The files the tutorial's code blocks name, by path."""
    text = (REPO / "docs" / "tasks.md").read_text("utf-8")
    section = text[text.index("## Adding a task") :]
    return {m[1]: m[2] for m in FILE_BLOCK.finditer(section)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tutorial's project, ``pip install``-ed (into a folder put on the path, so the
    test environment stays as it was) and discovered; undone afterwards."""
    root = tmp_path_factory.mktemp("tutorial")
    project = root / "my_tasks"
    for path, body in tutorial_files().items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(body, "utf-8")
    site = root / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(site), str(project)], check=True, timeout=300)
    saved_path, saved_env = list(sys.path), os.environ.get("PYTHONPATH")
    # The session servers (subprocesses) find the plug-in the same way.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(REPO), saved_env]))
    sys.path.insert(0, str(site))
    try:
        assert discover_tasks() == [TASK]
        yield project
    finally:
        TASKS.pop(TASK, None)
        gym.registry.pop(ENV_ID, None)
        sys.path[:] = saved_path
        for name in [m for m in sys.modules if m.split(".")[0] == "todo_task"]:
            del sys.modules[name]
        if saved_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_env


@pytest.fixture(scope="module")
def todo_runtime(installed: Path) -> Iterator[LocalRuntime]:
    with task_runtime(TASK) as runtime:
        yield runtime


def test_the_tutorial_names_every_file_of_its_folder() -> None:
    assert set(tutorial_files()) == {
        "pyproject.toml",
        "todo_task/__init__.py",
        "todo_task/task.py",
        "todo_task/score.py",
        "todo_task/expert.py",
        "todo_task/static/app.html",
        "tests/test_todo.py",
    }


def test_the_installed_task_is_found_through_its_entry_point(installed: Path) -> None:
    assert TASKS[TASK].env_id == ENV_ID and gym.spec(ENV_ID).kwargs == {"task": TASK}


@pytest.mark.parametrize("check", list(CHECKS))
def test_the_tutorial_task_keeps_the_contract(check: str, todo_runtime: LocalRuntime) -> None:
    CHECKS[check](TASK, todo_runtime)


def test_the_tutorial_tests_pass(installed: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(installed / "tests")],
        capture_output=True,
        text=True,
        cwd=installed,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "5 passed" in out.stdout


def test_the_tutorial_docs_page(installed: Path, tmp_path: Path) -> None:
    write_docs(["--task", TASK, "--out", str(tmp_path)])
    page = (tmp_path / f"{TASK}.md").read_text("utf-8")
    assert "# To-do (`my_tasks/Todo-v0`, task `todo`)" in page
    assert "## Episode end" in page and "## Spaces" in page
