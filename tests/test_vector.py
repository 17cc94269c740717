"""SessionVectorEnv on real local sessions."""

from __future__ import annotations

import os
import re
import signal
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from processes import wait_gone

from uirl_gym.actions import Action, ActionType
from uirl_gym.env import ResetNeededError
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.vector import ClosedEnvironmentError, SessionVectorEnv

ENV_ID = "uirl/SimpleDataEntry-v0"
SHOT = Action(ActionType.SCREENSHOT)
FINISH = Action(ActionType.FINISH)


def test_make_vec_steps_four_sessions(runtime: LocalRuntime) -> None:
    envs = gym.make_vec(ENV_ID, num_envs=4, runtime=runtime)
    try:
        assert isinstance(envs, SessionVectorEnv)
        # Two groups of two sub-envs, each group on one task instance.
        obs, infos = envs.reset(
            seed=[11, 11, 12, 12], options=[{"num_rows": 2}] * 2 + [{"rows": [3]}] * 2
        )
        assert obs["screenshot"].shape == (4, 800, 1280, 3) and obs["screenshot"].dtype == np.uint8
        assert isinstance(obs["instruction"], tuple) and len(obs["instruction"]) == 4
        assert obs["instruction"][0] == obs["instruction"][1] != obs["instruction"][2]
        assert np.array_equal(obs["screenshot"][0], obs["screenshot"][1])
        assert infos["target_rows"][2] == infos["target_rows"][3] == [3]
        assert len({tuple(t) for t in infos["target_rows"][:2]}) == 1
        assert len(set(envs.call("session"))) == 4
        actions = [Action(ActionType.LEFT_CLICK, 100, 130 + 24 * i) for i in range(4)]
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        assert rewards.shape == (4,) and not terminated.any() and not truncated.any()
        # Each sub-env got its own click: different cells selected.
        selected = [o["selected_cell"]["sheet_row"] for o in envs.call("oracle")]
        assert selected == [2, 3, 4, 5]  # sheet rows: y=130 is row 2 (header row 1 at y=89)
    finally:
        envs.close()
    with pytest.raises(ClosedEnvironmentError, match=re.escape("make a new one")):
        envs.step([SHOT] * 4)
    with pytest.raises(ClosedEnvironmentError):
        envs.envs[0].step(SHOT)  # its sub-envs are closed too


def test_autoreset_next_step(runtime: LocalRuntime) -> None:
    envs = SessionVectorEnv(2, runtime=runtime, max_episode_steps=2)
    try:
        obs0, _ = envs.reset(seed=0)
        envs.step([SHOT, Action(ActionType.FINISH)])
        _, _, terminated, truncated, _ = envs.step([SHOT, SHOT])
        # Sub-env 1 finished on step 1: this step was its reset (reward 0, not done).
        assert truncated.tolist() == [True, False] and terminated.tolist() == [False, False]
        obs, rewards, terminated, truncated, _ = envs.step([SHOT, SHOT])
        assert rewards.tolist() == [0.0, 0.0] and not truncated.any()
        assert envs.envs[0]._episode is not None
    finally:
        envs.close()


