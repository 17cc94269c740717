"""What GRPO and PPO share below both: token samples from episode steps, the scoring
pass, and the clipped-surrogate loss of a micro-batch.

- :func:`token_sample`: one model step as a :class:`~uirl_agents.trainers.update.TokenSample`
  (its exact prompt and the sampled ids), or None when it cannot be trained on;
- :func:`score_samples`: one pass without gradients: the old (and reference)
  logprobs, the entropy, the rollout/trainer mismatch, and PPO's old values;
- :func:`grpo_loss`: the clipped surrogate ``-min(r A, clip(r, 1-eps, 1+eps) A)``, times
  the truncated importance weight with ``grpo.tis_cap``, plus ``kl_beta`` times the k3
  KL, summed over a micro-batch's completion tokens (PPO adds its value loss to it).

GRPO (:mod:`~uirl_agents.trainers.grpo`) and PPO (:mod:`~uirl_agents.trainers.ppo`)
both import this module, and neither imports the other's update.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

from uirl_agents.policies.hf import completion_logprobs
from uirl_agents.trainers import sharding
from uirl_agents.trainers.common import TrainingRun, reference_policy
from uirl_agents.trainers.config import GRPOSection
from uirl_agents.trainers.losses import (
    clipped_policy_loss,
    kl_k3,
    pad_sequences,
    token_budget_batches,
    truncated_importance_weight,
)
from uirl_agents.trainers.update import BatchLoss, TokenSample
from uirl_agents.trainers.value import ValueHead
from uirl_agents.trajectories import Episode, Step

logger = logging.getLogger(__name__)

# The random stream of GRPO's and PPO's data order in the update.
UPDATE_STREAM = 2


def vision_token_ids(model_config: object) -> frozenset[int]:
    """The ids a processor expands into image slots (Qwen2-VL-style configs)."""
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    ids = (getattr(model_config, name, None) for name in names)
    return frozenset(i for i in ids if i is not None)


def token_sample(
    episode: Episode, step: Step, cfg: GRPOSection, excluded_ids: frozenset[int] = frozenset()
) -> TokenSample | None:
    """One model step as a sample to train on (advantage 1 until set), or None when it
    cannot be: no completion, or a completion that holds one of ``excluded_ids``.

    Raises:
        ValueError: ``cfg.tis_cap`` is set but the step has no rollout logprobs.
    """
    if not step.completion_ids or step.messages is None or step.model_images is None:
        return None
    if excluded_ids.intersection(step.completion_ids):
        logger.debug("step left out: its completion holds an image placeholder token")
        return None
    rollout = list(step.logprobs) if step.logprobs else None
    if cfg.tis_cap is not None and (rollout is None or len(rollout) != len(step.completion_ids)):
        raise ValueError(
            "grpo.tis_cap needs the rollout engine's logprob of every sampled token, "
            f"and a step of episode {episode.episode_id} has none: ask the server for "
            "logprobs (vLLM returns them), or set grpo.tis_cap: null"
        )
    return TokenSample(
        messages=step.messages,
        images=step.model_images,
        completion_ids=list(step.completion_ids),
        num_tokens=len(step.prompt_ids or []) + len(step.completion_ids),
        rollout_logprobs=rollout,
    )


def score_samples(
    run: TrainingRun, samples: Sequence[TokenSample], value_head: ValueHead | None = None
) -> dict[str, float]:
    """Fill in each sample's old (and reference) logprobs with the trainer's forward pass,
    and with ``value_head`` (PPO) its ``old_value``, from the same pass.

    Returns:
        ``train/entropy`` (mean per token of the policy's sampling distribution) and,
        where the rollout recorded logprobs, ``train/logprob_mismatch_mean`` / ``_max``:
        ``|logp_rollout - logp_trainer|`` per token, over every process.
    """
    cfg = run.config
    temperature = cfg.rollout.temperature
    entropy_sum, tokens, mismatch_sum, mismatch_max, compared = 0.0, 0, 0.0, 0.0, 0
    batches = token_budget_batches(samples, lambda s: s.num_tokens, cfg.optim.micro_batch_tokens)
    # Each process scores its own samples (as many passes as it has batches): the model
    # is gathered whole so that forward passes need no collective (FSDP).
    with torch.no_grad(), sharding.gathered(run.model), run.autocast():
        for batch in batches:
            args = _logprob_args(run, batch)
            entropies: list[torch.Tensor] = []
            states: list[torch.Tensor] | None = [] if value_head is not None else None
            old = completion_logprobs(
                *args, temperature=temperature, entropies=entropies, prompt_states=states
            )
            if value_head is not None:
                for sample, value in zip(batch, value_head(torch.stack(states)), strict=True):
                    sample.old_value = float(value)
            ref: list[torch.Tensor | None] = [None] * len(batch)
            if cfg.grpo.kl_beta > 0:
                with reference_policy(run.model):
                    ref = completion_logprobs(*args, temperature=temperature)
            for sample, lp, r, h in zip(batch, old, ref, entropies, strict=True):
                sample.old_logprobs, sample.ref_logprobs = lp.float().cpu(), r
                entropy_sum += float(h.sum())
                tokens += len(lp)
                rollout = sample.rollout_logprobs
                if rollout is not None and len(rollout) == len(lp) > 0:
                    diff = (torch.tensor(rollout) - sample.old_logprobs).abs()
                    mismatch_sum += float(diff.sum())
                    mismatch_max = max(mismatch_max, float(diff.max()))
                    compared += len(diff)
    metrics = {"train/entropy": run.sum_all(entropy_sum) / max(run.sum_all(tokens), 1.0)}
    if run.sum_all(compared):
        metrics["train/logprob_mismatch_mean"] = run.sum_all(mismatch_sum) / run.sum_all(compared)
        metrics["train/logprob_mismatch_max"] = run.max_all(mismatch_max)
    return metrics


def _logprob_args(run: TrainingRun, batch: Sequence[TokenSample]) -> tuple:
    return (
        run.model,
        run.processor,
        [s.messages for s in batch],
        [s.images for s in batch],
        [s.completion_ids for s in batch],
    )


def grpo_loss(
    run: TrainingRun,
    batch: Sequence[TokenSample],
    cfg: GRPOSection,
    temperature: float,
    prompt_states: list[torch.Tensor] | None = None,
) -> BatchLoss:
    """The micro-batch's clipped surrogate (+ KL) summed over its completion tokens.

    Needs :func:`score_samples` first (the old and reference logprobs). ``prompt_states``
    receives each sample's hidden state at its last prompt token, from the same pass (PPO's
    value head reads it).
    """
    logprobs = completion_logprobs(
        *_logprob_args(run, batch), temperature=temperature, prompt_states=prompt_states
    )
    logprobs = pad_sequence(logprobs, batch_first=True)
    device = logprobs.device
    old = pad_sequences([s.old_logprobs for s in batch]).to(device)
    mask = pad_sequences([[1.0] * len(s.completion_ids) for s in batch]).to(device)
    advantages = torch.tensor([s.advantage for s in batch], device=device).unsqueeze(1)
    per_token, clipped = clipped_policy_loss(logprobs, old, advantages, cfg.clip_epsilon)
    if cfg.tis_cap is not None:
        rollout = pad_sequences([s.rollout_logprobs for s in batch]).to(device)
        per_token = per_token * truncated_importance_weight(old, rollout, cfg.tis_cap)
    stats = {"clip_fraction": float((clipped & mask.bool()).sum())}
    if cfg.kl_beta > 0:
        ref = pad_sequences([s.ref_logprobs for s in batch]).to(device)
        kl = kl_k3(logprobs, ref)
        per_token = per_token + cfg.kl_beta * kl
        stats["kl"] = float((kl.detach() * mask).sum())
    stats["abs_log_ratio"] = float(((logprobs.detach() - old).abs() * mask).sum())
    return BatchLoss(loss_sum=(per_token * mask).sum(), stats=stats)
