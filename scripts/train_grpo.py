"""GRPO, or PPO (--algorithm ppo), over multi-step episodes (uirl_agents/trainers/grpo.py).

    python scripts/train_grpo.py --config scripts/configs/tiny_cpu.yaml --output-dir runs/grpo
    accelerate launch --num_processes 8 scripts/train_grpo.py \
        --config scripts/configs/qwen25vl_3b_lora.yaml --output-dir runs/grpo-3b

PPO (a value head, GAE over per-step rewards; uirl_agents/trainers/ppo.py):

    python scripts/train_grpo.py --config scripts/configs/tiny_cpu.yaml --output-dir runs/ppo \
        --algorithm ppo

Any config field can be overridden: ``--optim.learning_rate 1e-4 --env.num_envs 8``.
Rerunning the same command resumes from the last checkpoint in the output dir.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tqdm.contrib.logging import logging_redirect_tqdm

from uirl_agents.trainers.cli import parse_args
from uirl_agents.trainers.config import GRPOConfig
from uirl_agents.trainers.grpo import GRPO
from uirl_agents.trainers.loop import train
from uirl_agents.trainers.ppo import PPO


def train_grpo(config: GRPOConfig, output_dir: Path) -> None:
    """The loop with GRPO's hooks, or PPO's with ``algorithm: ppo`` (one config for both:
    PPO's loss reads the grpo section's fields too)."""
    train(config, output_dir, PPO() if config.algorithm == "ppo" else GRPO())


def main(argv: list[str] | None = None) -> None:
    config, output_dir = parse_args(GRPOConfig, argv, __doc__.splitlines()[0])
    # Under torchrun / accelerate launch only the main process (RANK 0) talks.
    main_process = os.environ.get("RANK", "0") == "0"
    logging.basicConfig(
        level=logging.INFO if main_process else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    # Log lines go through tqdm.write, so they never break a progress bar in two.
    with logging_redirect_tqdm():
        train_grpo(config, output_dir)


if __name__ == "__main__":
    main()
