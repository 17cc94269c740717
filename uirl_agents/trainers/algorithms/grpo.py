"""GRPO over multi-step episodes: the hooks :mod:`~uirl_agents.trainers.loop` runs.

With the loop, the whole update from episodes to the loss:

1. **Collect** (the loop): G episodes per task instance (same seed and options, one
   ``group_id``), sampled with the current weights; every step keeps the exact prompt
   (messages + the resized images the model saw), the completion's token ids and their
   logprobs.
2. **Select** (:meth:`GRPO.select`): with ``grpo.replay``, a group without a success
   gets one stored success of its task instance in place of its worst failure
   (:mod:`~uirl_agents.trainers.algorithms.replay`).
3. **Samples** (:func:`step_samples`): an episode's return (total reward) minus its
   group's mean (or the mean of the others, leave-one-out), divided by the group's std
   (:func:`~uirl_agents.trainers.losses.group_advantages`): the advantage of every
   generated token of every step of that episode.
4. **Score** (:meth:`GRPO.score`): one pass without gradients recomputes every step's
   completion logprobs with the trainer's own forward pass: the *old* logprobs of the
   ratio. The rollout engine's numbers (HF ``generate`` with a KV cache, vLLM, bf16
   kernels) differ from the trainer's, and a ratio against them would clip and bias for
   no reason. The same pass computes the reference policy's logprobs (the starting
   policy: the base model, or the adapter the run started from) when ``kl_beta > 0``,
   the policy's entropy, and the rollout/trainer mismatch (logged).
5. **Loss** (:func:`grpo_loss`, per micro-batch, ``optim.epochs`` passes): the PPO
   clipped surrogate ``-min(r A, clip(r, 1-eps, 1+eps) A)`` with
   ``r = exp(logp - logp_old)``, times the truncated importance weight
   ``min(exp(logp_old - logp_rollout), tis_cap)`` when ``grpo.tis_cap`` is set, plus
   ``kl_beta`` times the k3 KL to the reference; summed over tokens and divided by the
   iteration's completion tokens (every process) per optimizer step (the loop's update:
   :func:`~uirl_agents.trainers.update.run_update`). With ``grpo.loss_normalization:
   episode`` each token counts 1 / its episode's tokens
   (:func:`~uirl_agents.trainers.update.weigh_episode`): a mean
   over episodes, so a 30-step failure weighs as much as a 3-step success, not 10x.

TRL: ``GRPOTrainer`` is not used: its ``rollout_func`` rebuilds pixels from the
dataset's image column, so it cannot train on per-step screenshots of multi-step
episodes. The pieces TRL would give (the clipped surrogate, k3 KL, group-normalised
advantages) are in :mod:`uirl_agents.trainers.losses`; the surrogate with its inputs,
which PPO shares, is :func:`~uirl_agents.trainers.forward.surrogate_loss`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from accelerate.utils import gather_object

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.hf import vision_token_ids
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers.algorithms.replay import SuccessReplay, gathered_successes
from uirl_agents.trainers.config import GRPOConfig, GRPOSection, config_as
from uirl_agents.trainers.forward import score_samples, surrogate_loss
from uirl_agents.trainers.loop import ROLLOUT, Algorithm, Sources
from uirl_agents.trainers.losses import group_advantages
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import (
    UPDATE_STREAM,
    BatchLoss,
    TokenSample,
    token_sample,
    weigh_episode,
)

logger = logging.getLogger(__name__)

REPLAY_CHECKPOINT = "replay"


class GRPO(Algorithm):
    """GRPO's hooks (``algorithm: grpo``).

    Attributes:
        replay: the run's replay of successes (``grpo.replay``; None: off), set by
            :meth:`start`.
    """

    name = "grpo"
    seed_stream = UPDATE_STREAM

    def __init__(self) -> None:
        self.replay: SuccessReplay | None = None

    def start(self, run: TrainingRun) -> None:
        self.replay = success_replay(run)

    def select(self, run: TrainingRun, sources: Sources) -> tuple[list[Episode], dict[str, float]]:
        trained, replayed = replayed_episodes(self.replay, sources[ROLLOUT], gather_object)
        if self.replay is None:
            return trained, {}
        return trained, {
            "train/replayed_episodes": run.sum_all(replayed),
            "train/replay_size": float(len(self.replay)),
        }

    def samples(self, run: TrainingRun, episodes: Sequence[Episode]) -> list[TokenSample]:
        return step_samples(
            episodes,
            config_as(run.config, GRPOConfig).grpo,
            vision_token_ids(run.model.config, run.processor.tokenizer),
        )

    def score(
        self, run: TrainingRun, samples: Sequence[TokenSample]
    ) -> tuple[list[TokenSample], dict[str, float]]:
        """The scoring pass over the samples that train (:meth:`trains`)."""
        config = config_as(run.config, GRPOConfig)
        return list(samples), score_samples(
            run,
            [s for s in samples if self.trains(run, s)],
            temperature=config.rollout.temperature,
            kl_beta=config.grpo.kl_beta,
            micro_batch_tokens=config.optim.micro_batch_tokens,
            sort_by_length=config.optim.sort_by_length,
            check_rollout_temperature=(
                config.rollout.backend == "vllm" and config.grpo.tis_cap is not None
            ),
        )

    def trains(self, run: TrainingRun, sample: TokenSample) -> bool:
        """With ``grpo.skip_zero_advantage`` (and no KL) a step whose advantage is 0 adds
        no gradient: it stays in the layout of micro-batches and optimizer steps (the
        update is the one it would have given) but skips the passes."""
        g = config_as(run.config, GRPOConfig).grpo
        return not (g.skip_zero_advantage and g.kl_beta == 0) or sample.advantage != 0

    def loss(self, run: TrainingRun, batch: Sequence[TokenSample]) -> BatchLoss:
        config = config_as(run.config, GRPOConfig)
        return grpo_loss(run, batch, config.grpo, config.rollout.temperature)


def step_samples(
    episodes: Sequence[Episode], cfg: GRPOSection, excluded_ids: frozenset[int] = frozenset()
) -> list[TokenSample]:
    """Every model step of the episodes, with its episode's group-relative advantage.

    Steps without a completion (nothing generated) are left out, and so are steps whose
    completion holds one of ``excluded_ids``: a generated image placeholder token
    cannot be fed back (the model would count it as an image slot with no image), and
    an untrained model does produce one now and then.

    Raises:
        ValueError: ``cfg.tis_cap`` is set but a step has no rollout logprobs.
    """
    scores = [
        float(e.success) if cfg.advantage_from == "success" else e.total_reward for e in episodes
    ]
    advantages = group_advantages(
        scores,
        [e.group_id for e in episodes],
        leave_one_out=cfg.leave_one_out,
        scale_by_std=cfg.scale_advantages,
        negative_scale=cfg.negative_advantage_scale,
    )
    samples = []
    for episode, advantage in zip(episodes, advantages, strict=True):
        steps = [token_sample(episode, step, cfg.tis_cap, excluded_ids) for step in episode.steps]
        kept = [s for s in steps if s is not None]
        for sample in kept:
            sample.advantage = float(advantage)
        samples += weigh_episode(kept, cfg.loss_normalization)
    return samples


def grpo_loss(
    run: TrainingRun, batch: Sequence[TokenSample], cfg: GRPOSection, temperature: float
) -> BatchLoss:
    """The micro-batch's clipped surrogate (+ TIS, + KL) summed over its completion tokens,
    with ``cfg``'s settings (:func:`~uirl_agents.trainers.forward.surrogate_loss`).

    Needs :func:`~uirl_agents.trainers.forward.score_samples` first (the old and
    reference logprobs).
    """
    return surrogate_loss(
        run,
        batch,
        temperature=temperature,
        clip_epsilon=cfg.clip_epsilon,
        tis_cap=cfg.tis_cap,
        kl_beta=cfg.kl_beta,
    )


def success_replay(run: TrainingRun) -> SuccessReplay | None:
    """The run's replay of successes (``grpo.replay``), restored when resumed and saved
    with every checkpoint; None when off."""
    g = config_as(run.config, GRPOConfig).grpo
    if not g.replay:
        return None
    replay = SuccessReplay(g.replay_per_instance, g.replay_max_instances)
    if run.resumed_from is not None:
        state = ckpt.load_extra(run.resumed_from, REPLAY_CHECKPOINT)
        if state is not None:
            replay.load(state)
            logger.info("replay: %d stored successes restored", len(replay))
    run.checkpoint_extra[REPLAY_CHECKPOINT] = replay.state
    return replay


def replayed_episodes(
    replay: SuccessReplay | None, episodes: Sequence[Episode], gather: Callable
) -> tuple[list[Episode], int]:
    """The episodes to train on and how many of them were replayed: with a replay, each
    group without a success gets a stored success of its instance; then the iteration's
    successes, from every process (``gather``: an all-gather of Python objects), are
    stored."""
    if replay is None:
        return list(episodes), 0
    trained, replayed = replay.fill(episodes)
    replay.add(gathered_successes(episodes, gather))
    return trained, replayed
