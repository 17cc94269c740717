"""Run a policy on a vector env for a list of episodes; return (and stream) trajectories.

The one code path for collecting episodes: ``scripts/evaluate.py``, the expert-iteration
trainer and the GRPO trainer all call :func:`collect_episodes`.

Sub-envs run out of lock-step: a sub-env whose episode ends starts the next queued
episode at once, so a long episode never holds the others back. Each episode is
described by an :class:`EpisodeSpec` (seed + options = one task instance; a GRPO group
is G specs with the same seed and options and one ``group_id``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from uirl_agents.episodes.trajectories import Episode, Step, TrajectoryWriter
from uirl_agents.policies.base import FinalPromptPolicy, Policy, PolicyStep
from uirl_agents.policies.usage import normalize_usage
from uirl_gym.vector import SessionVectorEnv

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: the task instance and its group.

    Attributes:
        seed: the env reset seed (None: drawn by the env).
        options: the env reset options (``rows``, ``num_rows``, ...).
        group_id: shared by the episodes of a GRPO group.
    """

    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    group_id: str | None = None


def collect_episodes(
    policy: Policy,
    envs: SessionVectorEnv,
    specs: Sequence[EpisodeSpec],
    *,
    max_steps: int = 60,
    writer: TrajectoryWriter | None = None,
    keep_screenshots: bool = True,
    progress: bool | str = True,
    episode_prefix: str = "ep",
    episode_ids: Sequence[str] | None = None,
) -> list[Episode]:
    """Run ``policy`` for every spec; return the episodes in spec order.

    Args:
        policy: any :class:`~uirl_agents.policies.base.Policy`.
        envs: the sub-envs to run on (at most ``envs.num_envs`` episodes at once).
        specs: the episodes to run.
        max_steps: an episode still running after this many steps ends truncated.
        writer: if given, each episode is written as soon as it ends.
        keep_screenshots: False drops full screenshots from the returned steps once
            written (trainers need only the model's images; saves ~3 MB a step).
        progress: show a progress bar (a string is its description).
        episode_prefix: episode ids are ``{prefix}-{spec index}``.
        episode_ids: the episode ids, one per spec, instead (a resumed run plays the
            episodes it has not finished under their original ids).

    Raises:
        ValueError: ``episode_ids`` is not one id per spec.
    """
    if episode_ids is None:
        episode_ids = [f"{episode_prefix}-{k}" for k in range(len(specs))]
    if len(episode_ids) != len(specs):
        raise ValueError(f"Expected one episode id per spec ({len(specs)}), got {len(episode_ids)}")
    queue = deque(enumerate(specs))
    free = deque(range(envs.num_envs))
    running: dict[int, tuple[int, Episode, dict[str, Any]]] = {}
    done: dict[int, Episode] = {}
    bar = tqdm(
        total=len(specs),
        desc=progress if isinstance(progress, str) else policy.name,
        disable=not progress,
        unit="ep",
    )
    while queue or running:
        _start_episodes(policy, envs, queue, free, running, episode_ids)
        indices = list(running)
        observations = [running[i][2] for i in indices]
        t0 = time.perf_counter()
        policy_steps = policy.act(observations, indices)
        policy_time = (time.perf_counter() - t0) / len(indices)
        actions = {i: ps.action for i, ps in zip(indices, policy_steps, strict=True)}
        results = envs.step_envs(actions)
        for i, ps in zip(indices, policy_steps, strict=True):
            spec_index, episode, obs = running[i]
            next_obs, ended = _record_step(
                policy, envs, i, episode, obs, ps, results[i], policy_time, max_steps
            )
            if not ended:
                running[i] = (spec_index, episode, next_obs)
                continue
            _finish(episode, writer, keep_screenshots)
            done[spec_index] = episode
            del running[i]
            free.append(i)
            bar.update(1)
            bar.set_postfix(success=f"{_success_rate(done):.0%}")
    bar.close()
    return [done[k] for k in range(len(specs))]


