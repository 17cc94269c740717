"""MiniWoB++ through uirl against the `miniwob` package's own env, like for like, in one run.

Both stacks play the same 10 MiniWoB++ tasks with 8 envs (round 1: tasks 1-8, round 2:
tasks 3-10, one per env), the same seeded random clicks in the task area, and each
takes a screenshot per step:
- uirl: ``SessionVectorEnv`` (8 session servers, each a headless Chromium over CDP) on
  a 160x210 screen (``screen_size``), the task area at zoom 1: the screen is the task
  area, as the package's observation is; episodes after the first restart in their page
  where the task allows it (9 of the 10 here: not click-dialog, which the wheel flags
  nondeterministic);
- miniwob: ``gymnasium.vector.AsyncVectorEnv`` of ``gym.make("miniwob/<task>-v1")``
  (one worker process, chromedriver and Chromium each, through Selenium), its
  observation the 160x210 task area.

Measures per stack: vector steps/s (8 envs stepping together), CPU ms per env step (every
process of the stack: ``/proc/PID/stat``), resets/s, PSS per env (``smaps_rollup``).
Needs chromedriver (Debian: ``apt-get install chromium-driver``).

    python scripts/bench_miniwob.py                  # prints the table; --write: docs
    python scripts/bench_miniwob.py --steps 20 --resets 2
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_env import cpu_s, pss_mb  # scripts/ is on sys.path when run as a script

from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.vector import SessionVectorEnv

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
START, END = "<!-- bench_miniwob:start -->", "<!-- bench_miniwob:end -->"
TASKS = (
    "click-test",
    "click-button",
    "click-checkboxes",
    "click-link",
    "click-option",
    "enter-text",
    "focus-text",
    "click-dialog",
    "click-tab",
    "login-user",
)
NUM_ENVS = 8
SCREEN = (160, 210)  # MiniWoB++'s task area, the miniwob package's observation
ROUNDS = ((0, 8), (2, 10))


@dataclass
class Result:
    name: str
    steps_per_s: float
    cpu_ms_per_step: float
    resets_per_s: float
    pss_mb_per_env: float


def clicks(seed: int, steps: int) -> np.ndarray:
    """(steps, NUM_ENVS, 2) random points in the 160x210 task area (page pixels)."""
    rng = np.random.default_rng(seed)
    return rng.uniform([0, 0], [160, 210], size=(steps, NUM_ENVS, 2))


class Stack:
    """One side of the comparison: make envs, reset them, step them with clicks."""

    name = ""

    def make(self, tasks: list[str]) -> None: ...
    def reset(self, seed: int) -> None: ...
    def step(self, points: np.ndarray) -> None: ...
    def close(self) -> None: ...


class Uirl(Stack):
    name = "uirl (SessionVectorEnv, CDP)"

    def __init__(self) -> None:
        self.runtime = LocalRuntime()
        self.envs: SessionVectorEnv | None = None
        self.tasks: list[str] = []

    def make(self, tasks: list[str]) -> None:
        if self.envs is None:
            self.envs = SessionVectorEnv(
                NUM_ENVS, runtime=self.runtime, task="miniwob.click-test", screen_size=SCREEN
            )
        self.tasks = tasks

    def reset(self, seed: int) -> None:
        assert self.envs is not None
        options = [{"task": f"miniwob.{t}"} for t in self.tasks]  # zoom 1: fits 160x210
        self.envs.reset(seed=seed, options=options)

    def step(self, points: np.ndarray) -> None:
        assert self.envs is not None
        self.envs.step([Action(ActionType.LEFT_CLICK, int(x), int(y)) for x, y in points])

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
        self.runtime.close()


class MiniwobPackage(Stack):
    name = "miniwob 1.1.0 (AsyncVectorEnv, Selenium)"

    def __init__(self) -> None:
        os.environ.setdefault("MINIWOB_CHROME_BINARY", shutil.which("chromium") or "chromium")
        os.environ.setdefault("MINIWOB_CHROMEDRIVER", shutil.which("chromedriver") or "")
        self.envs: Any = None

    def make(self, tasks: list[str]) -> None:
        import gymnasium as gym

        self.close()
        makers: list[Callable[[], Any]] = [_maker(t) for t in tasks]
        self.envs = gym.vector.AsyncVectorEnv(makers, shared_memory=False)

    def reset(self, seed: int) -> None:
        self.envs.reset(seed=seed)

    def step(self, points: np.ndarray) -> None:
        from miniwob.action import ActionSpaceConfig, ActionTypes

        types = ActionSpaceConfig.get_preset("all_supported").action_types
        action = self.envs.action_space.sample()
        action["action_type"] = np.full(NUM_ENVS, types.index(ActionTypes.CLICK_COORDS))
        action["coords"] = points.astype(np.float32)
        self.envs.step(action)

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None


def _maker(task: str) -> Callable[[], Any]:
    def make() -> Any:
        import gymnasium as gym
        import miniwob  # noqa: F401

        return gym.make(f"miniwob/{task}-v1")

    return make


def measure(stack: Stack, steps: int, resets: int, seed: int) -> Result:
    me = os.getpid()
    step_s = reset_s = cpu = 0.0
    pss: list[float] = []
    for r, (lo, hi) in enumerate(ROUNDS):
        stack.make(list(TASKS[lo:hi]))
        stack.reset(seed)  # warm: pages loaded, first episode on
        pids = descendant_pids(me)
        c0, t0 = cpu_s([me, *pids]), time.perf_counter()
        for k in range(resets):
            stack.reset(seed + 1 + k)
        t1 = time.perf_counter()
        for points in clicks(seed + r, steps):
            stack.step(points)
        t2 = time.perf_counter()
        cpu += cpu_s([me, *descendant_pids(me)]) - c0
        reset_s += t1 - t0
        step_s += t2 - t1
        pss.append(pss_mb(descendant_pids(me)) / NUM_ENVS)
    n_steps = steps * NUM_ENVS * len(ROUNDS)
    return Result(
        stack.name,
        steps_per_s=n_steps / step_s,
        # CPU of the resets is counted in too: per env step, everything the stack burnt.
        cpu_ms_per_step=1000 * cpu / n_steps,
        resets_per_s=resets * NUM_ENVS * len(ROUNDS) / reset_s,
        pss_mb_per_env=max(pss),
    )


def table(results: list[Result], args: argparse.Namespace) -> str:
    ours, theirs = results
    lines = [
        f"Command: `python scripts/bench_miniwob.py --steps {args.steps} --resets {args.resets}`;"
        f" {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores; "
        f"{NUM_ENVS} envs, tasks {', '.join(TASKS)}.",
        "",
        "| stack | steps/s | CPU ms / step | resets/s | PSS MB / env |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.steps_per_s:.1f} | {r.cpu_ms_per_step:.0f} | "
            f"{r.resets_per_s:.1f} | {r.pss_mb_per_env:.0f} |"
        )
    lines.append(
        f"| ratio (uirl / miniwob) | {ours.steps_per_s / theirs.steps_per_s:.2f}x | "
        f"{ours.cpu_ms_per_step / theirs.cpu_ms_per_step:.2f}x | "
        f"{ours.resets_per_s / theirs.resets_per_s:.2f}x | "
        f"{ours.pss_mb_per_env / theirs.pss_mb_per_env:.2f}x |"
    )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50, help="vector steps per round")
    p.add_argument("--resets", type=int, default=5, help="vector resets per round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write", action="store_true", help=f"put the table in {DOCS}")
    args = p.parse_args()
    if shutil.which("chromedriver") is None:
        print("needs chromedriver (Debian: apt-get install chromium-driver)", file=sys.stderr)
        return 2
    results = []
    for make_stack in (Uirl, MiniwobPackage):
        stack = make_stack()
        try:
            results.append(measure(stack, args.steps, args.resets, args.seed))
        finally:
            stack.close()
        print(results[-1], flush=True)
    text = table(results, args)
    print(text)
    if args.write:
        doc = DOCS.read_text()
        block = f"{START}\n{text}\n{END}"
        if START in doc:
            doc = doc[: doc.index(START)] + block + doc[doc.index(END) + len(END) :]
        else:
            doc += f"\n## MiniWoB++: uirl against the miniwob package\n\n{block}\n"
        DOCS.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
