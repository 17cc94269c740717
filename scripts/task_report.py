"""The task suite's benchmark page: a screenshot per task, its expert and a random agent.

    python scripts/task_report.py                    # every task, into docs/tasks.md
    python scripts/task_report.py --task simple_data_entry --episodes 5

For each task (``uirl_gym.tasks.TASKS``), on its test split (instances no training run
samples), with the task's default options:

- ``docs/images/tasks/<task>.png``: the screen of the episode with reset seed 0;
- the scripted expert's success rate and steps per episode over ``--episodes``
  episodes (reset seeds 0..N-1), through pixel actions only;
- the random agent's (``uirl_agents.policies.random.RandomPolicy``, the baseline of
  ``scripts/evaluate.py``) over ``--random-episodes`` episodes of at most
  ``--max-steps`` steps.

The table replaces what stands between the ``task_report`` markers in ``--doc``.
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from PIL import Image

from uirl_agents.policies.random import RandomPolicy
from uirl_gym.actions import Action
from uirl_gym.env import UIEnv
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks import OWN_TASKS, TASKS, TaskSpec

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- task_report:start -->", "<!-- task_report:end -->"
logger = logging.getLogger("task_report")


@dataclass
class AgentResult:
    episodes: int
    successes: int
    steps: list[int]

    def row(self) -> str:
        rate = self.successes / max(self.episodes, 1)
        mean_steps = sum(self.steps) / max(len(self.steps), 1)
        return f"{rate:.0%} ({self.successes}/{self.episodes}) | {mean_steps:.1f}"


def play(env: UIEnv, choose, episodes: int, max_steps: int, begin=None) -> AgentResult:
    """``choose(obs)`` -> Action for ``episodes`` episodes (reset seeds 0..N-1)."""
    successes, steps = 0, []
    info: dict = {}
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        if begin is not None:
            begin()
        taken, ended = 0, False
        while taken < max_steps and not ended:
            obs, _, terminated, truncated, info = env.step(choose(obs))
            taken += 1
            ended = terminated or truncated
        successes += bool(info.get("is_success"))
        steps.append(taken)
    return AgentResult(episodes, successes, steps)


def report_task(spec: TaskSpec, args: argparse.Namespace) -> str:
    runtime = LocalRuntime(LocalRuntimeConfig(task=spec.name))
    env = UIEnv(runtime=runtime, task=spec.name, split="test")
    try:
        obs, _ = env.reset(seed=0)
        shot = args.images / f"{spec.name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(obs["screenshot"]).save(shot, optimize=True)
        expert = spec.expert()
        expert_result = play(
            env,
            lambda _obs: expert.next_action(env.oracle()),
            args.episodes,
            args.max_steps,
            begin=expert.reset,
        )
        random_policy = RandomPolicy(seed=0)

        def random_action(obs: dict) -> Action:
            return random_policy.act([obs], [0])[0].action

        random_result = play(
            env,
            random_action,
            args.random_episodes,
            args.max_steps,
            begin=lambda: random_policy.begin_episode(0),
        )
    finally:
        env.close()
        runtime.close()
    image = shot.relative_to(args.doc.parent)
    return (
        f"| [{spec.env_id}](tasks/{spec.name}.md) | ![{spec.name}]({image}) | "
        f"{expert_result.row()} | {random_result.row()} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--task", action="append", choices=sorted(TASKS), help="default: uirl's own tasks"
    )
    p.add_argument("--episodes", type=int, default=20, help="expert episodes per task")
    p.add_argument("--random-episodes", type=int, default=20)
    p.add_argument("--max-steps", type=int, default=60, help="steps before an episode is cut")
    p.add_argument("--doc", type=Path, default=REPO / "docs" / "tasks.md")
    p.add_argument("--images", type=Path, default=REPO / "docs" / "images" / "tasks")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    rows = []
    for name in args.task or sorted(OWN_TASKS):
        t0 = time.perf_counter()
        rows.append(report_task(TASKS[name], args))
        logger.info("%s: %s (%.0f s)", name, rows[-1], time.perf_counter() - t0)
    command = "python scripts/task_report.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    table = "\n".join(
        [
            START,
            f"Command: `{command.strip()}`; {datetime.now(UTC):%Y-%m-%d}, "
            f"{platform.machine()}, test split, default options, at most "
            f"{args.max_steps} steps an episode.",
            "",
            "| task | screen (reset seed 0) | expert success | expert steps | random success "
            "| random steps |",
            "| --- | --- | --- | --- | --- | --- |",
            *rows,
            END,
        ]
    )
    text = args.doc.read_text() if args.doc.exists() else f"# Tasks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        raise SystemExit(f"{args.doc} has no {START} ... {END} markers to replace")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    args.doc.write_text(before + table + after)
    print(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
