"""Several tasks in one env and one vector env: any session serves any task, the task
is chosen per reset (named, or drawn by weight), and each episode is scored by its own
task."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
import requests

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_agents.episodes.trajectories import load_episodes
from uirl_agents.trainers.cli import load_config
from uirl_agents.trainers.config import GRPOConfig
from uirl_agents.trainers.metrics import read_metrics
from uirl_agents.trainers.specs import TRAIN_STREAM, derive_specs
from uirl_gym.env import UIEnv
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks import task_spec
from uirl_gym.vector import SessionVectorEnv

MIX = {"simple_data_entry": 1.0, "settings_nav": 1.0}


@pytest.fixture(scope="module")
def mt_runtime() -> Iterator[LocalRuntime]:
    rt = LocalRuntime(LocalRuntimeConfig(startup_timeout_s=120))
    try:
        yield rt
    finally:
        rt.close()


def solve(env: UIEnv, task: str, max_steps: int = 60) -> dict:
    expert = task_spec(task).expert()
    expert.reset()
    for _ in range(max_steps):
        _obs, _r, terminated, truncated, info = env.step(expert.next_action(env.oracle()))
        if terminated or truncated:
            break
    return info


def test_one_session_switches_tasks_and_scores_each_episode_by_its_task(
    mt_runtime: LocalRuntime,
) -> None:
    env = UIEnv(
        runtime=mt_runtime,
        tasks=MIX,
        image_format="jpeg",
        task_options={"simple_data_entry": {"num_rows": 1}, "settings_nav": {"num_targets": 1}},
    )
    try:
        drawn = []
        for seed in range(8):
            _obs, info = env.reset(seed=seed)
            drawn.append(info["task"])
        # Both tasks are drawn, and a seed draws the same task again.
        assert set(drawn) == set(MIX)
        assert [env.reset(seed=seed)[1]["task"] for seed in range(8)] == drawn
        # Back and forth in the same session: each app on the screen, each solved and
        # scored by its own task (the prepared context held the other task's app).
        session = env.session
        for task in ["settings_nav", "simple_data_entry", "settings_nav"]:
            obs, info = env.reset(seed=3, options={"task": task})
            assert info["task"] == task
            assert env.session == session
            done = solve(env, task)
            assert done["is_success"], (task, done)
    finally:
        env.close()


def test_a_vector_env_runs_a_task_per_sub_env(mt_runtime: LocalRuntime) -> None:
    envs = SessionVectorEnv(2, runtime=mt_runtime, image_format="jpeg")
    try:
        options = [{"task": "simple_data_entry"}, {"task": "settings_nav"}]
        obs, info = envs.reset(seed=5, options=options)
        assert list(info["task"]) == ["simple_data_entry", "settings_nav"]
        assert obs["instruction"][0] != obs["instruction"][1]
        # Autoreset keeps each sub-env's task.
        oracles = envs.call("oracle")
        assert "inputs" in oracles[0] and "inputs" not in oracles[1]
    finally:
        envs.close()


def test_bad_tasks_are_refused_with_clear_errors(mt_runtime: LocalRuntime) -> None:
    with pytest.raises(ValueError, match="unknown task 'form_fil'.*Did you mean 'form_fill'"):
        UIEnv(runtime=mt_runtime, tasks={"form_fil": 1.0})
    with pytest.raises(ValueError, match=r"tasks\['form_fill'\]: a weight must be"):
        UIEnv(runtime=mt_runtime, tasks={"form_fill": 0})
    env = gym.make("uirl/SimpleDataEntry-v0", runtime=mt_runtime)
    try:
        with pytest.raises(ValueError, match="unknown task 'nope'"):
            env.reset(options={"task": "nope"})
        # A task's options are checked against the episode's task.
        with pytest.raises(ValueError, match="num_rows"):
            env.reset(options={"task": "settings_nav", "num_rows": 2})
        env.reset(seed=0)
        session = env.unwrapped.session
        assert session is not None
        headers = dict(session.headers)
        r = requests.post(f"{session.base_url}/reset", json={"task": "nope"}, headers=headers)
        assert r.status_code == 400 and "unknown task 'nope'" in r.json()["detail"]
        r = requests.get(f"{session.base_url}/task/app", params={"task": "nope"}, timeout=10)
        assert r.status_code == 404
    finally:
        env.close()


TWO_TASKS = Path(__file__).resolve().parents[1] / "scripts" / "configs" / "tiny_two_tasks.yaml"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("trainer", ["rs", "grpo"])
def test_two_processes_train_one_model_on_a_two_task_mix(trainer: str, tmp_path: Path) -> None:
    """Both trainers on 2 processes, each task instance drawn from the mix: the groups
    keep one task each, episodes are scored by their own task, metrics come per task,
    and both processes end with the same weights."""
    from test_trainers import REPO, TORCHRUN, _assert_no_orphans, _run

    out = tmp_path / "run"
    mark = f"mt-{trainer}-{uuid.uuid4().hex}"
    cmd = [*TORCHRUN, str(REPO / "scripts" / "check_ranks.py"), "--trainer", trainer]
    cmd += ["--config", str(TWO_TASKS), "--output-dir", str(out), "--iterations", "1"]
    cmd += ["--logging.progress", "false", "--logging.save_trajectories", "true"]
    _run(cmd, mark, timeout_s=600)
    _assert_no_orphans(mark)
    report = json.loads((out / "rank_check.json").read_text())
    assert report["processes"] == 2
    assert report["max_abs_difference_at_end"] == 0

    cfg = load_config(GRPOConfig, TWO_TASKS)
    episodes = []
    for rank in (0, 1):
        got = load_episodes(out / "trajectories" / "iter_000000" / f"rank_{rank}")
        expected = derive_specs(
            cfg.env, seed=0, stream=TRAIN_STREAM, iteration=0, rank=rank,
            num_groups=2, group_size=2, tag="it",
        )  # fmt: skip
        assert [(e.group_id, e.task) for e in got] == [
            (s.group_id, s.options["task"]) for s in expected
        ]
        episodes += got
    assert {e.task for e in episodes} == set(MIX)
    for e in episodes:  # each task's own instruction on the screen
        assert ("Settings app" in e.instruction) == (e.task == "settings_nav"), e
    records = [r for r in read_metrics(out) if "rollout/episodes" in r]
    assert records[0]["rollout/episodes"] == 8
    per_task = sum(records[0][f"rollout/task/{t}/episodes"] for t in MIX)
    assert per_task == 8
    if trainer == "rs":  # the experts follow each demonstration's task
        assert records[0]["demonstrations/episodes"] == 2
