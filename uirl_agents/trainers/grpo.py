"""GRPO over multi-step episodes, readable top to bottom.

Per iteration:

1. **Collect.** Each process runs its groups: G episodes per task instance (same seed
   and options, one ``group_id``), sampled with the current weights; every step keeps
   the exact prompt (messages + the resized images the model saw), the completion's
   token ids and their logprobs.
   With ``grpo.replay``, a group without a success gets one stored success of its
   task instance in place of its worst failure (:mod:`~uirl_agents.trainers.replay`).
2. **Advantages.** An episode's return (total reward) minus its group's mean (or the
   mean of the others, leave-one-out), divided by the group's std: the advantage of
   every generated token of every step of that episode.
3. **Score.** One pass without gradients recomputes every step's completion logprobs
   with the trainer's own forward pass: the *old* logprobs of the ratio. The rollout
   engine's numbers (HF ``generate`` with a KV cache, vLLM, bf16 kernels) differ from
   the trainer's, and a ratio against them would clip and bias for no reason. The
   same pass computes the reference policy's logprobs (the starting policy: the base
   model, or the adapter the run started from) when ``kl_beta > 0``, the policy's
   entropy, and the rollout/trainer mismatch (logged).
4. **Update.** :func:`~uirl_agents.trainers.update.run_update`: ``optim.epochs`` passes,
   micro-batches by token budget; the loss is the PPO clipped surrogate
   ``-min(r A, clip(r, 1-eps, 1+eps) A)`` with ``r = exp(logp - logp_old)``, times the
   truncated importance weight ``min(exp(logp_old - logp_rollout), tis_cap)`` when
   ``grpo.tis_cap`` is set, plus ``kl_beta`` times the k3 KL to the reference; summed
   over tokens and divided by the iteration's completion tokens (every process) per
   optimizer step.

With ``algorithm: ppo`` the same iterations run PPO's update instead of steps 2-4
(:mod:`~uirl_agents.trainers.ppo`: a value head, GAE over per-step rewards).

TRL: ``GRPOTrainer`` is not used: its ``rollout_func`` rebuilds pixels from the
dataset's image column, so it cannot train on per-step screenshots of multi-step
episodes. The pieces TRL would give (the clipped surrogate, k3 KL, group-normalised
advantages) are in :mod:`uirl_agents.trainers.losses`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from accelerate.utils import gather_object

from uirl_agents.push import push_result
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers.actor import iteration_rollouts
from uirl_agents.trainers.common import TrainingRun
from uirl_agents.trainers.config import GRPOConfig, GRPOSection
from uirl_agents.trainers.losses import group_advantages
from uirl_agents.trainers.metrics import Stopwatch, perf_metrics
from uirl_agents.trainers.ppo import ppo_update
from uirl_agents.trainers.replay import SuccessReplay, gathered_successes
from uirl_agents.trainers.scoring import (
    UPDATE_STREAM,
    grpo_loss,
    score_samples,
    token_sample,
    vision_token_ids,
)
from uirl_agents.trainers.update import TokenSample, run_update
from uirl_agents.trajectories import Episode

logger = logging.getLogger(__name__)


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
    advantages = group_advantages(
        [e.total_reward for e in episodes],
        [e.group_id for e in episodes],
        leave_one_out=cfg.leave_one_out,
        scale_by_std=cfg.scale_advantages,
        negative_scale=cfg.negative_advantage_scale,
    )
    samples = []
    for episode, advantage in zip(episodes, advantages, strict=True):
        for step in episode.steps:
            sample = token_sample(episode, step, cfg, excluded_ids)
            if sample is not None:
                sample.advantage = float(advantage)
                samples.append(sample)
    return samples


def policy_update(
    run: TrainingRun, samples: Sequence[TokenSample], iteration: int
) -> dict[str, float]:
    """Score the samples, then ``optim.epochs`` passes of clipped-surrogate updates.

    With ``grpo.skip_zero_advantage`` (and no KL) the steps whose advantage is 0 are
    left out of the passes after the micro-batches and optimizer steps are laid out:
    they contribute no gradient, so the update is the one they would have given.
    """
    g = run.config.grpo
    skip = g.skip_zero_advantage and g.kl_beta == 0
    trained = [s for s in samples if s.advantage != 0] if skip else list(samples)
    scores = score_samples(run, trained)
    metrics = run_update(
        run,
        samples,
        lambda batch: grpo_loss(run, batch, g, run.config.rollout.temperature),
        seed_stream=UPDATE_STREAM,
        iteration=iteration,
        keep=(lambda s: s.advantage != 0) if skip else None,
    )
    metrics["train/samples"] = run.sum_all(len(samples))
    return {**metrics, **scores}


def train_grpo(config: GRPOConfig, output_dir: str | Path) -> None:
    """Run (or resume) GRPO, or PPO with ``algorithm: ppo``, in ``output_dir``; every
    process calls this.

    Raises:
        ValueError: the config does not fit the number of processes.
    """
    with TrainingRun(config, output_dir, config.algorithm) as run:
        grpo_iterations(run)
    push_result(config.hub, output_dir)  # sessions stopped; main process only


REPLAY_CHECKPOINT = "replay"


def success_replay(run: TrainingRun) -> SuccessReplay | None:
    """The run's replay of successes (``grpo.replay``), restored when resumed and saved
    with every checkpoint; None when off."""
    g = run.config.grpo
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


def grpo_update(run: TrainingRun, episodes: Sequence[Episode], iteration: int) -> dict[str, float]:
    """GRPO's update on the iteration's episodes: group-relative advantages, then
    :func:`policy_update`."""
    samples = step_samples(episodes, run.config.grpo, vision_token_ids(run.model.config))
    return policy_update(run, samples, iteration)


def grpo_iterations(run: TrainingRun) -> None:
    """The iterations still to run (all of them, or the rest of a resumed run).

    With ``algorithm: ppo`` the update is :func:`~uirl_agents.trainers.ppo.ppo_update`;
    collection, logging and checkpoints are the same.
    """
    config = run.config
    update = ppo_update if config.algorithm == "ppo" else grpo_update
    replay = success_replay(run)
    run.evaluate_at_start()
    rollouts = iteration_rollouts(run, run.collect_iteration)
    for iteration in run.iterations():
        watch = Stopwatch()
        with watch.phase("rollout"):
            collected = rollouts.take(iteration)
        episodes = collected.data
        watch.add("policy", rollouts.policy_seconds(episodes))
        trained, replayed = replayed_episodes(replay, episodes, gather_object)
        with watch.phase("train"):
            train = update(run, trained, iteration)
        run.state["episodes"] += int(run.sum_all(len(episodes)))
        rollouts.publish(iteration + 1)
        tokens = train.pop("train/tokens_processed")
        metrics = {
            **run.episode_metrics(episodes, "rollout"),
            **train,
            **perf_metrics(watch.totals, watch.elapsed(), tokens),
            **rollouts.metrics(collected, len(episodes)),
        }
        if replay is not None:
            metrics["train/replayed_episodes"] = run.sum_all(replayed)
            metrics["train/replay_size"] = float(len(replay))
        run.end_iteration(iteration, metrics)
