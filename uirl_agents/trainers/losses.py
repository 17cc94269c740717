"""The pure math of the trainers: advantages (group-relative, GAE), the clipped policy and
value losses, the k3 KL, the clipped surrogate GRPO and PPO share, batching.

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
    return scale_negatives(advantages, negative_scale)


def scale_negatives(advantages: np.ndarray, scale: float) -> np.ndarray:
    """``advantages`` with the negative ones multiplied by ``scale`` (1: unchanged; 0:
    only better-than-baseline samples are trained on; docs/training.md, Learning demo).

    >>> scale_negatives(np.array([-2.0, 0.0, 1.0]), 0.5).tolist()
    [-1.0, 0.0, 1.0]
    """
    return np.where(advantages < 0, advantages * scale, advantages)


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


def gae_advantages(
    rewards: Sequence[float],
    values: Sequence[float],
    *,
    terminated: bool,
    last_value: float,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """One episode's generalised advantage estimates (GAE) and value targets.

    ``delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)`` and ``A_t = delta_t + gamma * lam *
    A_{t+1}``, backwards from the last step. The value after the last step is 0 when the
    episode ``terminated`` (nothing more to earn) and ``last_value`` (the value of the
    state it stopped in) when it was truncated: a time limit is not the end of the task.
    The targets are ``A_t + V(s_t)`` (lambda-returns).

    >>> adv, ret = gae_advantages([0.0, 1.0], [0.5, 0.5], terminated=True, last_value=9.0,
    ...                           gamma=1.0, lam=1.0)
    >>> adv.tolist(), ret.tolist()
    ([0.5, 0.5], [1.0, 1.0])

    Args:
        rewards: ``r_t``, one per step.
        values: ``V(s_t)``, the value of the state each step acted in.
        terminated: the episode ended in a terminal state (no bootstrap).
        last_value: ``V(s_T)``, the state after the last step (used when truncated).
        gamma: the discount.
        lam: GAE's lambda (0: one-step TD, 1: Monte Carlo return minus ``V``).

    Returns:
        ``(advantages, returns)``: float64, one per step.

    Raises:
        ValueError: ``rewards`` and ``values`` differ in length.
    """
    if len(rewards) != len(values):
        raise ValueError(
            f"Expected one value per reward, got {len(values)} values for {len(rewards)} rewards"
        )
    values_ = np.asarray(values, dtype=np.float64)
    advantages = np.zeros(len(rewards), dtype=np.float64)
    next_value = 0.0 if terminated else float(last_value)
    running = 0.0
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * next_value - values_[t]
        running = delta + gamma * lam * running
        advantages[t] = running
        next_value = values_[t]
    return advantages, advantages + values_


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    value_clip: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped value loss, per element (to be minimised).

    ``0.5 * max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2)``: the value may not
    gain from moving further than ``c`` from its estimate before the update. With
    ``value_clip`` None: ``0.5 * (V - R)^2``.

    Returns:
        ``(loss, clipped)``: per-element loss, and a bool mask of the elements where the
        clipped term was the larger one (the active one).
    """
    unclipped = (values - returns) ** 2
    if value_clip is None:
        return 0.5 * unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    moved = old_values + torch.clamp(values - old_values, -value_clip, value_clip)
    clipped = (moved - returns) ** 2
    return 0.5 * torch.maximum(unclipped, clipped), clipped > unclipped


def truncated_importance_weight(
    old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, cap: float
) -> torch.Tensor:
    """Per-token ``min(exp(old - behaviour), cap)``: how much likelier the learner's
    weights before the update make a token than the weights that sampled it (a rollout
    engine's kernels, or an actor some updates behind), truncated at ``cap``.

    A constant (no gradient flows through either input); the clipped surrogate is
    multiplied by it, so the ratio ``exp(logp - old)`` stays centred on the learner.

    >>> lp = torch.log(torch.tensor([0.5, 0.5, 0.2]))
    >>> truncated_importance_weight(lp, torch.log(torch.tensor([0.1, 0.5, 0.4])), 2.0)
    tensor([2.0000, 1.0000, 0.5000])
    """
    return torch.exp(old_logprobs - behaviour_logprobs).clamp(max=cap).detach()


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference) on tokens sampled from the policy.

    ``k3 = exp(ref - lp) - (ref - lp) - 1`` (Schulman's unbiased, always >= 0 estimator).
    Its value estimates KL(policy || reference); as a loss on tokens sampled from the
    policy, its expected gradient is the reverse KL's, KL(reference || policy)
    (``(1 - exp(ref - lp)) * grad lp`` per token; tests/test_trainers.py).
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    *,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    weights: torch.Tensor,
    clip_epsilon: float,
    rollout_logprobs: torch.Tensor | None = None,
    tis_cap: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO's loss and PPO's policy term over a padded micro-batch, summed over its tokens.

    Per token, :func:`clipped_policy_loss`, times :func:`truncated_importance_weight`
    against ``rollout_logprobs`` when ``tis_cap`` is set, plus ``kl_beta`` times
    :func:`kl_k3` to ``ref_logprobs`` when ``kl_beta > 0``; each token times ``mask``
    (0 on padding) and its sample's ``weights``.

    Args:
        logprobs: ``(B, T)`` the current policy's (with gradients).
        old_logprobs: ``(B, T)`` the scoring pass's, before the update.
        advantages, weights: ``(B, 1)``: each sample's advantage and token weight.
        mask: ``(B, T)``: 1 on completion tokens, 0 on padding.
        clip_epsilon: the clip range.
        rollout_logprobs: ``(B, T)`` the rollout engine's (needed with ``tis_cap``).
        tis_cap: the truncated importance weight's cap (None: no weight).
        ref_logprobs: ``(B, T)`` the reference policy's (needed with ``kl_beta > 0``).
        kl_beta: the KL term's weight.

    Returns:
        ``(loss_sum, stats)``: the weighted sum over tokens (to be minimised), and sums
        over tokens of ``clip_fraction`` (tokens clipped), ``abs_log_ratio`` and, with
        ``kl_beta > 0``, ``kl``.
    """
    per_token, clipped = clipped_policy_loss(logprobs, old_logprobs, advantages, clip_epsilon)
    if tis_cap is not None:
        if rollout_logprobs is None:
            raise ValueError("tis_cap needs rollout_logprobs")
        per_token = per_token * truncated_importance_weight(old_logprobs, rollout_logprobs, tis_cap)
    stats = {"clip_fraction": float((clipped & mask.bool()).sum())}
    if kl_beta > 0:
        if ref_logprobs is None:
            raise ValueError("kl_beta > 0 needs ref_logprobs")
        kl = kl_k3(logprobs, ref_logprobs)
        per_token = per_token + kl_beta * kl
        stats["kl"] = float((kl.detach() * mask).sum())
    stats["abs_log_ratio"] = float(((logprobs.detach() - old_logprobs).abs() * mask).sum())
    return (per_token * mask * weights).sum(), stats


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


def pad_sequences(sequences: Sequence[Sequence[float] | torch.Tensor]) -> torch.Tensor:
    """Right-pad 1-D sequences with 0 into a float32 ``(B, T)`` tensor."""
    width = max((len(s) for s in sequences), default=0)
    out = torch.zeros((len(sequences), width), dtype=torch.float32)
    for i, seq in enumerate(sequences):
        out[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.float32)
    return out
