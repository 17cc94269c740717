"""Expert iteration (rejection sampling + SFT) on the uirl env (trainers/algorithms/expert_iteration.py).

    python scripts/train_rs.py --config scripts/configs/tiny_cpu.yaml --output-dir runs/rs
    accelerate launch --num_processes 8 scripts/train_rs.py \
        --config scripts/configs/uitars15_7b_lora.yaml --output-dir runs/rs-7b

Any config field can be overridden: ``--rs.reward_threshold 0.5 --env.num_envs 8``.
Rerunning the same command resumes from the last checkpoint in the output dir.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tqdm.contrib.logging import logging_redirect_tqdm

from uirl_agents.trainers.algorithms.expert_iteration import ExpertIteration
from uirl_agents.trainers.cli import parse_args
from uirl_agents.trainers.config import RSConfig
from uirl_agents.trainers.loop import train


def train_rs(config: RSConfig, output_dir: Path) -> None:
    """The loop with expert iteration's hooks."""
    train(config, output_dir, ExpertIteration())


def main(argv: list[str] | None = None) -> None:
    config, output_dir = parse_args(RSConfig, argv, __doc__.splitlines()[0])
    # Under torchrun / accelerate launch only the main process (RANK 0) talks.
    main_process = os.environ.get("RANK", "0") == "0"
    logging.basicConfig(
        level=logging.INFO if main_process else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    # Log lines go through tqdm.write, so they never break a progress bar in two.
    with logging_redirect_tqdm():
        train_rs(config, output_dir)


if __name__ == "__main__":
    main()
