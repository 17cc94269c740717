"""Expert iteration (rejection sampling + SFT), readable top to bottom.

Per iteration:

1. **Collect.** Each process runs its share of the iteration's episodes with the
   current weights (sampling). In iteration 0 it can add demonstrations from the
   task's scripted expert, written in the model's own format (a cold start: a fresh
   model rarely produces a parseable action, so it has nothing to imitate yet), and
   its share of the episodes a person recorded (``rs.demonstrations``), written
   afresh in the run's format.
2. **Filter.** Keep the episodes whose total reward reaches ``rs.reward_threshold``.
3. **Fine-tune.** Every step of a kept episode (but those whose output did not parse,
   with ``rs.drop_unparsed_steps``) becomes an SFT sample: its exact prompt and the
   token ids the policy sampled; the loss is their negative log-likelihood
   (:mod:`uirl_agents.trainers.sft`), through the same update loop as GRPO.
4. **Evaluate** on held-out task seeds (greedy), log, checkpoint.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from uirl_agents.policies.base import Policy
from uirl_agents.policies.context import EpisodeContexts
from uirl_agents.policies.expert import ExpertPolicy
from uirl_agents.push import push_result
from uirl_agents.rollout import EpisodeSpec
from uirl_agents.trainers.actor import iteration_rollouts
from uirl_agents.trainers.common import (
    DEMO_STREAM,
    TrainingRun,
)
from uirl_agents.trainers.config import RSConfig
from uirl_agents.trainers.metrics import Stopwatch, perf_metrics
from uirl_agents.trainers.sft import sft_samples, sft_update
from uirl_agents.trajectories import Episode, iter_episodes

logger = logging.getLogger(__name__)


def demonstration_specs(run: TrainingRun, num_episodes: int) -> list[EpisodeSpec]:
    """This process's share of ``num_episodes`` expert episodes (task instances of their own)."""
    share = num_episodes // run.world_size + (run.rank < num_episodes % run.world_size)
    return run.task_specs(DEMO_STREAM, 0, share, 1, "demo")


def collect_demonstrations(run: TrainingRun) -> list[Episode]:
    """Expert episodes, each step written as the model would (prompt, images, text)."""
    cfg = run.config
    expert = ExpertPolicy(
        lambda i: run.envs.envs[i].oracle(),
        task=lambda i: run.envs.envs[i].episode_task,
        format=run.format,
        mode=cfg.rs.expert_mode,
        max_images=cfg.rollout.max_images,
    )
    specs = demonstration_specs(run, cfg.rs.expert_episodes)
    return run.collect(expert, specs, tag="demonstrations")


def load_demonstrations(run: TrainingRun) -> list[Episode]:
    """This process's share of the episodes in ``rs.demonstrations`` (recorded ones),
    each step written afresh in the run's format (:func:`rewrite_demonstration`).

    Raises:
        ValueError: a step whose action the run's format cannot express.
    """
    contexts = EpisodeContexts(run.format, max_images=run.config.rollout.max_images)
    mine, seen = [], 0
    for run_dir in run.config.rs.demonstrations:
        # Only this process's episodes stay in memory; the others' are read and dropped.
        for episode in iter_episodes(run_dir):
            seen += 1
            if (seen - 1) % run.world_size != run.rank:
                continue
            try:
                mine.append(rewrite_demonstration(episode, contexts))
            except ValueError as exc:
                raise ValueError(f"rs.demonstrations: {run_dir}: {exc}") from None
    return mine


def rewrite_demonstration(episode: Episode, contexts: EpisodeContexts) -> Episode:
    """``episode`` with each step's prompt, images and text as the contexts' format
    writes them, so that a recording serves any model: its format, image size and
    number of screenshots per prompt need not be the run's. The actions stay the
    ones performed.

    Raises:
        ValueError: an action the format cannot express (naming the step).
    """
    contexts.begin_episode(0)
    for n, step in enumerate(episode.steps):
        if step.action is None or step.screenshot is None:
            step.messages = step.model_images = None  # nothing to imitate: not a sample
            continue
        observation = {"screenshot": step.screenshot, "instruction": episode.instruction}
        try:
            written = contexts.demonstrate(0, observation, step.action)
        except ValueError as exc:
            raise ValueError(f"episode {episode.episode_id} step {n}: {exc}") from None
        step.text, step.messages, step.model_images = written.text, written.messages, written.images
        step.prompt_ids = step.completion_ids = step.logprobs = None
    for step in episode.steps:
        step.screenshot = None  # training needs only the model's images (~3 MB a step less)
    return episode


def train_rs(config: RSConfig, output_dir: str | Path) -> None:
    """Run (or resume) expert iteration in ``output_dir``; every process calls this.

    Raises:
        ValueError: the config does not fit the number of processes.
    """
    with TrainingRun(config, output_dir, "rs") as run:
        rs_iterations(run)
    push_result(config.hub, output_dir)  # sessions stopped; main process only


def collect_with_demonstrations(
    run: TrainingRun, iteration: int, policy: Policy
) -> tuple[list[Episode], list[Episode]]:
    """The iteration's episodes, and in iteration 0 the cold start's demonstrations."""
    episodes = run.collect_iteration(iteration, policy)
    demos = []
    if iteration == 0 and run.config.rs.expert_episodes:
        demos = collect_demonstrations(run)
    return episodes, demos


def rs_iterations(run: TrainingRun) -> None:
    """The iterations still to run (all of them, or the rest of a resumed run)."""
    config = run.config
    run.evaluate_at_start()
    rollouts = iteration_rollouts(run, functools.partial(collect_with_demonstrations, run))
    for iteration in run.iterations():
        watch = Stopwatch()
        with watch.phase("rollout"):
            collected = rollouts.take(iteration)
            recorded = []
            if iteration == 0 and config.rs.demonstrations:  # files: the learner reads them
                recorded = load_demonstrations(run)
        episodes, demos = collected.data
        watch.add("policy", rollouts.policy_seconds(episodes))
        kept = [
            e
            for e in [*demos, *recorded, *episodes]
            if e.total_reward >= config.rs.reward_threshold
        ]
        with watch.phase("train"):
            samples = sft_samples(run, kept, drop_unparsed=config.rs.drop_unparsed_steps)
            train = sft_update(run, samples, iteration)
        run.state["episodes"] += int(run.sum_all(len(episodes)))
        rollouts.publish(iteration + 1)
        tokens = train.pop("train/tokens_processed", 0.0)
        metrics = {
            **run.episode_metrics(episodes, "rollout"),
            **run.episode_metrics(demos, "demonstrations"),
            **run.episode_metrics(recorded, "recorded"),
            "rollout/kept_fraction": run.sum_all(len(kept))
            / max(1.0, run.sum_all(len(episodes) + len(demos) + len(recorded))),
            **train,
            **perf_metrics(watch.totals, watch.elapsed(), tokens),
            **rollouts.metrics(collected, len(episodes)),
        }
        run.end_iteration(iteration, metrics)
