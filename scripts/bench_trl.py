"""TRL's GRPOTrainer against uirl's GRPO trainer: the same task, model, batch and updates.

    python scripts/bench_trl.py --output-dir runs/bench_trl

Arm (a) runs scripts/train_trl.py (TRL: one training sample per episode, every
screenshot of the episode in its context), arm (b) scripts/train_grpo.py (uirl: one
sample per step, one screenshot each), one after the other, each in its own
subprocess with OMP_NUM_THREADS=1: SimpleDataEntry with one row, at most 3 steps per
episode, the tiny random Qwen2.5-VL, 8 episodes (2 groups of 4) per update, 3 updates.
Prints one Markdown table: medians over the updates, the peak RSS of each trainer
process and each run's wall time (TRL's includes its tool-call cold start, which its
per-update time does not).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EPISODES, GROUP, MAX_STEPS = 8, 4, 3
TRL_SCREENSHOT = (320, 200)  # what TRL's model sees; uirl's sees the 1280x800 screen


def trl_config(updates: int, cold_start_steps: int) -> dict[str, Any]:
    """trl_tiny_cpu.yaml, on tiny Qwen2.5-VL and the benchmark's batch."""
    return {
        "model": "tiny-qwen2.5-vl",
        "seed": 0,
        "tool_call_cold_start": {
            "steps": cold_start_steps,
            "calls": [{"name": "click", "arguments": {"x": 160, "y": 100}}],
        },
        "environment": {
            "task": "uirl/SimpleDataEntry-v0",
            "max_steps": MAX_STEPS,
            "screenshot_size": list(TRL_SCREENSHOT),
            "reward_mode": "sparse",
            "task_options": {"num_rows": 1},
        },
        "dataset": {"num_rows": 16},
        "grpo": {
            "per_device_train_batch_size": EPISODES,
            "num_generations": GROUP,
            "max_completion_length": 512,
            "max_steps": updates,
            "learning_rate": 1.0e-3,
            "temperature": 1.0,
            "logging_steps": 1,
            "save_strategy": "no",
            "report_to": "none",
            "use_cpu": True,
            "bf16": False,
        },
    }


def run_trainer(command: list[str], log: Path) -> tuple[float, float]:
    """Run ``command`` (OMP_NUM_THREADS=1); return its wall seconds and peak RSS in GiB.

    The RSS is ``wait4``'s ``ru_maxrss`` of that one child: the largest of the trainer
    process and of the processes it waited for (its session servers, far smaller).
    """
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}  # this checkout first
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{command[1]} failed; see {log}")
    return wall, usage.ru_maxrss / 2**20  # KiB on Linux


def image_tokens(model_dir: Path, width: int, height: int) -> int:
    """Visual tokens of one screenshot for the model saved in ``model_dir``: its Qwen2-VL
    processor's resize (smart_resize between its pixel bounds), one token per merged patch."""
    from uirl_agents.formats.base import smart_resize

    config = json.loads((model_dir / "preprocessor_config.json").read_text())
    patch = config["patch_size"] * config["merge_size"]
    size = config["size"]
    h, w = smart_resize(height, width, patch, size["shortest_edge"], size["longest_edge"])
    return h * w // patch**2


