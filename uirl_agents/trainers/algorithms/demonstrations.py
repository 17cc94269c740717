"""Demonstrations for expert iteration: the task's scripted expert, and episodes a
person recorded or a dataset holds (``rs.demonstrations``), each written in the run's
own format.

- :func:`collect_demonstrations`: expert episodes, each step written as the model would
  (a cold start: a fresh model rarely produces a parseable action, so it has nothing to
  imitate yet);
- :func:`load_demonstrations`: this process's share of the recorded episodes (run
  directories, exported datasets, Hub datasets: :mod:`uirl_agents.dataset.load`), each
  step written afresh (:func:`rewrite_demonstration`), so a recording serves any model.
"""

from __future__ import annotations

from uirl_agents.dataset.load import iter_source_episodes
from uirl_agents.episodes.rollout import EpisodeSpec
from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.context import EpisodeContexts
from uirl_agents.policies.expert import ExpertPolicy
from uirl_agents.trainers.config import RSConfig, config_as
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.specs import DEMO_STREAM


def demonstration_specs(run: TrainingRun, num_episodes: int) -> list[EpisodeSpec]:
    """This process's share of ``num_episodes`` expert episodes (task instances of their own)."""
    share = num_episodes // run.world_size + (run.rank < num_episodes % run.world_size)
    return run.task_specs(DEMO_STREAM, 0, share, 1, "demo")


def collect_demonstrations(run: TrainingRun) -> list[Episode]:
    """Expert episodes, each step written as the model would (prompt, images, text)."""
    cfg = config_as(run.config, RSConfig)
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
    for source in config_as(run.config, RSConfig).rs.demonstrations:
        # Only this process's episodes stay in memory; the others' are read and dropped.
        for episode in iter_source_episodes(source):
            seen += 1
            if (seen - 1) % run.world_size != run.rank:
                continue
            try:
                mine.append(rewrite_demonstration(episode, contexts))
            except ValueError as exc:
                raise ValueError(f"rs.demonstrations: {source}: {exc}") from None
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
