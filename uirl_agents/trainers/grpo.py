"""GRPO over multi-step episodes, readable top to bottom.

Per iteration:

1. **Collect.** Each process runs its groups: G episodes per task instance (same seed
   and options, one ``group_id``), sampled with the current weights; every step keeps
   the exact prompt (messages + the resized images the model saw), the completion's
   token ids and their logprobs.
2. **Advantages.** An episode's return (total reward) minus its group's mean (or the
   mean of the others, leave-one-out), divided by the group's std: the advantage of
   every generated token of every step of that episode.
3. **Update.** ``optim.epochs`` passes over the steps: micro-batches by token budget,
   ``optim.grad_accumulation_steps`` micro-batches per optimizer step. Each micro-batch
   rebuilds its prompts from the recorded messages and images and recomputes the
   completion logprobs in one forward pass
   (:func:`~uirl_agents.policies.hf.completion_logprobs`); the loss is the PPO clipped
   surrogate against the rollout logprobs, plus ``kl_beta`` times the k3 KL to the
   reference (the same model with its LoRA adapter disabled: no second copy), averaged
   over the iteration's completion tokens (every process; a constant normaliser).

Gradients: each process backpropagates its own micro-batches (their number differs
between processes: the token budget), then one all-reduce sums the trainable
parameters' gradients before the optimizer step. That is why the model is not
wrapped in DDP, whose reducer needs the same backward schedule on every process.

TRL: ``GRPOTrainer`` is not used: its ``rollout_func`` rebuilds pixels from the
dataset's image column, so it cannot train on per-step screenshots of multi-step
episodes. The pieces TRL would give (the clipped surrogate, k3 KL, group-normalised
advantages) are in :mod:`uirl_agents.trainers.losses`.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from uirl_agents.policies.hf import completion_logprobs
from uirl_agents.trainers.common import (
    TrainingRun,
    trainable_parameters,
)
from uirl_agents.trainers.config import GRPOConfig, GRPOSection
from uirl_agents.trainers.losses import (
    clipped_policy_loss,
    group_advantages,
    kl_k3,
    pad_sequences,
    token_budget_batches,
)
from uirl_agents.trainers.metrics import Stopwatch, perf_metrics, policy_seconds
from uirl_agents.trajectories import Episode

logger = logging.getLogger(__name__)

UPDATE_STREAM = 2


@dataclass
class StepSample:
    """One model step to train on: its exact prompt, completion, rollout logprobs, advantage."""

    messages: list[dict]
    images: list[np.ndarray]
    completion_ids: list[int]
    old_logprobs: list[float]
    advantage: float
    num_tokens: int


def vision_token_ids(model_config: object) -> frozenset[int]:
    """The ids a processor expands into image slots (Qwen2-VL-style configs)."""
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    ids = (getattr(model_config, name, None) for name in names)
    return frozenset(i for i in ids if i is not None)


def step_samples(
    episodes: Sequence[Episode], cfg: GRPOSection, excluded_ids: frozenset[int] = frozenset()
) -> list[StepSample]:
    """Every model step of the episodes, with its episode's group-relative advantage.

    Steps without a completion (nothing generated) are left out, and so are steps whose
    completion holds one of ``excluded_ids``: a generated image placeholder token
    cannot be fed back (the model would count it as an image slot with no image), and
    an untrained model does produce one now and then.
    """
    advantages = group_advantages(
        [e.total_reward for e in episodes],
        [e.group_id for e in episodes],
        leave_one_out=cfg.leave_one_out,
        scale_by_std=cfg.scale_advantages,
    )
    samples = []
    for episode, advantage in zip(episodes, advantages, strict=True):
        for step in episode.steps:
            if not step.completion_ids or step.messages is None or step.model_images is None:
                continue
            if excluded_ids.intersection(step.completion_ids):
                logger.debug("step left out: its completion holds an image placeholder token")
                continue
            samples.append(
                StepSample(
                    messages=step.messages,
                    images=step.model_images,
                    completion_ids=list(step.completion_ids),
                    old_logprobs=list(step.logprobs or []),
                    advantage=float(advantage),
                    num_tokens=len(step.prompt_ids or []) + len(step.completion_ids),
                )
            )
    return samples


@dataclass
class LossTerms:
    """One micro-batch's loss (summed over its completion tokens) and statistics."""

    loss_sum: torch.Tensor
    num_tokens: int
    num_clipped: int
    kl_sum: float
    ratio_error_max: float  # max |log ratio|: 0 on-policy, before any update


def loss_terms(
    model: torch.nn.Module,
    processor: object,
    batch: Sequence[StepSample],
    *,
    clip_epsilon: float,
    kl_beta: float,
    temperature: float,
) -> LossTerms:
    """Recompute the batch's completion logprobs (with gradients) and its GRPO loss."""
    args = (
        processor,
        [s.messages for s in batch],
        [s.images for s in batch],
        [s.completion_ids for s in batch],
    )
    new = completion_logprobs(model, *args, temperature=temperature)
    logprobs = pad_sequence(new, batch_first=True)
    device = logprobs.device
    old = pad_sequences([s.old_logprobs for s in batch]).to(device)
    mask = pad_sequences([[1.0] * len(s.completion_ids) for s in batch]).to(device)
    advantages = torch.tensor([s.advantage for s in batch], device=device).unsqueeze(1)
    per_token, clipped = clipped_policy_loss(logprobs, old, advantages, clip_epsilon)
    kl_sum = 0.0
    if kl_beta > 0:
        with torch.no_grad(), model.disable_adapter():
            ref = pad_sequence(completion_logprobs(model, *args, temperature=temperature), True)
        kl = kl_k3(logprobs, ref)
        per_token = per_token + kl_beta * kl
        kl_sum = float((kl.detach() * mask).sum())
    log_ratio = (logprobs.detach() - old) * mask
    return LossTerms(
        loss_sum=(per_token * mask).sum(),
        num_tokens=int(mask.sum()),
        num_clipped=int((clipped & mask.bool()).sum()),
        kl_sum=kl_sum,
        ratio_error_max=float(log_ratio.abs().max()) if log_ratio.numel() else 0.0,
    )


