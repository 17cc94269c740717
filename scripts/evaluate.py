"""Benchmark agents on uirl/SimpleDataEntry-v0 on local sessions.

Every agent plays the same episodes (seeds ``seed .. seed+episodes-1``, same rows).
Writes, under ``--out``: ``results.json``, ``results.md``, ``results.png`` and, per agent,
a replayable run directory with ``index.html``.

    python scripts/evaluate.py --agent expert --agent random --agent hf:tiny \\
        --episodes 6 --num-envs 2 --rows 1-2 --out runs/eval
    python scripts/evaluate.py --agent openai:ui-tars@http://127.0.0.1:8000/v1 --episodes 50
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import sys
from pathlib import Path

from uirl_agents.evaluate import (
    AGENT_SYNTAX,
    AgentSpecError,
    append_leaderboard,
    build_policy,
    markdown_table,
    parse_agent,
    summarise,
    write_reports,
)
from uirl_agents.rollout import EpisodeSpec, collect_episodes
from uirl_agents.trajectories import TrajectoryWriter
from uirl_agents.view import write_viewer
from uirl_gym.vector import SessionVectorEnv


def parse_rows(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not match:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: expected N or N-M, e.g. 1 or 1-3")
    low, high = int(match[1]), int(match[2] or match[1])
    if not 1 <= low <= high <= 20:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: expected 1 <= N <= M <= 20")
    return low, high


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--agent", action="append", required=True, help=f"repeatable: {AGENT_SYNTAX}")
    p.add_argument("--episodes", type=int, default=20, help="episodes per agent")
    p.add_argument("--num-envs", type=int, default=2, help="sessions run concurrently")
    p.add_argument(
        "--rows", type=parse_rows, default=(1, 3), help="rows to copy per episode: N or N-M"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=60, help="steps before an episode is cut")
    p.add_argument("--out", type=Path, default=Path("runs/eval"))
    p.add_argument("--leaderboard", type=Path, help="append a row per agent to this markdown file")
    args = p.parse_args(argv)
    try:
        args.agents = [parse_agent(a) for a in args.agent]
    except AgentSpecError as exc:
        p.error(str(exc))
    if args.episodes < 1 or args.num_envs < 1:
        p.error("--episodes and --num-envs must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    rng = random.Random(args.seed)
    specs = [
        EpisodeSpec(seed=args.seed + k, options={"num_rows": rng.randint(*args.rows)})
        for k in range(args.episodes)
    ]
    settings = {
        "episodes": args.episodes,
        "rows": "-".join(map(str, sorted(set(args.rows)))),
        "seed": args.seed,
        "num_envs": args.num_envs,
        "max_steps": args.max_steps,
    }
    results = []
    envs = SessionVectorEnv(args.num_envs)
    try:
        for spec in args.agents:
            policy = build_policy(spec, lambda i: envs.envs[i].oracle(), args.out, args.seed)
            run_dir = args.out / re.sub(r"[^A-Za-z0-9_.+-]", "_", spec.label)
            with TrajectoryWriter(run_dir, append=False) as writer:
                episodes = collect_episodes(
                    policy,
                    envs,
                    specs,
                    max_steps=args.max_steps,
                    writer=writer,
                    keep_screenshots=False,
                    progress=spec.label,
                )
            write_viewer(run_dir)
            results.append(summarise(spec.label, episodes))
    finally:
        envs.close()
    write_reports(args.out, results, settings)
    if args.leaderboard:
        append_leaderboard(args.leaderboard, results, settings)
    print(markdown_table(results))
    print(
        f"\nwrote {args.out}/results.json, results.md, results.png; replays: {args.out}/*/index.html"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
