"""The task registry: tasks found as plug-ins (uirl's packages and the ``uirl.tasks``
entry points of installed packages), and the docs pages made from their docstrings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uirl_gym.task_docs import TaskDocError, check_doc, task_page
from uirl_gym.tasks import OWN_TASKS, TASKS
from uirl_gym.tasks.base import TaskSpec

REPO = Path(__file__).resolve().parents[1]


def test_own_tasks_come_from_their_packages() -> None:
    assert set(OWN_TASKS) == {
        "calendar_booking",
        "form_fill",
        "mail_triage",
        "settings_nav",
        "shop_checkout",
        "simple_data_entry",
        "spreadsheet_edit",
    }
    for name in OWN_TASKS:
        package = sys.modules[f"uirl_gym.tasks.{name}"]
        assert vars(package)["TASK_SPEC"] is TASKS[name]


@pytest.mark.parametrize("name", sorted(OWN_TASKS))
def test_checked_in_docs_page_is_current(name: str) -> None:
    page = REPO / "docs" / "tasks" / f"{name}.md"
    assert page.read_text("utf-8") == task_page(TASKS[name]), (
        f"{page} is stale: edit the docstring of uirl_gym/tasks/{name}/__init__.py, then "
        "run python scripts/gen_task_docs.py"
    )


def test_a_docstring_without_the_required_sections_is_refused() -> None:
    spec = TASKS["form_fill"]
    fields = {**vars(spec), "doc": "# Todo\n\n## Options\n\nnone"}
    with pytest.raises(TaskDocError, match="lacks '## ...reward...'.*'## ...episode end...'"):
        check_doc(TaskSpec(**fields))


def _write_plugin(root: Path) -> None:
    """An installed distribution (dist-info on the path, as pip leaves it) whose entry
    points name one good task and one that does not load."""
    package = root / "uirl_plugin_demo"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            import dataclasses

            from uirl_gym.tasks.simple_data_entry import TASK_SPEC as _BASE

            TASK_SPEC = dataclasses.replace(
                _BASE, name="plugin_demo", env_id="uirl/PluginDemo-v0", doc=None
            )
            """
        )
    )
    dist = root / "uirl_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: uirl-plugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[uirl.tasks]\ndemo = uirl_plugin_demo:TASK_SPEC\nbroken = uirl_plugin_demo:MISSING\n"
    )


def test_an_installed_package_adds_a_task_through_its_entry_point(tmp_path: Path) -> None:
    _write_plugin(tmp_path)
    code = textwrap.dedent(
        """
        import gymnasium as gym
        import uirl_gym
        from uirl_gym.tasks import OWN_TASKS, TASKS, expand_tasks
        spec = gym.spec("uirl/PluginDemo-v0")
        print(TASKS["plugin_demo"].env_id, spec.kwargs["task"], "plugin_demo" in OWN_TASKS)
        print(expand_tasks("plugin_*"))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["uirl/PluginDemo-v0 plugin_demo False", "['plugin_demo']"]
    # The broken plug-in is named in the log and skipped; every other task still loads.
    assert "task plug-in entry point broken = uirl_plugin_demo:MISSING failed" in out.stderr


def test_a_plugin_imported_before_uirl_gym_is_added_at_the_next_lookup(tmp_path: Path) -> None:
    """Its import runs uirl_gym's, which loads the plug-ins while it is half done: it is
    deferred with a warning (not dropped as broken) and found by the next lookup."""
    _write_plugin(tmp_path)
    code = textwrap.dedent(
        """
        import gymnasium as gym
        import uirl_plugin_demo  # before uirl_gym: its first line imports uirl_gym
        from uirl_gym.tasks import TASKS, task_spec
        print("plugin_demo" in TASKS, task_spec("plugin_demo").env_id)
        print(gym.spec("uirl/PluginDemo-v0").kwargs["task"])
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["False uirl/PluginDemo-v0", "plugin_demo"]
    assert "demo = uirl_plugin_demo:TASK_SPEC is being imported" in out.stderr


@pytest.mark.parametrize(
    "doc",
    [
        "# Todo\n\n## Options\n\nnone\n\n## Reward\n\n1\n\n## Episode end\n\nsoon",
        "# Todo\n\n## Version history\n\n- `v0`\n\n## Options\n\n## Reward\n\n## Episode end",
    ],
    ids=["missing", "not last"],
)
def test_a_docstring_must_end_with_its_version_history(doc: str) -> None:
    fields = {**vars(TASKS["form_fill"]), "doc": doc}
    with pytest.raises(TaskDocError, match="must end with a '## Version history' section"):
        check_doc(TaskSpec(**fields))
