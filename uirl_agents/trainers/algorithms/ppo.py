"""PPO over multi-step episodes: a value head, per-step rewards, GAE (``train_ppo.py``).

The hooks :mod:`~uirl_agents.trainers.loop` runs. Per iteration, on the episodes just
collected (per-step rewards: the env's dense reward mode gives one at every step):

1. **Samples** (:meth:`PPO.samples`): every model step is a sample (its exact prompt
   and sampled ids, as in GRPO: :func:`~uirl_agents.trainers.update.token_sample`); a
   step that cannot be trained on, and the state a truncated episode stopped in
   (``Episode.final_prompt``), are value-only samples (no completion).
2. **Score** (:meth:`PPO.score`): the scoring pass
   (:func:`~uirl_agents.trainers.forward.score_samples`) gives the old logprobs and,
   from the same forward pass, every state's value ``V(s_t)``
   (:class:`~uirl_agents.trainers.value.ValueHead`); then **GAE** per episode
   (``ppo.gamma``, ``ppo.lam``): bootstrapped from the value of the state a truncated
   episode stopped in, from 0 after a terminal step (an episode a failed session ended
   never gets here: the loop leaves it out). The step's advantage is broadcast to its
   tokens; optionally normalised over the iteration (every process).
3. **Loss** (:func:`ppo_loss`): GRPO's clipped surrogate
   (:func:`~uirl_agents.trainers.forward.surrogate_loss`: + KL, TIS, with the ``ppo``
   section's own settings) plus
   ``ppo.value_coef`` times the clipped value loss, each step's weighted by its
   completion tokens (so that the run's token mean makes it a token-weighted mean over
   steps).

GRPO or PPO: GRPO needs groups (several episodes per task instance) and gives every step
of an episode the same advantage; PPO learns from single episodes and credits each step
by what followed it, at the cost of a value head to train (docs/training.md, PPO).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.hf import vision_token_ids
from uirl_agents.trainers.config import PPOConfig, config_as
from uirl_agents.trainers.forward import score_samples, surrogate_loss
from uirl_agents.trainers.loop import Algorithm
from uirl_agents.trainers.losses import clipped_value_loss, gae_advantages, scale_negatives
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import (
    UPDATE_STREAM,
    BatchLoss,
    TokenSample,
    token_sample,
    weigh_episode,
)

logger = logging.getLogger(__name__)


class PPO(Algorithm):
    """PPO's hooks (:class:`~uirl_agents.trainers.config.PPOConfig`, the ``ppo`` section).

    Attributes:
        states: the episodes' states of the last :meth:`samples` call, which
            :meth:`score` turns into advantages (GAE runs per episode).
    """

    name = "ppo"
    seed_stream = UPDATE_STREAM

    def __init__(self) -> None:
        self.states: list[EpisodeStates] = []

    def samples(self, run: TrainingRun, episodes: Sequence[Episode]) -> list[TokenSample]:
        """Every state of the episodes: the steps', then the final state of a truncated one."""
        excluded = vision_token_ids(run.model.config, run.processor.tokenizer)
        config = config_as(run.config, PPOConfig)
        self.states = [episode_states(e, config, excluded) for e in episodes]
        return [x for s in self.states for x in (*s.steps, *([s.final] if s.final else []))]

    def score(
        self, run: TrainingRun, samples: Sequence[TokenSample]
    ) -> tuple[list[TokenSample], dict[str, float]]:
        """Score every state (old logprobs, values), GAE, then the step samples to train.

        Returns:
            The samples with a completion, and the scoring pass's metrics with
            ``train/value_mean``, ``train/return_mean``, ``train/explained_variance``
            (``1 - Var(R - V) / Var(R)`` over the trained steps of every process: 1 is a
            perfect critic, <= 0 one no better than a constant), ``train/advantage_std``.
        """
        config = config_as(run.config, PPOConfig)
        if run.value_head is None:
            raise ValueError("PPO needs the run's value head")
        scores = score_samples(
            run,
            samples,
            temperature=config.rollout.temperature,
            kl_beta=config.ppo.kl_beta,
            micro_batch_tokens=config.optim.micro_batch_tokens,
            sort_by_length=config.optim.sort_by_length,
            check_rollout_temperature=(
                config.rollout.backend == "vllm" and config.ppo.tis_cap is not None
            ),
            value_head=run.value_head,
        )
        set_advantages(self.states, config.ppo.gamma, config.ppo.lam)
        trained = [x for s in self.states for x in s.steps if x.completion_ids]
        value_metrics = _value_metrics(run, trained)
        value_metrics["train/advantage_std"] = shape_advantages(
            trained,
            normalize=config.ppo.normalize_advantages,
            negative_scale=config.ppo.negative_advantage_scale,
            sum_all=run.sum_all,
            std_floor=config.ppo.advantage_std_floor,
        )
        return trained, {**scores, **value_metrics}

    def loss(self, run: TrainingRun, batch: Sequence[TokenSample]) -> BatchLoss:
        return ppo_loss(run, batch)


@dataclass
class EpisodeStates:
    """One episode's states as samples: ``steps[t]`` is step ``t``'s (trained when it
    has a completion), ``final`` the state a truncated episode stopped in (or None)."""

    episode: Episode
    steps: list[TokenSample]
    final: TokenSample | None


