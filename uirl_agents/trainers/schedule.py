"""The learning-rate schedule over iterations (``optim.lr_scheduler``).

Iteration ``i``'s update runs at ``learning_rate * lr_multiplier(i)``; the scheduler is
stepped once per iteration, after the update, and saved with checkpoints.

Warm-up: the first ``W = optim.warmup_iterations`` iterations run at ``(i + 1) / (W + 1)``
of the rate, rising linearly; none at 0. transformers' ``get_scheduler`` warms up over
optimizer steps from a rate of 0, which per iteration means a whole first iteration at
rate 0 (its AdamW moments advance, the weights do not move). After the warm-up, the
schedules are transformers' (``linear``: down to 0 over the remaining iterations,
``cosine``: half a cosine, the ``constant`` ones: flat), unchanged.

>>> [round(lr_multiplier("linear", i, warmup_iterations=2, iterations=5), 3) for i in range(5)]
[0.333, 0.667, 1.0, 0.667, 0.333]
"""

from __future__ import annotations

import functools
import math

import torch
from torch.optim.lr_scheduler import LambdaLR

SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")


def lr_multiplier(
    schedule: str, iteration: int, *, warmup_iterations: int, iterations: int
) -> float:
    """The fraction of the learning rate iteration ``iteration`` (from 0) runs at.

    Raises:
        ValueError: an unknown ``schedule``.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"optim.lr_scheduler: unknown {schedule!r}; allowed: {list(SCHEDULES)}")
    if iteration < warmup_iterations:
        return (iteration + 1) / (warmup_iterations + 1)
    if schedule in ("constant", "constant_with_warmup"):
        return 1.0
    progress = (iteration - warmup_iterations) / max(1, iterations - warmup_iterations)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def iteration_scheduler(
    optimizer: torch.optim.Optimizer, schedule: str, *, warmup_iterations: int, iterations: int
) -> LambdaLR:
    """A scheduler for :func:`lr_multiplier`, to step once per iteration (a ``LambdaLR``
    like transformers' schedulers: checkpoints of either load into the other)."""
    multiplier = functools.partial(
        lr_multiplier, schedule, warmup_iterations=warmup_iterations, iterations=iterations
    )
    return LambdaLR(optimizer, multiplier)
