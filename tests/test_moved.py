"""Old module paths of issue 40 keep working for one release, with a warning that names
the new one (docs/changelog.md, "The house along its process boundaries")."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

OLD_TO_NEW = {
    "uirl_gym.runtimes.settings": "uirl_gym.make",
    "uirl_gym.openenv.env": "uirl_gym.remote_env",
    "uirl_gym.tasks.docs": "uirl_gym.task_docs",
    "uirl_gym.server.chromium": "uirl_gym.session.browser.chromium",
    "uirl_gym.server.proxy": "uirl_gym.runtimes.kubernetes.proxy",
    "uirl_gym.server.__main__": "uirl_gym.session.__main__",
}


@pytest.mark.parametrize("old", sorted(OLD_TO_NEW))
def test_an_old_path_is_the_new_module_with_a_deprecation_warning(old: str) -> None:
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(OLD_TO_NEW[old])
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(f"{old} moved to {OLD_TO_NEW[old]}" in m for m in messages), messages


def test_uirl_gym_reward_config_warns_and_names_the_task() -> None:
    import uirl_gym
    from uirl_gym.tasks.simple_data_entry.score import RewardConfig

    with pytest.warns(DeprecationWarning, match="simple_data_entry"):
        assert uirl_gym.RewardConfig is RewardConfig


@pytest.mark.parametrize(
    ("old", "expected"),
    [
        ("uirl_gym.server", "--session-id"),
        ("uirl_gym.server.proxy", "--namespace"),
        ("uirl_gym.tasks.docs", "--task"),
    ],
)
def test_an_old_command_runs_the_new_one_and_says_so(old: str, expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", old, "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
    assert "FutureWarning" in done.stderr and "moved to" in done.stderr


def test_openenv_names_of_two_classes_keep_their_old_name_one_release() -> None:
    pytest.importorskip("openenv")
    import uirl_gym.openenv as openenv

    with pytest.warns(DeprecationWarning, match="OpenEnvServerConfig"):
        assert openenv.ServerConfig is openenv.OpenEnvServerConfig
    with pytest.warns(DeprecationWarning, match="UirlOpenEnvEnvironment"):
        assert openenv.UirlEnvironment is openenv.UirlOpenEnvEnvironment