def optimizer_step(run: TrainingRun) -> float:
    """Sum gradients over processes, clip, step; returns the pre-clip gradient norm."""
    params = trainable_parameters(run.model)
    if run.world_size > 1:
        flat = torch.cat(
            [
                p.grad.flatten() if p.grad is not None else torch.zeros_like(p).flatten()
                for p in params
            ]
        )
        flat = run.accelerator.reduce(flat, reduction="sum")
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).to(p.dtype)
            offset += n
    max_norm = run.config.optim.max_grad_norm or math.inf
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return grad_norm


def policy_update(
    run: TrainingRun, samples: Sequence[StepSample], iteration: int
) -> dict[str, float]:
    """``optim.epochs`` passes of clipped-surrogate updates over this iteration's steps.

    Every optimizer step's loss is its tokens' summed loss divided by one constant:
    the iteration's completion tokens (every process) over the optimizer steps per
    epoch. So leaving out zero-advantage steps (``grpo.skip_zero_advantage``, without
    KL) only saves compute: the gradient is the one those steps, contributing 0,
    would have given. Every process takes the same number of optimizer steps (the most
    any process needs); a process out of micro-batches contributes zero gradients.
    """
    cfg = run.config
    o, g = cfg.optim, cfg.grpo
    total_tokens = run.sum_all(sum(len(s.completion_ids) for s in samples))
    if g.skip_zero_advantage and g.kl_beta == 0:
        samples = [s for s in samples if s.advantage != 0]
    rng = np.random.default_rng([cfg.seed, UPDATE_STREAM, iteration, run.rank])
    totals: dict[str, float] = defaultdict(float)
    grad_norms: list[float] = []
    ratio_error_first = 0.0
    run.model.train()
    for _epoch in range(o.epochs):
        shuffled = [samples[i] for i in rng.permutation(len(samples))]
        micro = token_budget_batches(shuffled, lambda s: s.num_tokens, o.micro_batch_tokens)
        num_steps = math.ceil(run.max_all(len(micro)) / o.grad_accumulation_steps)
        normaliser = max(total_tokens / max(num_steps, 1), 1.0)
        for k in range(num_steps):
            chunk = micro[k * o.grad_accumulation_steps : (k + 1) * o.grad_accumulation_steps]
            for batch in chunk:
                terms = loss_terms(
                    run.model,
                    run.processor,
                    batch,
                    clip_epsilon=g.clip_epsilon,
                    kl_beta=g.kl_beta,
                    temperature=cfg.rollout.temperature,
                )
                (terms.loss_sum / normaliser).backward()
                if not grad_norms:  # weights are still the rollout's: the ratio must be 1
                    ratio_error_first = max(ratio_error_first, terms.ratio_error_max)
                totals["loss"] += float(terms.loss_sum.detach())
                totals["tokens"] += terms.num_tokens
                totals["clipped"] += terms.num_clipped
                totals["kl"] += terms.kl_sum
                totals["seq_tokens"] += sum(s.num_tokens for s in batch)
            grad_norms.append(optimizer_step(run))
    run.model.eval()
    tokens = run.sum_all(totals["tokens"])
    return {
        "train/loss": run.sum_all(totals["loss"]) / max(tokens, 1.0),
        "train/kl": run.sum_all(totals["kl"]) / max(tokens, 1.0),
        "train/clip_fraction": run.sum_all(totals["clipped"]) / max(tokens, 1.0),
        "train/grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
        "train/optimizer_steps": float(len(grad_norms)),
        "train/samples": run.sum_all(len(samples)),
        "train/ratio_error_first_step": run.max_all(ratio_error_first),
        "train/tokens_processed": totals["seq_tokens"],
    }


def train_grpo(config: GRPOConfig, output_dir: str | Path) -> None:
    """Run (or resume) GRPO in ``output_dir``; every process calls this.

    Raises:
        ValueError: the config does not fit the number of processes.
    """
    with TrainingRun(config, output_dir, "grpo") as run:
        run.evaluate_at_start()
        for iteration in run.iterations():
            watch = Stopwatch()
            with watch.phase("rollout"):
                episodes = run.collect(
                    run.policy, run.episode_specs(iteration), tag=f"iter_{iteration:06d}"
                )
            watch.add("policy", policy_seconds(episodes))
            samples = step_samples(episodes, config.grpo, vision_token_ids(run.model.config))
            with watch.phase("train"):
                train = policy_update(run, samples, iteration)
            run.state["episodes"] += int(run.sum_all(len(episodes)))
            run.publish_weights(iteration + 1)
            tokens = train.pop("train/tokens_processed")
            metrics = {
                **run.episode_metrics(episodes, "rollout"),
                **train,
                **perf_metrics(watch.totals, watch.elapsed(), tokens),
            }
            run.end_iteration(iteration, metrics)
