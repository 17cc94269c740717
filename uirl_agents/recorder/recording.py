"""The recording: a person's actions through :meth:`UIEnv.step`, each episode written, in
a model's format, as it ends (:class:`Recorder`); what to record (:class:`RecorderConfig`).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from uirl_agents.episodes.rollout import to_step
from uirl_agents.episodes.trajectories import EPISODES_FILE, Episode, TrajectoryWriter
from uirl_agents.episodes.viewer import write_viewer
from uirl_agents.formats import FORMATS, get_format
from uirl_agents.policies.context import EpisodeContexts
from uirl_gym.actions import Action
from uirl_gym.env import UIEnv
from uirl_gym.tasks import TASKS

logger = logging.getLogger(__name__)

AGENT_NAME = "human"
# The only sub-env the recorder's prompt contexts ever hold.
ENV_INDEX = 0


@dataclass
class RecorderConfig:
    """What to record and where.

    Attributes:
        out_dir: the run directory (episodes are appended to one that has some).
        task: the task id (``uirl_gym.tasks.TASKS``).
        seed: episode k (counting every episode started) resets with ``seed + k``;
            None: the env draws the task instances.
        episodes: stop after saving this many episodes; 0: until Stop.
        format: the model format the steps are written in (``uirl_agents.formats``).
        max_images: screenshots in each step's prompt, as ``rollout.max_images``.
        max_steps: an episode still running after this many steps ends truncated.
        options: the task's reset options (SimpleDataEntry: ``num_rows``, ``rows``, ...).
        session_url: a running session server to use; None: start one locally.
    """

    out_dir: Path
    task: str = "simple_data_entry"
    seed: int | None = None
    episodes: int = 1
    format: str = "ui-tars"
    max_images: int = 1
    max_steps: int = 100
    options: dict[str, Any] = field(default_factory=dict)
    session_url: str | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task: unknown {self.task!r}; known: {sorted(TASKS)}")
        if self.format not in FORMATS:
            raise ValueError(f"format: unknown {self.format!r}; known: {sorted(FORMATS)}")
        if FORMATS[self.format].mode != "pixels":
            raise ValueError(
                f"format: {self.format!r} acts on elements; a person's clicks are points: "
                "record in a pixel format (ui-tars, qwen2.5-vl, text, json, coordinates)"
            )
        for name in ("max_images", "max_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.episodes < 0:
            raise ValueError(f"episodes: expected >= 0 (0: until Stop), got {self.episodes}")


class Recorder:
    """One person's episodes on one env, written as they end. Thread-safe.

    Attributes:
        config: the :class:`RecorderConfig`.
        env: the env the actions go through.
        finished: set once the last episode is saved or the person stopped.

    Methods:
        start(): reset the env for the first episode.
        act(action): one step of the person's; the episode is saved when it ends.
        new_episode(): drop the running episode and start the next one.
        stop(): drop the running episode and finish.
        state(): what the page shows, as JSON-ready data.
        saved: the episodes saved so far (their images are on disk only).
        screenshot_png(): the current screenshot.
    """

    def __init__(self, config: RecorderConfig, env: UIEnv) -> None:
        self.config = config
        self.env = env
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._contexts = EpisodeContexts(get_format(config.format), max_images=config.max_images)
        self._episode_number = _episodes_in(config.out_dir)
        self._writer = TrajectoryWriter(config.out_dir, append=True)
        self._started = 0  # episodes started here (the seed offset)
        self._saved: list[Episode] = []
        self._episode: Episode | None = None
        self._obs: dict[str, Any] = {}
        self._shown_at = 0.0  # when the current observation was handed to the page
        self._version = 0
        self._png: tuple[int, bytes] | None = None
        self._last_error: str | None = None

    def start(self) -> None:
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        cfg = self.config
        seed = None if cfg.seed is None else cfg.seed + self._started
        self._started += 1
        obs, info = self.env.reset(seed=seed, options=dict(cfg.options))
        self._episode = Episode(
            episode_id=f"{AGENT_NAME}-{self._episode_number}",
            agent=AGENT_NAME,
            seed=seed,
            options=dict(cfg.options),
            instruction=obs["instruction"],
            target_rows=list(info.get("target_rows", [])),
            task=info["task"],
        )
        self._contexts.begin_episode(ENV_INDEX)
        self._last_error = None
        self._show(obs)
        logger.info("episode %s: %s", self._episode.episode_id, obs["instruction"])

    def _show(self, obs: dict[str, Any]) -> None:
        self._obs = obs
        self._version += 1
        self._shown_at = time.perf_counter()

    def act(self, action: Action) -> None:
        """Step the env with the person's ``action``, written in the model's format.

        Raises:
            RecorderFinishedError: the recording is over.
        """
        with self._lock:
            episode = self._running()
            thinking_s = time.perf_counter() - self._shown_at
            policy_step = self._contexts.demonstrate(ENV_INDEX, self._obs, action)
            # The format writes every action it renders back as an action.
            assert policy_step.action is not None, policy_step.error
            obs, reward, terminated, truncated, info = self.env.step(policy_step.action)
            truncated = truncated or (
                not terminated and episode.length + 1 >= self.config.max_steps
            )
            step = to_step(
                self._obs,
                policy_step,
                (obs, reward, terminated, truncated, info),
                policy_time_s=thinking_s,
                env_time_s=self.env.timings.get("step_s", 0.0),
            )
            episode.steps.append(step)
            self._last_error = step.error
            self._show(obs)
            if terminated or truncated:
                episode.success = bool(info.get("is_success", False))
                episode.error = info.get("error")
                self._save(episode)

    def _save(self, episode: Episode) -> None:
        self._writer.write(episode)
        write_viewer(self.config.out_dir)
        for step in episode.steps:
            # On disk now; a long session must not hold every screenshot in memory.
            step.screenshot = step.model_images = None
        self._saved.append(episode)
        self._episode_number += 1
        self._episode = None
        logger.info(
            "saved %s: %s, reward %+.2f, %d steps",
            episode.episode_id,
            "success" if episode.success else "failure",
            episode.total_reward,
            episode.length,
        )
        if self.config.episodes and len(self._saved) >= self.config.episodes:
            self._finish()
        else:
            self._reset()

    def new_episode(self) -> None:
        """Drop the running episode (nothing of it is saved) and start the next one.

        Raises:
            RecorderFinishedError: the recording is over.
        """
        with self._lock:
            dropped = self._running()
            logger.info("episode %s dropped after %d steps", dropped.episode_id, dropped.length)
            self._reset()

    def stop(self) -> None:
        """Finish now; the running episode, if any, is dropped."""
        with self._lock:
            if self._episode is not None and self._episode.steps:
                logger.info("episode %s dropped (stopped)", self._episode.episode_id)
            self._finish()

    def _finish(self) -> None:
        self._episode = None
        self._writer.close()
        self.finished.set()

    def _running(self) -> Episode:
        if self._episode is None:
            raise RecorderFinishedError(
                f"the recording is over ({len(self._saved)} episodes saved in "
                f"{self.config.out_dir}); start the recorder again to record more"
            )
        return self._episode

    def state(self) -> dict[str, Any]:
        """What the page shows: the episode, its last step, the run so far."""
        with self._lock:
            episode = self._episode
            last = episode.steps[-1] if episode is not None and episode.steps else None
            return {
                "task": self.config.task,
                "format": self.config.format,
                "finished": self.finished.is_set(),
                "version": self._version,
                "episode_id": episode.episode_id if episode else None,
                "instruction": episode.instruction if episode else "",
                "steps": episode.length if episode else 0,
                "total_reward": episode.total_reward if episode else 0.0,
                "last_action": last.action.to_dict() if last and last.action else None,
                "last_text": last.text if last else "",
                "last_error": self._last_error,
                "progress": last.progress if last else None,
                "episodes_goal": self.config.episodes,
                "saved": [
                    {"episode_id": e.episode_id, "success": e.success, "reward": e.total_reward}
                    for e in self._saved
                ],
                "out_dir": str(self.config.out_dir),
            }

    @property
    def saved(self) -> list[Episode]:
        """The episodes saved so far, in order."""
        with self._lock:
            return list(self._saved)

    def screenshot_png(self) -> bytes:
        with self._lock:
            if self._png is None or self._png[0] != self._version:
                self._png = (self._version, _png_bytes(self._obs["screenshot"]))
            return self._png[1]

    def close(self) -> None:
        with self._lock:
            if not self.finished.is_set():
                self._finish()


class RecorderError(RuntimeError):
    """Base class of the recorder's errors."""


class RecorderFinishedError(RecorderError):
    """An action or a new episode after the recording finished."""


class RecorderAddressError(RecorderError):
    """The page's address cannot be served (e.g. the port is taken)."""


def _episodes_in(run_dir: Path) -> int:
    """Episodes already in ``run_dir`` (new episode ids continue after them)."""
    path = run_dir / EPISODES_FILE
    if not path.exists():
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def _png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    # Fast compression: the page asks for each screenshot once, over loopback.
    Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()