def test_autoreset_same_step_and_reset_mask(runtime: LocalRuntime) -> None:
    # The mode is a make_vec keyword (docs/env.md): make_vec passes it to SessionVectorEnv.
    envs = gym.make_vec(ENV_ID, num_envs=2, runtime=runtime, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert isinstance(envs, SessionVectorEnv)
        assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        envs.reset(seed=[5, 6], options={"num_rows": 1})
        _, _, terminated, _, infos = envs.step([Action(ActionType.FINISH), SHOT])
        assert terminated.tolist() == [True, False]
        assert infos["_final_obs"].tolist() == [True, False]
        # Sub-env 0 was reset in that same step: it steps on normally.
        _, _, terminated, truncated, _ = envs.step([SHOT, SHOT])
        assert not terminated.any() and not truncated.any()
        assert infos["final_info"]["is_success"].tolist() == [False, False]
        assert infos["final_info"]["_is_success"].tolist() == [True, False]
        _, infos = envs.reset(
            seed=[7, 7], options={"reset_mask": np.array([False, True]), "rows": [9]}
        )
        assert infos["_target_rows"].tolist() == [False, True] and infos["target_rows"][1] == [9]
    finally:
        envs.close()


def test_a_killed_session_truncates_only_its_sub_env(runtime: LocalRuntime) -> None:
    envs = SessionVectorEnv(3, runtime=runtime)
    try:
        envs.reset(seed=0)
        victim = envs.envs[1].session
        os.killpg(runtime.pid(victim), signal.SIGKILL)
        _, _, terminated, truncated, infos = envs.step([SHOT] * 3)
        assert truncated.tolist() == [False, True, False] and not terminated.any()
        assert infos["_error"].tolist() == [False, True, False]
        assert "SessionUnavailableError" in infos["error"][1]
        # The run goes on: sub-env 1 autoresets on a replacement session.
        obs, _, _, truncated, _ = envs.step([SHOT] * 3)
        assert not truncated.any()
        assert envs.envs[1].session is not None and envs.envs[1].session != victim
        obs, _, _, truncated, _ = envs.step([SHOT] * 3)
        assert not truncated.any() and obs["screenshot"].shape[0] == 3
    finally:
        envs.close()


def test_a_frozen_session_costs_the_batch_its_deadline_only(runtime: LocalRuntime) -> None:
    """One sub-env's session server stopped (SIGSTOP): the batch comes back once the
    step's deadline (here 3 s, ``step_timeout_s``) and the client's margin have passed,
    with the others' results; the stopped server and its Chromium are gone. The batch
    waited 20 s at the 10 s default (a read timeout, then the runtime's SIGTERM grace in
    the step's thread), and a frozen screenshot was read four times."""
    step_timeout_s = 3.0
    envs = gym.make_vec(ENV_ID, num_envs=2, runtime=runtime, step_timeout_s=step_timeout_s)
    try:
        envs.reset(seed=0)
        server_pid = runtime.pid(envs.envs[1].session)
        family = [server_pid, *descendant_pids(server_pid)]
        os.kill(server_pid, signal.SIGSTOP)
        t0 = time.monotonic()
        _, _, terminated, truncated, infos = envs.step(
            [Action(ActionType.LEFT_CLICK, 100, 130), SHOT]
        )
        elapsed = time.monotonic() - t0
        assert truncated.tolist() == [False, True] and not terminated.any()
        assert infos["_error"].tolist() == [False, True]
        assert "SessionUnavailableError" in infos["error"][1]
        # The deadline plus ACTION_READ_MARGIN_S (2 s), with room for a busy machine.
        assert step_timeout_s <= elapsed < step_timeout_s + 5, elapsed
        assert envs.envs[0].oracle()["selected_cell"]["sheet_row"] == 2  # sub-env 0's click
        assert wait_gone(family, timeout_s=10) == []
    finally:
        envs.close()


def test_a_lone_surrogate_in_one_sub_env_keeps_the_others_results(
    runtime: LocalRuntime,
) -> None:
    """The whole batch raised UnicodeEncodeError after sub-env 0 had clicked: its result
    was lost. Now the surrogate is sub-env 1's invalid action, and both results come."""
    envs = gym.make_vec(ENV_ID, num_envs=2, runtime=runtime)
    try:
        envs.reset(seed=0)
        actions = [Action(ActionType.LEFT_CLICK, 100, 130), {"type": "type", "text": "\ud83d"}]
        _, rewards, terminated, truncated, infos = envs.step(actions)
        assert not (terminated.any() or truncated.any())
        assert infos["_invalid_action"].tolist() == [False, True]
        assert "lone surrogate" in infos["invalid_action"][1] and rewards[1] < 0
        assert envs.call("oracle")[0]["selected_cell"]["sheet_row"] == 2  # the click ran
    finally:
        envs.close()


def test_step_envs_refuses_a_sub_env_whose_episode_ended(runtime: LocalRuntime) -> None:
    """step_envs has no autoreset: an ended sub-env must be reset before it steps again."""
    envs = SessionVectorEnv(2, runtime=runtime, max_episode_steps=2)
    try:
        envs.reset_envs({0: (0, None), 1: (1, None)})
        results = envs.step_envs({0: FINISH, 1: SHOT})
        assert results[0][2] and not results[1][2]  # sub-env 0 terminated
        with pytest.raises(ResetNeededError, match=re.escape("sub-envs [0]")):
            envs.step_envs({0: SHOT, 1: SHOT})
        # The vector's own time limit ends sub-env 1's episode: the same rule.
        assert envs.step_envs({1: SHOT})[1][3]
        with pytest.raises(ResetNeededError, match=re.escape("sub-envs [1]")):
            envs.step_envs({1: SHOT})
        envs.reset_envs({0: (2, None), 1: (3, None)})
        results = envs.step_envs({0: SHOT, 1: SHOT})
        assert not any(r[2] or r[3] for r in results.values())
    finally:
        envs.close()


def test_autoreset_disabled_refuses_an_ended_sub_env(runtime: LocalRuntime) -> None:
    envs = gym.make_vec(ENV_ID, num_envs=2, runtime=runtime, autoreset_mode="Disabled")
    try:
        assert envs.autoreset_mode is AutoresetMode.DISABLED
        envs.reset(seed=0)
        envs.step([FINISH, SHOT])
        with pytest.raises(
            ResetNeededError, match=re.escape("sub-envs [0] finished their episodes")
        ):
            envs.step([SHOT, SHOT])
        envs.reset(options={"reset_mask": np.array([True, False])})
        _, _, terminated, truncated, _ = envs.step([SHOT, SHOT])
        assert not terminated.any() and not truncated.any()
    finally:
        envs.close()


def test_vector_kwargs_are_gymnasiums_route_to_its_own_vector_envs(runtime: LocalRuntime) -> None:
    """What docs/env.md says of Gymnasium's ``vector_kwargs={"autoreset_mode": ...}``:
    refused for uirl's vector entry point, taken by Gymnasium's SyncVectorEnv (no
    session starts before a reset)."""
    mode = {"autoreset_mode": AutoresetMode.SAME_STEP}
    with pytest.raises(gym.error.Error, match="only through kwargs"):
        gym.make_vec(ENV_ID, num_envs=2, runtime=runtime, vector_kwargs=mode)
    envs = gym.make_vec(
        ENV_ID, num_envs=2, vectorization_mode="sync", vector_kwargs=mode, runtime=runtime
    )
    try:
        assert isinstance(envs, gym.vector.SyncVectorEnv)
        assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    finally:
        envs.close()