def episode_states(
    episode: Episode, config: PPOConfig, excluded_ids: frozenset[int]
) -> EpisodeStates:
    """The samples of an episode's states (see :class:`EpisodeStates`).

    Raises:
        ValueError: a step has no prompt (a policy that records none cannot be valued).
    """
    steps = []
    for step in episode.steps:
        sample = token_sample(episode, step, config.ppo.tis_cap, excluded_ids)
        if sample is None:
            if step.messages is None or step.model_images is None:
                raise ValueError(
                    f"PPO needs every step's prompt, and a step of episode "
                    f"{episode.episode_id} has none: collect with a model policy"
                )
            sample = _value_only(step.messages, step.model_images, len(step.prompt_ids or []))
        steps.append(sample)
    weigh_episode([s for s in steps if s.completion_ids], config.ppo.loss_normalization)
    final = None
    if episode.final_prompt is not None and steps:
        messages, images = episode.final_prompt
        # Its prompt was never tokenised: the last step's size is the budget's estimate.
        final = _value_only(messages, images, steps[-1].num_tokens)
    return EpisodeStates(episode, steps, final)


def _value_only(messages: list[dict], images: list[np.ndarray], num_tokens: int) -> TokenSample:
    return TokenSample(messages=messages, images=images, completion_ids=[], num_tokens=num_tokens)


def set_advantages(states: Sequence[EpisodeStates], gamma: float, lam: float) -> None:
    """GAE over each episode's scored states: every step sample gets its ``advantage``
    and ``value_target`` (the lambda-return)."""
    for s in states:
        last_value = scored_value(s.final) if s.final is not None else 0.0
        advantages, returns = gae_advantages(
            [step.reward for step in s.episode.steps],
            [scored_value(sample) for sample in s.steps],
            terminated=s.final is None,
            last_value=last_value,
            gamma=gamma,
            lam=lam,
        )
        for sample, advantage, target in zip(s.steps, advantages, returns, strict=True):
            sample.advantage, sample.value_target = float(advantage), float(target)


def scored_value(sample: TokenSample) -> float:
    """The sample's ``old_value`` from the scoring pass.

    Raises:
        ValueError: the sample was not scored with a value head.
    """
    if sample.old_value is None:
        raise ValueError("a state has no value: score the samples with the value head first")
    return sample.old_value


def shape_advantages(
    samples: Sequence[TokenSample],
    *,
    normalize: bool,
    negative_scale: float,
    sum_all: Callable[[float], float],
    std_floor: float = 0.0,
) -> float:
    """The step advantages as trained: with ``normalize`` centred on their mean and
    divided by ``max(std, std_floor)`` over the samples of every process (``sum_all``: a
    sum over processes), then the negative ones times ``negative_scale``
    (``ppo.negative_advantage_scale``, as in GRPO). Returns the std before scaling.

    The floor matters once nearly every episode ends alike: the advantages are then the
    critic's errors (~1e-4), and scaling them to std 1 turns noise into a full-size
    update (measured: one such update took the learning demo from 15/16 successes to 0).
    """
    a = np.array([s.advantage for s in samples], dtype=np.float64)
    n = sum_all(len(a))
    mean = sum_all(a.sum()) / max(n, 1.0)
    std = (sum_all(((a - mean) ** 2).sum()) / max(n - 1, 1.0)) ** 0.5
    if normalize:
        a = (a - mean) / max(std, std_floor, 1e-8)
    for sample, advantage in zip(samples, scale_negatives(a, negative_scale), strict=True):
        sample.advantage = float(advantage)
    return std


def ppo_loss(run: TrainingRun, batch: Sequence[TokenSample]) -> BatchLoss:
    """GRPO's clipped surrogate (+ KL) plus ``value_coef`` times the clipped value loss,
    each step's value loss weighted by its completion tokens (at their
    ``token_weight``, as the surrogate's)."""
    config = config_as(run.config, PPOConfig)
    if run.value_head is None:
        raise ValueError("PPO needs the run's value head")
    states: list[torch.Tensor] = []
    g = config.ppo
    terms = surrogate_loss(
        run,
        batch,
        temperature=config.rollout.temperature,
        clip_epsilon=g.clip_epsilon,
        tis_cap=g.tis_cap,
        kl_beta=g.kl_beta,
        prompt_states=states,
    )
    values = run.value_head(torch.stack(states))
    device = values.device
    old = torch.tensor([s.old_value for s in batch], device=device)
    targets = torch.tensor([s.value_target for s in batch], device=device)
    tokens = torch.tensor([float(len(s.completion_ids)) for s in batch], device=device)
    weighted = torch.tensor([s.weighted_tokens for s in batch], device=device)
    value_loss, clipped = clipped_value_loss(values, old, targets, config.ppo.value_clip)
    loss_sum = terms.loss_sum + config.ppo.value_coef * (value_loss * weighted).sum()
    stats = {
        **terms.stats,
        "value_loss": float((value_loss.detach() * tokens).sum()),
        "value_clip_fraction": float((clipped * tokens).sum()),
    }
    return BatchLoss(loss_sum=loss_sum, stats=stats)


def _value_metrics(run: TrainingRun, samples: Sequence[TokenSample]) -> dict[str, float]:
    v = np.array([s.old_value for s in samples], dtype=np.float64)
    r = np.array([s.value_target for s in samples], dtype=np.float64)
    totals = run.sum_all_dict(
        {
            "n": float(len(v)),
            "v": float(v.sum()),
            "r": float(r.sum()),
            "r2": float((r**2).sum()),
            "d": float((r - v).sum()),
            "d2": float(((r - v) ** 2).sum()),
        }
    )
    n = max(totals.get("n", 0.0), 1.0)
    var_r = totals.get("r2", 0.0) / n - (totals.get("r", 0.0) / n) ** 2
    var_d = totals.get("d2", 0.0) / n - (totals.get("d", 0.0) / n) ** 2
    return {
        "train/value_mean": totals.get("v", 0.0) / n,
        "train/return_mean": totals.get("r", 0.0) / n,
        "train/explained_variance": 1.0 - var_d / var_r if var_r > 1e-12 else 0.0,
    }