def _record_step(
    policy: Policy,
    envs: SessionVectorEnv,
    index: int,
    episode: Episode,
    observation: dict[str, Any],
    policy_step: PolicyStep,
    result: tuple[dict[str, Any], float, bool, bool, dict[str, Any]],
    policy_time: float,
    max_steps: int,
) -> tuple[dict[str, Any], bool]:
    """Append sub-env ``index``'s step to its episode; returns the next observation and
    whether the episode ended (then its success, error and final prompt are set)."""
    next_obs, reward, terminated, truncated, info = result
    truncated = truncated or (not terminated and episode.length + 1 >= max_steps)
    episode.steps.append(
        to_step(
            observation,
            policy_step,
            (next_obs, reward, terminated, truncated, info),
            policy_time_s=policy_step.policy_time_s or policy_time,
            env_time_s=envs.envs[index].timings.get("step_s", 0.0),
        )
    )
    if not (terminated or truncated):
        return next_obs, False
    episode.success = bool(info.get("is_success", False))
    episode.error = info.get("error")
    # A time limit cut the episode short: the state it stopped in still has a value
    # (PPO bootstraps from it). A failed session's last screen does not.
    if not terminated and episode.error is None and isinstance(policy, FinalPromptPolicy):
        episode.final_prompt = policy.final_prompt(index, next_obs)
    return next_obs, True


def to_step(
    observation: dict[str, Any],
    policy_step: PolicyStep,
    result: tuple[dict[str, Any], float, bool, bool, dict[str, Any]],
    *,
    policy_time_s: float,
    env_time_s: float,
) -> Step:
    """The trajectory step of ``policy_step`` taken on ``observation``.

    Args:
        observation: what the policy acted on.
        policy_step: what it did.
        result: the env's ``(next_obs, reward, terminated, truncated, info)`` for it.
        policy_time_s, env_time_s: the wall times to record.
    """
    _, reward, terminated, truncated, info = result
    return Step(
        screenshot=observation["screenshot"],
        action=policy_step.action,
        error=policy_step.error or info.get("invalid_action"),
        text=policy_step.text,
        messages=policy_step.messages,
        model_images=policy_step.images,
        prompt_ids=policy_step.prompt_ids,
        completion_ids=policy_step.completion_ids,
        logprobs=policy_step.logprobs,
        reward=float(reward),
        terminated=bool(terminated),
        truncated=bool(truncated),
        progress=info.get("progress"),
        policy_time_s=policy_time_s,
        env_time_s=env_time_s,
        usage=normalize_usage(policy_step.extra.get("usage")),
    )


def _start_episodes(
    policy: Policy,
    envs: SessionVectorEnv,
    queue: deque[tuple[int, EpisodeSpec]],
    free: deque[int],
    running: dict[int, tuple[int, Episode, dict[str, Any]]],
    episode_ids: Sequence[str],
) -> None:
    starts: dict[int, tuple[int, EpisodeSpec]] = {}
    while queue and free:
        starts[free.popleft()] = queue.popleft()
    if not starts:
        return
    resets = envs.reset_envs({i: (spec.seed, spec.options) for i, (_, spec) in starts.items()})
    for i, (spec_index, spec) in starts.items():
        obs, info = resets[i]
        policy.begin_episode(i)
        episode = Episode(
            episode_id=episode_ids[spec_index],
            agent=policy.name,
            seed=spec.seed,
            options=dict(spec.options),
            instruction=obs["instruction"],
            target_rows=list(info.get("target_rows", [])),
            group_id=spec.group_id,
            task=info["task"],
        )
        running[i] = (spec_index, episode, obs)


def _finish(episode: Episode, writer: TrajectoryWriter | None, keep_screenshots: bool) -> None:
    if writer is not None:
        writer.write(episode)
    if not keep_screenshots:
        for step in episode.steps:
            step.screenshot = None


def _success_rate(done: dict[int, Episode]) -> float:
    return sum(e.success for e in done.values()) / max(1, len(done))
