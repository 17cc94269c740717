"""The pure math of the trainers: advantages, the clipped policy loss, the k3 KL, batching.

Small functions on tensors and lists, no model and no env, each tested against a
hand-computed example (tests/test_trainers.py).

>>> group_advantages([1.0, 0.0, 2.0, 2.0], ["a", "a", "b", "b"]).round(4).tolist()
[0.7071, -0.7071, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import torch

T = TypeVar("T")


def group_advantages(
    returns: Sequence[float] | np.ndarray,
    group_ids: Sequence[str | None],
    *,
    leave_one_out: bool = False,
    scale_by_std: bool = True,
    negative_scale: float = 1.0,
    eps: float = 1e-6,
) -> np.ndarray:
    """Each episode's return relative to the other episodes of its group.

    ``A_i = (R_i - b_i) / (std(R_group) + eps)``, with the baseline ``b_i`` the group
    mean, or with ``leave_one_out`` the mean of the group's *other* returns (RLOO).
    ``std`` is the unbiased sample std (as TRL's GRPO); without ``scale_by_std`` the
    division is skipped. A group of one episode gets advantage 0. Negative advantages
    are then multiplied by ``negative_scale`` (1: plain GRPO; 0: only the episodes better
    than their group's baseline are trained on).

    Args:
        returns: one total reward per episode.
        group_ids: one group id per episode (episodes of one task instance share it).
        leave_one_out: baseline without the episode itself.
        scale_by_std: divide by the group's reward std.
        negative_scale: the weight of below-baseline episodes (>= 0).
        eps: added to the std (a group with equal returns gets 0, not NaN).

    Returns:
        float64 advantages, one per episode.

    Raises:
        ValueError: ``returns`` and ``group_ids`` differ in length.
    """
    returns = np.asarray(returns, dtype=np.float64)
    if len(returns) != len(group_ids):
        raise ValueError(
            f"Expected one group id per return, got {len(group_ids)} ids for {len(returns)} returns"
        )
    advantages = np.zeros_like(returns)
    members: dict[str | None, list[int]] = {}
    for i, gid in enumerate(group_ids):
        members.setdefault(gid, []).append(i)
    for indices in members.values():
        group = returns[indices]
        n = len(group)
        if n < 2:
            continue
        if leave_one_out:
            baseline = (group.sum() - group) / (n - 1)
        else:
            baseline = np.full(n, group.mean())
        centred = group - baseline
        scale = group.std(ddof=1) + eps
        if scale_by_std and scale > 0:  # equal returns: centred is all 0 already
            centred = centred / scale
        advantages[indices] = centred
    return np.where(advantages < 0, advantages * negative_scale, advantages)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_epsilon: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The PPO clipped surrogate, per token (to be minimised).

    ``loss = -min(r * A, clip(r, 1 - eps, 1 + eps) * A)`` with ``r = exp(logprobs -
    old_logprobs)``.

    Args:
        logprobs: per-token logprobs under the current policy (with gradients).
        old_logprobs: the same tokens' logprobs recorded during the rollout.
        advantages: broadcastable to ``logprobs`` (one per sequence: shape ``(B, 1)``).
        clip_epsilon: the clip range.

    Returns:
        ``(loss, clipped)``: per-token loss, and a bool mask of the tokens where the
        clipped term was the active one (its gradient is 0).
    """
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantages
    return -torch.minimum(unclipped, clipped), clipped < unclipped


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference) on tokens sampled from the policy.

    ``k3 = exp(ref - lp) - (ref - lp) - 1`` (Schulman's unbiased, always >= 0 estimator).
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def token_budget_batches(
    items: Sequence[T], num_tokens: Callable[[T], int], budget: int
) -> list[list[T]]:
    """Split ``items`` (in order) into micro-batches whose padded size fits ``budget``.

    A batch's padded size is ``len(batch) * max(num_tokens)``; an item larger than the
    budget on its own gets a batch of its own.

    >>> token_budget_batches([3, 3, 5, 9, 2], lambda n: n, 10)
    [[3, 3], [5], [9], [2]]
    """
    batches: list[list[T]] = []
    current: list[T] = []
    longest = 0
    for item in items:
        n = num_tokens(item)
        if current and (len(current) + 1) * max(longest, n) > budget:
            batches.append(current)
            current, longest = [], 0
        current.append(item)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


def pad_sequences(sequences: Sequence[Sequence[float]] | Sequence[torch.Tensor]) -> torch.Tensor:
    """Right-pad 1-D sequences with 0 into a float32 ``(B, T)`` tensor."""
    width = max((len(s) for s in sequences), default=0)
    out = torch.zeros((len(sequences), width), dtype=torch.float32)
    for i, seq in enumerate(sequences):
        out[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.float32)
    return out
