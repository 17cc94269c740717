"""uirl envs in Stable-Baselines3: the DiscreteClicks wrapper, SB3's check_env, a short
PPO run on real sessions (scripts/sb3_miniwob.py)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.wrappers import DiscreteClicks

pytest.importorskip("miniwob")
sb3 = pytest.importorskip("stable_baselines3")

REPO = Path(__file__).resolve().parents[1]
SEED = 3


def miniwob(runtime: LocalRuntime, task: str = "click-test", **kwargs) -> gym.Env:
    return gym.make(f"uirl/miniwob.{task}-v0", runtime=runtime, screen_size=(160, 210), **kwargs)


def test_discrete_clicks_maps_a_grid_and_keys_onto_uirl_actions(runtime: LocalRuntime) -> None:
    env = DiscreteClicks(
        miniwob(runtime), (8, 4), region=(0, 50, 160, 160), keys=("enter", "ctrl+a")
    )
    try:
        assert env.action_space == gym.spaces.Discrete(8 * 4 + 2)
        assert env.observation_space == gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        # Row by row from the region's top left, each click at its cell's centre.
        assert env.clicks[0] == (10, 70) and env.clicks[7] == (150, 70)
        assert env.clicks[8] == (10, 110) and env.clicks[31] == (150, 190)
        assert env.action(32) == Action(ActionType.KEYS, keys="enter")
        obs, _ = env.reset(seed=SEED)
        assert obs.shape == (210, 160, 3) and obs.dtype == np.uint8
        x, y, w, h = next(e for e in env.unwrapped.oracle()["elements"] if e["id"] == "subbtn")[
            "box"
        ]
        # A key press is a valid step that ends nothing on this page.
        _, reward, terminated, truncated, info = env.step(np.int64(32))
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert "invalid_action" not in info
        inside = [i for i, (cx, cy) in enumerate(env.clicks) if x <= cx < x + w and y <= cy < y + h]
        assert inside, "the button covers no cell centre: pick another seed"
        _, reward, terminated, _, info = env.step(inside[0])
        assert reward == 1.0 and terminated and info["is_success"]
    finally:
        env.close()


def test_discrete_clicks_resizes_and_refuses_bad_arguments(runtime: LocalRuntime) -> None:
    env = DiscreteClicks(miniwob(runtime), (4, 4), observation_size=(80, 105))
    try:
        assert env.observation_space.shape == (105, 80, 3)
        obs, _ = env.reset(seed=SEED)
        assert env.observation_space.contains(obs)
        with pytest.raises(ValueError, match=r"action: expected 0\.\.15, got 16"):
            env.step(16)
    finally:
        env.close()
    inner = miniwob(runtime)
    try:
        for kwargs, message in [
            ({"grid": (0, 4)}, "grid: expected 1..160 columns"),
            ({"grid": (4, 4), "region": (100, 0, 100, 10)}, "reaches outside the 160x210"),
            ({"grid": (4, 4), "keys": ("not a key",)}, "key"),
            ({"grid": (4, 4), "observation_size": (0, 10)}, "observation_size"),
        ]:
            with pytest.raises(ValueError, match=message):
                DiscreteClicks(inner, **kwargs)
    finally:
        inner.close()


@pytest.mark.parametrize(
    "make",
    [
        lambda rt: DiscreteClicks(
            miniwob(rt, "click-test-2", max_episode_steps=4), (8, 8), region=(0, 50, 160, 160)
        ),
        # uirl's own task on its 1280x800 screen, observed at 160x100.
        lambda rt: DiscreteClicks(
            gym.make("uirl/FormFill-v0", runtime=rt, max_episode_steps=4),
            (16, 10),
            keys=("tab",),
            observation_size=(160, 100),
        ),
    ],
    ids=["miniwob.click-test-2", "FormFill"],
)
def test_sb3_check_env_passes(runtime: LocalRuntime, make) -> None:
    from stable_baselines3.common.env_checker import check_env

    env = make(runtime)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # SB3's warnings (unsupported spaces, ...) fail it
            check_env(env)
    finally:
        env.close()


@pytest.mark.slow
def test_a_short_sb3_ppo_run_on_real_sessions(tmp_path: Path, monkeypatch) -> None:
    """scripts/sb3_miniwob.py end to end: PPO's CnnPolicy collects and updates on real
    MiniWoB++ sessions, then plays the held-out episodes."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import sb3_miniwob

    out = tmp_path / "sb3"
    args = ["--output-dir", str(out), "--timesteps", "32", "--num-envs", "2"]
    args += ["--n-steps", "8", "--eval-episodes", "3", "--max-episode-steps", "2"]
    result = sb3_miniwob.main(args)
    sys.modules.pop("sb3_miniwob")
    assert [p["timesteps"] for p in result["curve"]] == [16, 32]
    assert all(p["episodes"] >= 8 for p in result["curve"])  # <= 2 steps an episode
    assert set(result["held_out_success"]) == {"random", "PPO before training", "PPO"}
    saved = json.loads((out / "curve.json").read_text())
    assert saved["curve"] == result["curve"]
    assert (out / "curve.png").stat().st_size > 0 and (out / "model.zip").exists()
    assert "| PPO |" in (out / "result.md").read_text()
