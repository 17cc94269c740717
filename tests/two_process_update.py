"""Two processes run :func:`~uirl_agents.trainers.update.run_update` on a stand-in model
and report each optimizer step's completion tokens per process (a test helper).

    torchrun --standalone --nproc_per_node 2 tests/two_process_update.py OUT.json

Process 0 holds 8 short samples (one micro-batch), process 1 eight long ones (four
micro-batches); one micro-batch per optimizer step. Gloo on CPU, no model download.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist

from uirl_agents.trainers.update import BatchLoss, TokenSample, run_update

MICRO_BATCH_TOKENS = 240


def process_samples(rank: int) -> list[TokenSample]:
    """Rank 0: one micro-batch of 8 short samples; rank 1: four of two long ones."""
    rng = np.random.default_rng(rank)
    lengths = rng.integers(3, 9, 8) if rank == 0 else rng.integers(60, 100, 8)
    return [TokenSample([], [], [1] * int(n), num_tokens=int(n) + 20) for n in lengths]


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def reduce(value: float, op: dist.ReduceOp) -> float:
        t = torch.tensor([float(value)], dtype=torch.float64)
        dist.all_reduce(t, op=op)
        return float(t)

    def sum_all_dict(values: dict[str, float]) -> dict[str, float]:
        gathered: list[dict[str, float]] = [{}] * world
        dist.all_gather_object(gathered, values)
        keys = {k for d in gathered for k in d}
        return {k: sum(d.get(k, 0.0) for d in gathered) for k in keys}

    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    steps: list[int] = [0]

    class Recorder(torch.optim.SGD):
        def step(self, closure: object = None) -> None:  # the step's tokens, then a new one
            steps.append(0)

    def loss_fn(batch: list[TokenSample]) -> BatchLoss:
        tokens = sum(len(s.completion_ids) for s in batch)
        steps[-1] += tokens
        return BatchLoss(loss_sum=model.weight.sum() * tokens, stats={})

    optim = SimpleNamespace(
        epochs=1,
        micro_batch_tokens=MICRO_BATCH_TOKENS,
        grad_accumulation_steps=1,
        max_grad_norm=0,
        sort_by_length=True,
    )
    run = SimpleNamespace(
        config=SimpleNamespace(optim=optim, seed=0),
        model=model,
        rank=rank,
        world_size=world,
        sharded=False,
        trainable=list(model.parameters()),
        optimizer=Recorder(model.parameters(), lr=0.0),
        sum_all=lambda v: reduce(v, dist.ReduceOp.SUM),
        max_all=lambda v: reduce(v, dist.ReduceOp.MAX),
        sum_all_dict=sum_all_dict,
        autocast=contextlib.nullcontext,
    )
    metrics = run_update(run, process_samples(rank), loss_fn, seed_stream=0, iteration=0)
    per_rank: list[list[int]] = [[]] * world
    dist.all_gather_object(per_rank, steps[:-1])
    if rank == 0:
        report = {"step_tokens": per_rank, "optimizer_steps": metrics["train/optimizer_steps"]}
        with open(out, "w") as f:
            json.dump(report, f)
    # Both ranks past their last collective, then out without tearing gloo down: its
    # teardown (destroy_process_group, or the interpreter's exit) now and then aborts a
    # rank with "terminate called without an active exception" (SIGABRT), even after a
    # barrier (a CI run of 2026-11-27). Nothing is left to flush: the report is closed.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