def trl_arm(out: Path, updates: int, cold_start_steps: int) -> dict[str, float]:
    """TRL's GRPOTrainer through train_trl.py; figures from its trainer_state.json."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "config.yaml"
    config.write_text(yaml.safe_dump(trl_config(updates, cold_start_steps), sort_keys=False))
    command = [sys.executable, "scripts/train_trl.py", "--config", str(config)]
    wall, rss = run_trainer([*command, "--output-dir", str(out)], out / "train.log")
    return {**trl_figures(out), "rss": rss, "wall": wall}


def trl_figures(out: Path) -> dict[str, float]:
    """Per-update figures of a train_trl.py run, from its trainer_state.json."""
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "step_time" in h]
    seen = [0.0] + [h["num_tokens"] for h in steps]  # cumulative prompt + completion
    screenshots = statistics.median(h["uirl/images"] for h in steps)
    return {
        "tokens": statistics.median((b - a) / EPISODES for a, b in itertools.pairwise(seen)),
        "screenshots": screenshots,
        "per_sample": screenshots,
        "image_tokens": screenshots * image_tokens(out / "tiny-qwen2.5-vl", *TRL_SCREENSHOT),
        "update_s": statistics.median(h["step_time"] for h in steps),
        "train_share": float("nan"),  # TRL logs no generation time of its own
        "updates_s": sum(h["step_time"] for h in steps),
    }


def uirl_arm(out: Path, updates: int) -> dict[str, float]:
    """uirl's GRPO through train_grpo.py on tiny_cpu.yaml; figures from its metrics.jsonl."""
    overrides = {
        "iterations": updates,
        "rollout.episodes_per_iteration": EPISODES,
        "rollout.group_size": GROUP,
        "env.max_steps": MAX_STEPS,
        "env.task_options": "{simple_data_entry: {num_rows: 1}}",
        "env.reward_mode": "sparse",  # as TRL's arm
        "grpo.skip_zero_advantage": "false",  # train on every step, as TRL does
        "eval.episodes": 0,
        "checkpoint.every": updates,  # once, after the last update (the least allowed)
        "logging.progress": "false",
    }
    command = [sys.executable, "scripts/train_grpo.py", "--config", "scripts/configs/tiny_cpu.yaml"]
    command += [f"--{key}={value}" for key, value in overrides.items()]
    wall, rss = run_trainer([*command, "--output-dir", str(out)], out.with_suffix(".log"))
    return {**uirl_figures(out), "rss": rss, "wall": wall}


def uirl_figures(out: Path) -> dict[str, float]:
    """Per-update figures of a train_grpo.py run, from its metrics.jsonl."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "perf/iteration_s" in r]

    def median(fn: Any) -> float:
        return statistics.median(fn(r) for r in rows)

    def tokens(r: dict) -> float:  # tokens_per_s = tokens processed / training seconds
        train_s = r["perf/iteration_s"] * r["perf/time_share_train"]
        return r["perf/tokens_per_s"] * train_s / r["rollout/episodes"]

    screenshots = median(lambda r: r["train/samples"] / r["rollout/episodes"])
    return {
        "tokens": median(tokens),
        "screenshots": screenshots,
        "per_sample": 1.0,  # rollout.max_images: 1
        "image_tokens": screenshots * image_tokens(out / "tiny_model", 1280, 800),
        "update_s": median(lambda r: r["perf/iteration_s"]),
        "train_share": median(lambda r: r["perf/time_share_train"]),
        "updates_s": sum(r["perf/iteration_s"] for r in rows),
    }


ROWS = [
    ("tokens per episode (prompt + completion, trained)", "tokens", "{:.0f}"),
    ("screenshots per episode (trained)", "screenshots", "{:.1f}"),
    ("screenshots per training sample", "per_sample", "{:.1f}"),
    ("image tokens per episode", "image_tokens", "{:.0f}"),
    ("seconds per update (generation included)", "update_s", "{:.1f}"),
    ("training share of an update", "train_share", "{:.0%}"),
    ("peak RSS of the trainer (GiB)", "rss", "{:.2f}"),
    ("total wall time (s)", "wall", "{:.0f}"),
    ("of which outside the updates (s)", "outside", "{:.0f}"),
]


def table(trl: dict[str, float], uirl: dict[str, float]) -> str:
    lines = ["| per run (medians over updates) | TRL GRPOTrainer | uirl GRPO |", "|---|---:|---:|"]
    for label, key, fmt in ROWS:
        cells = []
        for arm in (trl, uirl):
            value = arm["wall"] - arm["updates_s"] if key == "outside" else arm[key]
            cells.append("n/a" if value != value else fmt.format(value))  # NaN: not logged
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True, help="the two runs go here")
    parser.add_argument("--updates", type=int, default=3, help="GRPO updates per arm")
    parser.add_argument("--cold-start-steps", type=int, default=800, help="TRL's tool-call SFT")
    args = parser.parse_args(argv)
    trl = trl_arm(args.output_dir / "trl", args.updates, args.cold_start_steps)
    uirl = uirl_arm(args.output_dir / "uirl", args.updates)
    print(table(trl, uirl))  # noqa: T201
    print(f"\n`python {' '.join(['scripts/bench_trl.py', *(argv or sys.argv[1:])])}`")  # noqa: T201


if __name__ == "__main__":
    main()
