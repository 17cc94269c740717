"""Run a trainer under several processes and check that every process holds the same weights.

    torchrun --nproc_per_node 2 scripts/check_ranks.py --trainer grpo|ppo|rs \\
        --config scripts/configs/tiny_cpu.yaml --output-dir runs/check --iterations 2

Under ``accelerate launch --config_file scripts/configs/accelerate/fsdp.yaml`` (or with
``--model.fsdp true``) the model is sharded: the report says so, and how many trainable
parameters each process stores. Builds the run as the training scripts do, gathers every process's trainable weights
after the model is built and again after the iterations, and writes
``OUTPUT_DIR/rank_check.json`` (main process): the largest absolute difference
between any two processes' weights at both points (0 when in sync), the number of
trainable tensors compared, and the last iteration's rollout/trainer logprob mismatch
(GRPO). Any other argument is a config override, as in train_grpo.py / train_rs.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

import torch
from accelerate.utils import gather_object

from uirl_agents.trainers import sharding
from uirl_agents.trainers.algorithms.expert_iteration import ExpertIteration
from uirl_agents.trainers.algorithms.grpo import GRPO
from uirl_agents.trainers.algorithms.ppo import PPO
from uirl_agents.trainers.cli import parse_args
from uirl_agents.trainers.config import GRPOConfig, PPOConfig, RSConfig
from uirl_agents.trainers.loop import run_iterations
from uirl_agents.trainers.metrics import read_metrics
from uirl_agents.trainers.run import TrainingRun

TRAINERS = {
    "grpo": (GRPOConfig, GRPO),
    "ppo": (PPOConfig, PPO),
    "rs": (RSConfig, ExpertIteration),
}


def weight_spread(run: TrainingRun) -> float:
    """Largest ``|w_i - w_j|`` over trainable weights and process pairs, compared on the
    main process from gathered copies (independent of the trainer's own check)."""
    # Sharded (FSDP): every process compares the whole tensors, gathered.
    mine = {
        n: sharding.whole(p.detach()).cpu().clone()
        for n, p in run.model.named_parameters()
        if p.requires_grad
    }
    if run.value_head is not None:  # PPO's head is trained next to the model
        mine |= {
            f"value_head.{n}": p.detach().cpu().clone()
            for n, p in run.value_head.named_parameters()
        }
    everyone = gather_object([mine])
    worst = 0.0
    for other in everyone[1:]:
        for name, weight in everyone[0].items():
            worst = max(worst, float((weight.double() - other[name].double()).abs().max()))
    return worst


def _stored(tensor: torch.Tensor) -> torch.Tensor:
    """What this process stores of a tensor (its shard, for a sharded one)."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", choices=sorted(TRAINERS), required=True)
    args, rest = parser.parse_known_args()
    config_cls, algorithm = TRAINERS[args.trainer]
    config, output_dir = parse_args(config_cls, rest, "check_ranks.py")
    logging.basicConfig(
        level=logging.INFO if os.environ.get("RANK", "0") == "0" else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    with TrainingRun(config, output_dir, args.trainer) as run:
        held = gather_object([sum(_stored(p).numel() for p in run.trainable)])
        at_start = weight_spread(run)
        run_iterations(run, algorithm())
        at_end = weight_spread(run)
        if run.is_main:
            last = [r for r in read_metrics(output_dir) if "train/optimizer_steps" in r][-1]
            report = {
                "processes": run.world_size,
                "fsdp": run.sharded,
                "device": str(run.accelerator.device),
                "dtype": str(run.compute_dtype),
                "trainable_tensors": len(run.trainable),
                "trainable_parameters": sum(p.numel() for p in run.trainable),
                # What each process stores of them (FSDP: its shards; else everything).
                "trainable_parameters_per_process": held,
                "max_abs_difference_at_start": at_start,
                "max_abs_difference_at_end": at_end,
                **{k: v for k, v in last.items() if "mismatch" in k or k == "train/entropy"},
                "cuda": torch.cuda.is_available(),
            }
            (output_dir / "rank_check.json").write_text(json.dumps(report, indent=2) + "\n")
            print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
