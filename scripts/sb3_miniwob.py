"""Stable-Baselines3's PPO (CNN policy) learns a MiniWoB++ click task from pixels, on CPU.

    python scripts/sb3_miniwob.py --output-dir runs/sb3_click_test

The env is uirl's MiniWoB++ task on a 160x210 screen (the task area at zoom 1) behind
:class:`uirl_gym.wrappers.DiscreteClicks`: the screenshot (downscaled to
``--observation-size``) as an image ``Box``, and one ``Discrete`` action per cell of a
grid of clicks over the page below the instruction bar. SB3 takes it as it is
(``check_env`` passes, ``CnnPolicy``, ``DummyVecEnv`` of ``--num-envs`` sessions).
Training episodes draw their instances from the train split; the evaluation plays
``--eval-episodes`` held-out instances (``split="test"``, seeds 0..N-1, greedy policy)
before training, after it, and with uniformly random actions, the same episodes for
each.

Writes to ``--output-dir``: ``curve.json`` (per PPO rollout: timesteps, wall time,
success rate of the episodes that ended in it), ``curve.png``, ``result.md`` (the
held-out success rates and the wall time) and ``model.zip`` (SB3's save). Measured
results: docs/training.md, "Pixel RL with Stable-Baselines3".
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import uirl_gym  # noqa: F401  (registers uirl/miniwob.*)
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.wrappers import DiscreteClicks

logger = logging.getLogger("sb3_miniwob")

SCREEN = (160, 210)
# The page below MiniWoB++'s 50 px instruction bar: where every task's widgets are.
PAGE_REGION = (0, 50, 160, 160)


def make_env(
    task: str,
    runtime: LocalRuntime,
    *,
    grid: tuple[int, int],
    observation_size: tuple[int, int],
    max_episode_steps: int,
    split: str = "train",
) -> gym.Env:
    """One MiniWoB++ session with flat spaces (SB3's Monitor records its episodes)."""
    env = gym.make(
        f"uirl/miniwob.{task}-v0",
        screen_size=SCREEN,
        runtime=runtime,
        split=split,
        max_episode_steps=max_episode_steps,
    )
    flat = DiscreteClicks(env, grid, region=PAGE_REGION, observation_size=observation_size)
    return Monitor(flat, info_keywords=("is_success",))


def evaluate(env: gym.Env, act: Callable[[np.ndarray], int], episodes: int, seed: int = 0) -> float:
    """Success rate of ``act`` over held-out episodes ``seed .. seed + episodes - 1``."""
    wins = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, info = False, {}
        while not done:
            obs, _, terminated, truncated, info = env.step(act(obs))
            done = terminated or truncated
        wins += bool(info.get("is_success", False))
    return wins / episodes


class CurveCallback(BaseCallback):
    """Per PPO rollout, into ``points``: timesteps, wall time and the success rate of
    the episodes that ended in it (SB3's own ``rollout/success_rate`` averages over the
    last 100 episodes, across rollouts)."""

    def __init__(self, points: list[dict[str, Any]]) -> None:
        super().__init__()
        self.points = points
        self.ended: list[bool] = []
        self.start = time.perf_counter()

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        for info, done in zip(self.locals["infos"], self.locals["dones"], strict=True):
            if done:
                self.ended.append(bool(info.get("is_success", False)))
        return True

    def _on_rollout_end(self) -> None:
        rate = sum(self.ended) / len(self.ended) if self.ended else float("nan")
        self.points.append(
            {
                "timesteps": int(self.num_timesteps),
                "wall_s": round(time.perf_counter() - self.start, 1),
                "episodes": len(self.ended),
                "success_rate": rate,
            }
        )
        logger.info("%s", self.points[-1])
        self.ended = []


def plot(points: list[dict[str, Any]], held_out: dict[str, float], path: Path, task: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.plot(
        [p["timesteps"] for p in points],
        [p["success_rate"] for p in points],
        "o-",
        ms=3,
        label="training episodes (train split, sampled)",
    )
    for label, style in (("PPO", "g--"), ("PPO before training", "r-."), ("random", "k:")):
        ax.axhline(held_out[label], color=style[0], linestyle=style[1:], label=f"held out: {label}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"SB3 PPO (CnnPolicy) on miniwob.{task}, from pixels", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--task", default="click-test", help="a MiniWoB++ task (without miniwob.)")
    p.add_argument("--timesteps", type=int, default=16384, help="PPO's environment steps")
    p.add_argument("--num-envs", type=int, default=4, help="sessions stepped by DummyVecEnv")
    p.add_argument("--n-steps", type=int, default=256, help="PPO steps per env per rollout")
    p.add_argument("--grid", type=int, nargs=2, default=(8, 8), metavar=("COLUMNS", "ROWS"))
    p.add_argument(
        "--observation-size", type=int, nargs=2, default=(80, 105), metavar=("WIDTH", "HEIGHT")
    )
    p.add_argument(
        "--max-episode-steps",
        type=int,
        default=1,
        help="1: each episode is one click (success or not); more: clicks until the page ends it",
    )
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--eval-episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    options = {
        "grid": tuple(args.grid),
        "observation_size": tuple(args.observation_size),
        "max_episode_steps": args.max_episode_steps,
    }
    with LocalRuntime() as runtime:
        venv = DummyVecEnv(
            [lambda: make_env(args.task, runtime, **options) for _ in range(args.num_envs)]
        )
        venv.seed(args.seed)
        eval_env = make_env(args.task, runtime, split="test", **options)
        try:
            model = PPO(
                "CnnPolicy",
                venv,
                n_steps=args.n_steps,
                batch_size=min(64, args.n_steps * args.num_envs),
                n_epochs=4,
                learning_rate=args.learning_rate,
                ent_coef=0.01,
                seed=args.seed,
                device="cpu",
                verbose=0,
            )
            greedy = lambda obs: int(model.predict(obs, deterministic=True)[0])  # noqa: E731
            rng = np.random.default_rng(args.seed)
            uniform = lambda _obs: int(rng.integers(eval_env.action_space.n))  # noqa: E731
            held_out = {
                "random": evaluate(eval_env, uniform, args.eval_episodes),
                "PPO before training": evaluate(eval_env, greedy, args.eval_episodes),
            }
            points: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            model.learn(args.timesteps, callback=CurveCallback(points))
            train_s = time.perf_counter() - t0
            held_out["PPO"] = evaluate(eval_env, greedy, args.eval_episodes)
            model.save(args.output_dir / "model.zip")
        finally:
            eval_env.close()
            venv.close()
    result = {"task": args.task, "args": vars(args) | {"output_dir": str(args.output_dir)}}
    result |= {"held_out_success": held_out, "train_wall_s": round(train_s, 1), "curve": points}
    (args.output_dir / "curve.json").write_text(json.dumps(result, indent=1, default=list))
    plot(points, held_out, args.output_dir / "curve.png", args.task)
    lines = [
        f"SB3 PPO (CnnPolicy) on miniwob.{args.task}: {args.timesteps} steps in "
        f"{train_s / 60:.1f} min of training ({args.num_envs} sessions, one torch thread)",
        "",
        "| policy | held-out success |",
        "|---|---:|",
        *(f"| {k} | {v:.1%} |" for k, v in held_out.items()),
    ]
    (args.output_dir / "result.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()
