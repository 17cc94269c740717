"""Benchmark agents on the uirl tasks, on local sessions or anywhere else.

Every agent plays the same episodes: per task, seeds ``seed .. seed+episodes-1`` (and,
on SimpleDataEntry, the same rows). With several tasks (``--task all``), the reports
add a per-task table and the mean over tasks.
Writes, under ``--out``: ``results.json``, ``results.md``, ``results.png`` (updated as
each agent finishes) and, per agent, a run directory with ``summary.json`` and a
replay, ``index.html``. ``--resume`` continues an interrupted run; a second run on an
``--out`` that a live run is using fails at once (``run.lock``).

    python scripts/evaluate.py --agent expert --agent random --agent hf:tiny \\
        --episodes 6 --num-envs 2 --rows 1-2 --out runs/eval
    python scripts/evaluate.py --agent openai:ui-tars@http://127.0.0.1:8000/v1 --episodes 50
    python scripts/evaluate.py --task miniwob --agent expert-elements \
        --agent openai:Qwen3-8B@http://127.0.0.1:8000/v1,format=axtree \
        --agent openai:Qwen2.5-VL-7B-Instruct@http://127.0.0.1:8001/v1,format=som
    python scripts/evaluate.py --agent expert --agent random --task all --episodes 10
    ANTHROPIC_API_KEY=... OPENAI_API_KEY=... python scripts/evaluate.py \\
        --agent anthropic:claude-sonnet-5-5 --agent openai-cua:gpt-5.4 \\
        --agent expert --task all --episodes 20 --out runs/vendors --leaderboard
    python scripts/evaluate.py --leaderboard runs   # merge every run under runs/

An agent that reads the page as text (``format=axtree``, ``format=som``,
``expert-elements``) plays on envs made with the observations it reads; the others on
envs with screenshots only (docs/agents.md, "Agents that read the page").

Sessions run where the ``--env.*`` options say, as in the trainers' ``env`` section
(docs/kubernetes.md): ``--env.runtime local`` (default), ``kubernetes`` (``--env.kubernetes.*``),
``servers`` (``--env.servers URL1,URL2``, one per ``--num-envs``) or ``openenv``
(``--env.openenv_url URL``)::

    python scripts/evaluate.py --agent random --num-envs 2 \
        --env.runtime servers --env.servers http://10.0.0.5:8001,http://10.0.0.5:8002
    python scripts/evaluate.py --agent hf:runs/grpo/checkpoints/iter_000100 --num-envs 16 \
        --env.runtime kubernetes --env.kubernetes.namespace uirl \
        --env.kubernetes.image REGISTRY/uirl-session:0.1.0 \
        --env.kubernetes.proxy_url http://127.0.0.1:8080
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import sys
from pathlib import Path
from typing import Any

from tqdm.contrib.logging import logging_redirect_tqdm

from uirl_agents.episodes.rollout import EpisodeSpec
from uirl_agents.evaluation.agents import AGENTS, AgentSpecError, agent_syntax, parse_agent
from uirl_agents.evaluation.benchmark import (
    AgentResult,
    RunInUseError,
    RunMismatchError,
    agent_run_dir,
    append_leaderboard,
    markdown_table,
    prepare_run,
    run_agent,
    run_lock,
    write_reports,
)
from uirl_agents.evaluation.cost import load_prices
from uirl_agents.evaluation.leaderboard import write_leaderboard
from uirl_agents.trainers.cli import add_field_options, field_overrides, load_config
from uirl_gym.make import (
    RuntimeSettings,
    build_runtime,
    check_runtime,
    vector_env,
)
from uirl_gym.tasks import SPLITS, expand_tasks
from uirl_gym.vector import SessionVectorEnv

# --leaderboard with no value: the run's own --out folder.
RUN_FOLDER = Path("\0out")


def parse_rows(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not match:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: expected N or N-M, e.g. 1 or 1-3")
    low, high = int(match[1]), int(match[2] or match[1])
    if not 1 <= low <= high <= 20:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: expected 1 <= N <= M <= 20")
    return low, high


def parse_tasks(text: str) -> list[str]:
    """Task ids, groups (``all``: uirl's own tasks; ``miniwob``, ``miniwob-deterministic``)
    and globs (``miniwob.click-*``), comma-separated."""
    try:
        return expand_tasks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--task {text!r}: {exc}") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        help=f"repeatable: {agent_syntax()} (none: only --leaderboard)",
    )
    p.add_argument(
        "--task",
        type=parse_tasks,
        default=["simple_data_entry"],
        help="task ids, comma-separated: an id, a group (all: uirl's own tasks; miniwob: "
        "every MiniWoB++ task; miniwob-deterministic) or a glob (miniwob.click-*); "
        "docs/tasks.md",
    )
    p.add_argument("--episodes", type=int, default=20, help="episodes per agent and task")
    p.add_argument("--num-envs", type=int, default=2, help="sessions run concurrently")
    p.add_argument(
        "--rows",
        type=parse_rows,
        default=(1, 3),
        help="SimpleDataEntry: rows to copy per episode: N or N-M",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--split",
        choices=sorted(SPLITS),
        default="test",
        help="task instances from the split no training run samples (test, the default "
        "for reports) or the training one",
    )
    p.add_argument("--max-steps", type=int, default=60, help="steps before an episode is cut")
    p.add_argument("--out", type=Path, default=Path("runs/eval"))
    p.add_argument(
        "--leaderboard",
        type=Path,
        nargs="?",
        const=RUN_FOLDER,
        metavar="DIR",
        help="DIR: merge every result folder under DIR into DIR/leaderboard.{html,md,json} "
        "(no DIR: --out); with --agent, after the run. FILE.md: append a row per agent to "
        "that markdown file instead",
    )
    p.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help="JSON or YAML file: model -> {input, output[, cache_read, cache_write]} USD per "
        "million tokens, over the built-in table (uirl_agents/cost.py)",
    )
    add_field_options(
        p.add_argument_group("where sessions run (the trainers' env.runtime settings)"),
        RuntimeSettings,
        prefix="env.",
    )
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out: play only the episodes it has not finished",
    )
    again.add_argument(
        "--overwrite", action="store_true", help="start afresh over a run already in --out"
    )
    args = p.parse_args(argv)
    if not args.agent and args.leaderboard is None:
        p.error("expected --agent (one or more), or --leaderboard DIR to merge earlier runs")
    try:
        args.agents = [parse_agent(a) for a in args.agent]
    except AgentSpecError as exc:
        p.error(str(exc))
    try:
        args.price_table = load_prices(args.prices) if args.prices else None
    except (OSError, ValueError) as exc:
        p.error(f"--prices: {exc}")
    if args.episodes < 1 or args.num_envs < 1:
        p.error("--episodes and --num-envs must be >= 1")
    if args.agents:
        args.sessions = runtime_settings(p, args)
    return args


def runtime_settings(p: argparse.ArgumentParser, args: argparse.Namespace) -> RuntimeSettings:
    """The ``--env.*`` options, checked before any agent loads (unreachable servers,
    RBAC, too few servers for --num-envs: the message says what to fix)."""
    try:
        settings = load_config(RuntimeSettings, None, field_overrides(args, "env."))
        for agent in args.agents:
            if not settings.has_oracle and AGENTS[agent.kind].reads_oracle:
                raise ValueError(
                    f"--agent {agent.label} reads the task's oracle, which an OpenEnv server "
                    "keeps to itself: evaluate the expert on another --env.runtime"
                )
            if settings.runtime == "openenv" and agent.observations:
                raise ValueError(
                    f"--agent {agent.label} reads the page as text ({', '.join(agent.observations)}), "
                    "which an OpenEnv server does not send: evaluate it on another --env.runtime"
                )
        check_runtime(settings, num_envs=args.num_envs)
    except ValueError as exc:
        p.error(str(exc))
    return settings


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # Log lines go through tqdm.write, so they never break a progress bar in two.
    with logging_redirect_tqdm():
        return evaluate(parse_args(argv))


def run_agents(
    args: argparse.Namespace, specs: list[EpisodeSpec], settings: dict[str, Any]
) -> tuple[list[AgentResult], list[Path]]:
    """Every agent in turn on the same sessions; the reports after each one.

    An agent's envs show what it reads (its ``observations``): the sub-envs are made
    again, on the same runtime, when an agent reads other observations than the one
    before, so a pixel agent's steps cost what they always did.
    """
    results: list[AgentResult] = []
    reports: list[Path] = []
    runtime = build_runtime(args.sessions)
    envs: SessionVectorEnv | None = None
    shown: tuple[str, ...] = ()  # the observations envs show
    try:
        for spec in args.agents:
            if envs is None or spec.observations != shown:
                if envs is not None:
                    envs.close()
                    envs = None
                # Only an agent that reads more than pixels asks for more (OpenEnv: none).
                extra = {"observations": spec.observations} if spec.observations else {}
                envs = vector_env(args.sessions, args.num_envs, runtime=runtime, **extra)
                shown = spec.observations
            results.append(
                run_agent(
                    spec,
                    envs,
                    specs,
                    args.out,
                    max_steps=args.max_steps,
                    seed=args.seed,
                    settings=settings,
                    resume=args.resume,
                    prices=args.price_table,
                )
            )
            # After every agent, so that an interrupted run keeps what it finished.
            reports = write_reports(args.out, results, settings)
    finally:
        if envs is not None:
            envs.close()
        if runtime is not None:
            runtime.close()
    return results, reports


def evaluate(args: argparse.Namespace) -> int:
    if not args.agents:
        return leaderboard(args)
    specs = []
    for task in args.task:
        rng = random.Random(args.seed)  # the same rows whatever the other tasks
        for k in range(args.episodes):
            options: dict[str, Any] = {"task": task, "split": args.split}
            if task == "simple_data_entry":
                options["num_rows"] = rng.randint(*args.rows)
            specs.append(EpisodeSpec(seed=args.seed + k, options=options))
    settings = {
        "tasks": args.task,
        "episodes": args.episodes,
        "rows": "-".join(map(str, sorted(set(args.rows)))),
        "seed": args.seed,
        "split": args.split,
        "num_envs": args.num_envs,
        "max_steps": args.max_steps,
    }
    labels = [spec.label for spec in args.agents]
    try:
        # Held until the run ends: a second run on --out fails here, before any session.
        with run_lock(args.out):
            prepare_run(args.out, settings, labels, resume=args.resume, overwrite=args.overwrite)
            results, reports = run_agents(args, specs, settings)
    except (RunInUseError, RunMismatchError) as exc:
        print(f"evaluate.py: error: {exc}", file=sys.stderr)
        return 2
    legacy = args.leaderboard is not None and args.leaderboard.suffix == ".md"
    if legacy:
        append_leaderboard(args.leaderboard, results, settings)
    print(markdown_table(results))
    print("\nwrote:")
    for path in reports:
        print(f"  {path}")
    for label in labels:
        run_dir = agent_run_dir(args.out, label)
        print(f"  {run_dir / 'summary.json'}\n  {run_dir / 'index.html'} (replay)")
    return 0 if legacy or args.leaderboard is None else leaderboard(args)


def leaderboard(args: argparse.Namespace) -> int:
    """Merge the result folders under --leaderboard (or --out) into one leaderboard."""
    root = args.out if args.leaderboard == RUN_FOLDER else args.leaderboard
    try:
        written = write_leaderboard(root)
    except FileNotFoundError as exc:
        print(f"evaluate.py: error: {exc}", file=sys.stderr)
        return 2
    print(written[0].read_text(encoding="utf-8"))
    print("leaderboard:")
    for path in written:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
