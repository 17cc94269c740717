"""PPO over multi-step episodes: a value head, GAE over per-step rewards
(uirl_agents/trainers/algorithms/ppo.py).

    python scripts/train_ppo.py --config scripts/configs/tiny_cpu.yaml --output-dir runs/ppo \
        --rollout.group_size 1
    accelerate launch --num_processes 8 scripts/train_ppo.py \
        --config scripts/configs/qwen25vl_3b_lora.yaml --output-dir runs/ppo-3b

Every PPO setting is in the config's ppo section (``--ppo.kl_beta 0.02 --ppo.lam 0.9``);
a YAML file's grpo and rs sections are other trainers' and ignored. Any config field can
be overridden the same way (``--optim.learning_rate 1e-4``). Rerunning the same command
resumes from the last checkpoint in the output dir.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tqdm.contrib.logging import logging_redirect_tqdm

from uirl_agents.trainers.algorithms.ppo import PPO
from uirl_agents.trainers.cli import parse_args
from uirl_agents.trainers.config import PPOConfig
from uirl_agents.trainers.loop import train


def train_ppo(config: PPOConfig, output_dir: Path) -> None:
    """The loop with PPO's hooks."""
    train(config, output_dir, PPO())


def main(argv: list[str] | None = None) -> None:
    config, output_dir = parse_args(PPOConfig, argv, __doc__.splitlines()[0])
    # Under torchrun / accelerate launch only the main process (RANK 0) talks.
    main_process = os.environ.get("RANK", "0") == "0"
    logging.basicConfig(
        level=logging.INFO if main_process else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    # Log lines go through tqdm.write, so they never break a progress bar in two.
    with logging_redirect_tqdm():
        train_ppo(config, output_dir)


if __name__ == "__main__":
    main()
