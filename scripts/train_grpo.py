"""GRPO over multi-step episodes (uirl_agents/trainers/algorithms/grpo.py).

    python scripts/train_grpo.py --config scripts/configs/tiny_cpu.yaml --output-dir runs/grpo
    accelerate launch --num_processes 8 scripts/train_grpo.py \
        --config scripts/configs/qwen25vl_3b_lora.yaml --output-dir runs/grpo-3b

PPO has its own script and config section (scripts/train_ppo.py). ``--algorithm ppo`` here
still runs PPO, with PPO's loss settings read from grpo.*, and says that this spelling
is deprecated (uirl_agents.trainers.config.PPO_SPELLING).

Any config field can be overridden: ``--optim.learning_rate 1e-4 --env.num_envs 8``.
Rerunning the same command resumes from the last checkpoint in the output dir.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from tqdm.contrib.logging import logging_redirect_tqdm

from uirl_agents.trainers.algorithms.grpo import GRPO
from uirl_agents.trainers.algorithms.ppo import PPO
from uirl_agents.trainers.cli import parse_args
from uirl_agents.trainers.config import GRPOConfig
from uirl_agents.trainers.loop import train


def train_grpo(config: GRPOConfig, output_dir: Path) -> None:
    """The loop with GRPO's hooks (with the deprecated ``algorithm: ppo``, PPO's on the
    config :meth:`~uirl_agents.trainers.config.GRPOConfig.as_ppo` makes)."""
    if config.algorithm == "ppo":
        train(config.as_ppo(), output_dir, PPO())
    else:
        train(config, output_dir, GRPO())


def main(argv: list[str] | None = None) -> None:
    # A deprecated spelling in the config or the flags is said on stderr, not only to tests.
    warnings.filterwarnings("default", category=DeprecationWarning, module="uirl_agents")
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
