"""The policy update every algorithm shares: token samples, micro-batches, gradients,
optimizer steps.

Expert iteration (SFT on kept episodes), GRPO and PPO differ only in the per-token loss
of a micro-batch (and in how they weigh samples); everything around it is here, written
once:

- :class:`TokenSample`: one model step to train on (its exact prompt as messages +
  the images the model saw, and the completion's token ids as sampled);
  :func:`token_sample` makes one of an episode's step, :func:`weigh_episode` sets an
  episode's samples' ``token_weight``;
- :func:`update_schedule`: an epoch's samples spread over optimizer steps (each
  process's data in every step, in its share of the tokens) and cut into
  micro-batches by token budget, the same number of steps on every process;
- :func:`run_update`: ``optim.epochs`` passes; each optimizer step backpropagates its
  micro-batches' summed loss divided by one constant (the iteration's completion
  tokens over every process, each times its ``token_weight``, over the epoch's
  optimizer steps: a token mean that does not depend on how tokens fall into
  micro-batches or processes, TRL's ``loss_type="dapo"``; with per-episode weights, a
  mean over episodes), sums gradients over processes (:func:`all_reduce_gradients`),
  clips and steps.

Why not DDP: processes take different numbers of micro-batches (their episodes differ
in length), and DDP's reducer needs the same backward schedule everywhere. A process
with fewer micro-batches takes part in every all-reduce with zero gradients. With
FSDP (:mod:`~uirl_agents.trainers.sharding`) every forward pass is a collective call,
so such a process also runs the missing forward/backward passes, on a placeholder
sample with weight 0.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from uirl_agents.episodes.trajectories import Episode, Step
from uirl_agents.trainers import sharding
from uirl_agents.trainers.losses import token_budget_batches

if TYPE_CHECKING:
    from uirl_agents.trainers.run import TrainingRun

logger = logging.getLogger(__name__)

# Gradients are summed over processes this many bytes at a time: one flat copy of every
# gradient would cost a full model's worth of memory (~14 GB in bf16 for 7B).
BUCKET_BYTES = 32 * 2**20
T = TypeVar("T")


@dataclass
class TokenSample:
    """One model step to train on.

    Attributes:
        messages, images: the prompt exactly as the model saw it.
        completion_ids: the completion's token ids as sampled (end-of-turn included).
        num_tokens: prompt + completion tokens (the micro-batch budget's unit).
        advantage: GRPO's advantage of the step's episode (1.0 for SFT).
        rollout_logprobs: the rollout engine's logprobs of ``completion_ids`` (None:
            not recorded).
        old_logprobs, ref_logprobs: the trainer's logprobs before the update and the
            reference policy's, filled in by GRPO's scoring pass.
        old_value, value_target: PPO: the value head's ``V(s)`` before the update
            (scoring pass) and the step's GAE return.
        token_weight: the weight of each of its completion tokens in the loss and in
            the normaliser (1: a token mean; ``grpo.loss_normalization: episode`` sets
            1 / the episode's tokens, which makes the loss a mean over episodes).
        image_features: its images' vision-tower features, set for the scoring pass
            and the update where they are computed once per iteration
            (:func:`~uirl_agents.trainers.image_features.cached_image_features`); None:
            the forward passes encode the pixels.
    """

    messages: list[dict]
    images: list[np.ndarray]
    completion_ids: list[int]
    num_tokens: int
    advantage: float = 1.0
    rollout_logprobs: list[float] | None = None
    old_logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    old_value: float | None = None
    value_target: float | None = None
    token_weight: float = 1.0
    image_features: list[torch.Tensor] | None = None

    @property
    def weighted_tokens(self) -> float:
        """Its share of the normaliser: its completion tokens times their weight."""
        return self.token_weight * len(self.completion_ids)


# The random stream of GRPO's and PPO's data order in the update.
UPDATE_STREAM = 2


def token_sample(
    episode: Episode,
    step: Step,
    tis_cap: float | None = None,
    excluded_ids: frozenset[int] = frozenset(),
) -> TokenSample | None:
    """One model step as a sample to train on (advantage 1 until set), or None when it
    cannot be: no completion, or a completion that holds one of ``excluded_ids``.

    Raises:
        ValueError: ``tis_cap`` (``grpo.tis_cap``, ``ppo.tis_cap``) is set but the step
            has no rollout logprobs.
    """
    if not step.completion_ids or step.messages is None or step.model_images is None:
        return None
    if excluded_ids.intersection(step.completion_ids):
        logger.debug("step left out: its completion holds an image placeholder token")
        return None
    rollout = list(step.logprobs) if step.logprobs else None
    if tis_cap is not None and (rollout is None or len(rollout) != len(step.completion_ids)):
        raise ValueError(
            "tis_cap needs the rollout engine's logprob of every sampled token, and a "
            f"step of episode {episode.episode_id} has none: ask the server for logprobs "
            "(vLLM returns them), or set grpo.tis_cap: null (PPO: ppo.tis_cap: null)"
        )
    return TokenSample(
        messages=step.messages,
        images=step.model_images,
        completion_ids=list(step.completion_ids),
        num_tokens=len(step.prompt_ids or []) + len(step.completion_ids),
        rollout_logprobs=rollout,
    )


def weigh_episode(samples: list[TokenSample], normalization: str) -> list[TokenSample]:
    """An episode's samples with their ``token_weight`` for ``grpo.loss_normalization``:
    1 (``token``: a token mean over the iteration, so an episode weighs as its tokens),
    or 1 / the episode's completion tokens (``episode``: each episode's tokens sum to
    weight 1, and the normaliser counts episodes, so the loss is a mean over episodes of
    each episode's token mean, whatever its length).

    >>> s = [TokenSample([], [], [1, 2], 2), TokenSample([], [], [3, 4, 5, 6], 4)]
    >>> [x.token_weight for x in weigh_episode(s, "episode")]
    [0.16666666666666666, 0.16666666666666666]
    """
    tokens = sum(len(s.completion_ids) for s in samples)
    if normalization == "episode" and tokens:
        for sample in samples:
            sample.token_weight = 1.0 / tokens
    return samples


def placeholder_sample() -> TokenSample:
    """A one-token text-only sample with every field set: what a process short of data
    runs (with weight 0) while the others train, when FSDP needs every process in
    every forward pass."""
    return TokenSample(
        messages=[{"role": "user", "content": [{"type": "text", "text": "."}]}],
        images=[],
        completion_ids=[0],
        num_tokens=1,
        advantage=0.0,
        rollout_logprobs=[0.0],
        old_logprobs=torch.zeros(1),
        ref_logprobs=torch.zeros(1),
    )


@dataclass
class BatchLoss:
    """A micro-batch's loss summed over its completion tokens, and statistics to sum."""

    loss_sum: torch.Tensor
    stats: dict[str, float]


LossFn = Callable[[Sequence[TokenSample]], BatchLoss]


def update_schedule(
    samples: Sequence[TokenSample],
    rng: np.random.Generator,
    *,
    micro_batch_tokens: int,
    grad_accumulation_steps: int,
    max_all: Callable[[float], float],
    lockstep: bool = False,
    sort_by_length: bool = False,
) -> list[list[list[TokenSample]]]:
    """One epoch: shuffled samples spread over the optimizer steps, micro-batched by token
    budget within each step.

    Every process takes the same number of optimizer steps: the busiest process's
    micro-batches (by ``micro_batch_tokens``) over ``grad_accumulation_steps``. Each
    process deals its samples out over *all* of them, about the same completion tokens
    in each (:func:`split_evenly`), so that every step's gradient holds every process's data
    in the share it has overall. Filling steps one micro-batch after another instead left
    the last steps to the processes with more data: with 8 processes, the step gradient's
    scale varied 25-fold and one process's instance alone made 5 of 25 steps.

    A step may then hold a micro-batch more or less than ``grad_accumulation_steps``
    (its samples are cut by the budget where they fall). With ``sort_by_length`` a
    step's samples are cut longest first (:func:`longest_first`): a micro-batch is
    padded to its longest sample, and shuffled lengths (prompts of 1 and 3 screenshots
    side by side) padded up to half of it. The steps, their samples and the random
    stream are the same either way: only which samples share a forward pass differs.
    With ``lockstep`` (FSDP) every step also has the same number of micro-batches on
    every process (a ``max_all`` per step): the missing ones are empty.
    """
    shuffled = [samples[i] for i in rng.permutation(len(samples))]
    budget = micro_batch_tokens
    num_micro = len(token_budget_batches(shuffled, lambda s: s.num_tokens, budget))
    num_steps = math.ceil(int(max_all(num_micro)) / grad_accumulation_steps)
    parts = split_evenly(shuffled, num_steps, lambda s: len(s.completion_ids))
    # split_evenly deals the heaviest samples out first, to the first parts: the steps run
    # in a random order, not longest first.
    parts = [parts[i] for i in rng.permutation(len(parts))]
    if sort_by_length:
        parts = [longest_first(part) for part in parts]
    steps = [token_budget_batches(part, lambda s: s.num_tokens, budget) for part in parts]
    if lockstep:
        steps = [step + [[]] * (int(max_all(len(step))) - len(step)) for step in steps]
    return steps


def longest_first(samples: Sequence[TokenSample]) -> list[TokenSample]:
    """``samples`` by ``num_tokens``, longest first (ties in their order).

    >>> [s.num_tokens for s in longest_first([TokenSample([], [], [], n) for n in (2, 9, 5)])]
    [9, 5, 2]
    """
    return sorted(samples, key=lambda s: -s.num_tokens)


def split_evenly(items: Sequence[T], parts: int, weight: Callable[[T], int]) -> list[list[T]]:
    """``items`` dealt into ``parts`` parts of about equal total weight.

    Heaviest first, each to the part lightest so far (fewest items on a tie): a part
    ends within about one item of ``total / parts``. Each part keeps the items in
    their order in ``items``.

    >>> split_evenly([5, 1, 4, 2, 3, 3], 2, lambda n: n)
    [[5, 1, 3], [4, 2, 3]]
    >>> split_evenly(["a", "b", "c"], 2, lambda s: 0)
    [['a', 'c'], ['b']]
    """
    heaviest_first = sorted(range(len(items)), key=lambda i: -weight(items[i]))  # stable
    members: list[list[int]] = [[] for _ in range(parts)]
    lightest = [(0, 0, j) for j in range(parts)]  # (weight, items, part)
    for i in heaviest_first:
        load, count, j = heapq.heappop(lightest)
        members[j].append(i)
        heapq.heappush(lightest, (load + weight(items[i]), count + 1, j))
    return [[items[i] for i in sorted(part)] for part in members]


def all_reduce_gradients(grads: Sequence[torch.Tensor]) -> None:
    """Sum the gradients over processes, in place, in buckets of ~``BUCKET_BYTES``."""
    bucket: list[torch.Tensor] = []
    size = 0
    for grad in grads:
        bucket.append(grad)
        size += grad.numel() * grad.element_size()
        if size >= BUCKET_BYTES:
            _all_reduce_bucket(bucket)
            bucket, size = [], 0
    if bucket:
        _all_reduce_bucket(bucket)


def _all_reduce_bucket(bucket: list[torch.Tensor]) -> None:
    flat = torch.cat([grad.flatten() for grad in bucket])
    dist.all_reduce(flat)
    offset = 0
    for grad in bucket:
        n = grad.numel()
        grad.copy_(flat[offset : offset + n].view_as(grad))
        offset += n


def optimizer_step(run: TrainingRun) -> float:
    """Sum gradients over processes, clip, step; returns the pre-clip gradient norm."""
    params = run.trainable
    grads = []
    for p in params:
        # No data in this step (on this process): a zero gradient, not None, so that
        # AdamW still takes its step (its moments decay) exactly as with data whose
        # gradient is 0, and every process takes part in the all-reduce.
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    if run.world_size > 1 and not run.sharded:  # FSDP has summed them in backward
        all_reduce_gradients(grads)
    max_norm = run.config.optim.max_grad_norm or math.inf
    grad_norm = float(sharding.whole(torch.nn.utils.clip_grad_norm_(params, max_norm)))
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return grad_norm


def run_update(
    run: TrainingRun,
    samples: Sequence[TokenSample],
    loss_fn: LossFn,
    *,
    seed_stream: int,
    iteration: int,
    keep: Callable[[TokenSample], bool] | None = None,
) -> dict[str, float]:
    """``optim.epochs`` passes of ``loss_fn`` over this process's samples.

    Args:
        run: the training run (model, optimizer, config, process group).
        samples: this process's samples.
        loss_fn: a micro-batch's summed per-token loss (with gradients) and statistics.
        seed_stream, iteration: seed the data order (with ``config.seed`` and the rank).
        keep: samples that fail it are left out of the forward/backward passes *after*
            micro-batches and optimizer steps are laid out (for samples known to add no
            gradient: leaving them out changes nothing but the compute).

    Returns:
        ``train/loss`` (per token), the summed statistics over every process divided by
        the tokens, ``train/grad_norm`` (mean pre-clip norm), ``train/optimizer_steps``,
        ``train/tokens_processed`` (this process's prompt + completion tokens).
    """
    o = run.config.optim
    # The normaliser's numerator: every process's completion tokens, each counted at
    # its weight (1 each: a token mean; 1 / its episode's tokens: a mean over episodes).
    total_tokens = run.sum_all(sum(s.weighted_tokens for s in samples))
    rng = np.random.default_rng([run.config.seed, seed_stream, iteration, run.rank])
    totals: dict[str, float] = defaultdict(float)
    grad_norms: list[float] = []
    run.model.train()
    for _epoch in range(o.epochs):
        schedule = update_schedule(
            samples,
            rng,
            micro_batch_tokens=o.micro_batch_tokens,
            grad_accumulation_steps=o.grad_accumulation_steps,
            max_all=run.max_all,
            lockstep=run.sharded,
            sort_by_length=o.sort_by_length,
        )
        # No floor of 1: per episode, steps may outnumber episodes (the share is < 1).
        normaliser = total_tokens / len(schedule) if schedule and total_tokens > 0 else 1.0
        for micro_batches in schedule:
            for batch in micro_batches:
                batch = [s for s in batch if keep is None or keep(s)]
                if not batch:
                    if not run.sharded:
                        continue
                    with run.autocast():  # in step with the other processes, no effect
                        terms = loss_fn([placeholder_sample()])
                    (terms.loss_sum * 0.0).backward()
                    continue
                with run.autocast():
                    terms = loss_fn(batch)
                (terms.loss_sum / normaliser).backward()
                totals["loss"] += float(terms.loss_sum.detach())
                totals["tokens"] += sum(len(s.completion_ids) for s in batch)
                totals["weighted_tokens"] += sum(s.weighted_tokens for s in batch)
                totals["seq_tokens"] += sum(s.num_tokens for s in batch)
                for key, value in terms.stats.items():
                    totals[key] += value
            grad_norms.append(optimizer_step(run))
    run.model.eval()
    seq_tokens = totals.pop("seq_tokens", 0.0)
    # One reduction of the whole dict: a process without data has no statistics keys,
    # and a reduction per key would leave the processes waiting on different calls.
    everyone = run.sum_all_dict(dict(totals))
    tokens = everyone.pop("tokens", 0.0)
    weighted = everyone.pop("weighted_tokens", 0.0)
    loss = everyone.pop("loss", 0.0)
    metrics = {f"train/{k}": v / max(tokens, 1.0) for k, v in sorted(everyone.items())}
    # The loss as it was minimised: a mean per (weighted) token.
    metrics["train/loss"] = loss / weighted if weighted > 0 else 0.0
    metrics["train/grad_norm"] = float(np.mean(grad_norms)) if grad_norms else 0.0
    metrics["train/optimizer_steps"] = float(len(grad_norms))
    metrics["train/tokens_processed"] = seq_tokens
    return metrics
