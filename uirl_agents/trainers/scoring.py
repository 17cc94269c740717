"""What the policy-gradient algorithms share below them: token samples from episode
steps, and the scoring pass.

- :func:`token_sample`: one model step as a :class:`~uirl_agents.trainers.update.TokenSample`
  (its exact prompt and the sampled ids), or None when it cannot be trained on;
- :func:`score_samples`: one pass without gradients: the old (and reference)
  logprobs, the entropy, the rollout/trainer mismatch, and PPO's old values;
- :func:`sample_logprobs`: the policy's logprobs of a micro-batch's completions (the
  forward pass every loss and the scoring pass run).

GRPO (:mod:`~uirl_agents.trainers.grpo`), PPO (:mod:`~uirl_agents.trainers.ppo`) and
expert iteration's SFT loss (:mod:`~uirl_agents.trainers.sft`) import this module; it
imports none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from uirl_agents.policies.hf import completion_logprobs
from uirl_agents.trainers import sharding
from uirl_agents.trainers.config import GRPOSection
from uirl_agents.trainers.losses import token_budget_batches
from uirl_agents.trainers.model import reference_policy
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import TokenSample
from uirl_agents.trainers.value import ValueHead
from uirl_agents.trajectories import Episode, Step

logger = logging.getLogger(__name__)

# The random stream of GRPO's and PPO's data order in the update.
UPDATE_STREAM = 2


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
            entropies: list[torch.Tensor] = []
            states: list[torch.Tensor] | None = [] if value_head is not None else None
            old = sample_logprobs(
                run, batch, temperature=temperature, entropies=entropies, prompt_states=states
            )
            if value_head is not None:
                for sample, value in zip(batch, value_head(torch.stack(states)), strict=True):
                    sample.old_value = float(value)
            ref: list[torch.Tensor | None] = [None] * len(batch)
            if cfg.grpo.kl_beta > 0:
                with reference_policy(run.model):
                    ref = sample_logprobs(run, batch, temperature=temperature)
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


def sample_logprobs(
    run: TrainingRun,
    batch: Sequence[TokenSample],
    *,
    temperature: float = 1.0,
    entropies: list[torch.Tensor] | None = None,
    prompt_states: list[torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """The policy's logprobs of each sample's completion ids, one batched forward pass
    (:func:`~uirl_agents.policies.hf.completion_logprobs`: ``entropies`` and
    ``prompt_states`` receive, per sample, the sampling distribution's entropy per token
    and the hidden state at the last prompt token)."""
    return completion_logprobs(
        run.model,
        run.processor,
        [s.messages for s in batch],
        [s.images for s in batch],
        [s.completion_ids for s in batch],
        temperature=temperature,
        entropies=entropies,
        prompt_states=prompt_states,
    )
