"""Sync vs async rollouts: the same tiny GRPO run (same episodes, same updates) in both modes.

    python scripts/bench_async.py --output-dir runs/bench_async
    python scripts/bench_async.py --output-dir runs/bench_async --iterations 6 --optim.epochs 8

Runs ``scripts/train_grpo.py`` on ``scripts/configs/tiny_cpu.yaml`` (no evaluation)
once with ``rollout.mode sync`` and once with ``async``, each in a process of its own,
and prints a markdown table (also written to ``OUTPUT_DIR/bench_async.md``): the wall
time of the whole run and of its iterations, and the share of that time the actor
(collecting) and the learner (scoring and updating) were busy. Sync: the actor's share
is ``perf/time_share_env + perf/time_share_policy`` and the learner's
``perf/time_share_train``; async: ``async/actor_busy`` and ``async/learner_busy``.
Both runs use ``--torch-threads`` intra-op threads (default 1, ``OMP_NUM_THREADS``): on
a loaded 2-core machine torch's default of one thread per core made every forward
pass of the main thread ~60x slower than in a second Python thread (measured), which
would credit async mode with a gain that is not the overlap's.
Any other argument is a config override for both runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from uirl_agents.trainers.metrics import read_metrics

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "scripts" / "configs" / "tiny_cpu.yaml"


def run_mode(
    mode: str, output_dir: Path, iterations: int, overrides: list[str], torch_threads: int = 1
) -> dict:
    """One training run in ``mode``; its wall time and mean busy fractions."""
    out = output_dir / mode
    shutil.rmtree(out, ignore_errors=True)  # a fresh run, not a resumed one
    cmd = [sys.executable, str(REPO / "scripts" / "train_grpo.py"), "--config", str(CONFIG)]
    cmd += ["--output-dir", str(out), "--iterations", str(iterations), "--eval.episodes", "0"]
    cmd += ["--logging.progress", "false", "--rollout.mode", mode, *overrides]
    start = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(torch_threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"the {mode} run failed:\n{done.stderr[-4000:]}")
    wall = time.perf_counter() - start
    records = [r for r in read_metrics(out) if "perf/iteration_s" in r]
    if mode == "sync":
        actor = [r["perf/time_share_env"] + r["perf/time_share_policy"] for r in records]
        learner = [r["perf/time_share_train"] for r in records]
    else:
        actor = [r["async/actor_busy"] for r in records]
        learner = [r["async/learner_busy"] for r in records]
    return {
        "mode": mode,
        "wall_s": wall,
        "iterations_s": sum(r["perf/iteration_s"] for r in records),
        "episodes": sum(r["rollout/episodes"] for r in records),
        "optimizer_steps": sum(r["train/optimizer_steps"] for r in records),
        "actor_busy": sum(actor) / len(actor),
        "learner_busy": sum(learner) / len(learner),
        "staleness": sum(r.get("async/staleness_mean", 0.0) for r in records) / len(records),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| mode | run wall (s) | iterations (s) | episodes | optimizer steps | actor busy "
        "| learner busy | staleness (mean) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['wall_s']:.1f} | {r['iterations_s']:.1f} | {r['episodes']:.0f} "
            f"| {r['optimizer_steps']:.0f} | {r['actor_busy']:.0%} | {r['learner_busy']:.0%} "
            f"| {r['staleness']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--torch-threads", type=int, default=1)
    args, overrides = parser.parse_known_args()
    load = os.getloadavg()[0]
    rows = [
        run_mode(m, args.output_dir, args.iterations, overrides, args.torch_threads)
        for m in ("sync", "async")
    ]
    text = (
        table(rows) + f"\n\nload average (1 min) at the start: {load:.1f}, "
        f"{os.cpu_count()} cores, {args.torch_threads} torch thread(s)\n"
    )
    (args.output_dir / "bench_async.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
