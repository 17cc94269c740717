"""Trajectories: what happened in an episode, in memory and on disk.

On disk a run directory holds ``episodes.jsonl`` (one JSON line per finished episode,
appended and flushed as each episode ends, so a crash loses at most the episodes in
flight) and ``images/`` (PNG files named by content hash: a screenshot shared by steps
or episodes is stored once). :func:`load_episodes` reads it back with images as arrays.

:func:`to_sft_examples` turns steps into TRL SFT examples (``messages`` with image
placeholders + ``images``; the assistant turn is the only one with loss).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from uirl_gym.actions import Action

logger = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
IMAGES_DIR = "images"


@dataclass
class Step:
    """One step of an episode.

    Attributes:
        screenshot: the observation the policy acted on (uint8 (H, W, 3)).
        action: the env action (None: the output did not parse).
        error: the parse error, or the env's invalid-action message.
        text: the model's raw output.
        messages, model_images: the prompt exactly as the model saw it.
        prompt_ids, completion_ids, logprobs: token ids and per-token logprobs.
        reward, terminated, truncated: the env's answer.
        progress: the task's record after the step.
        policy_time_s, env_time_s: wall time spent in the policy and in the env.
        usage: the tokens of the API request made at this step (normalised by
            :func:`uirl_agents.policies.usage.normalize_usage`); None when it made none.
    """

    screenshot: np.ndarray | None
    action: Action | None
    error: str | None = None
    text: str = ""
    messages: list[dict[str, Any]] | None = None
    model_images: list[np.ndarray] | None = None
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    progress: dict[str, Any] | None = None
    policy_time_s: float = 0.0
    env_time_s: float = 0.0
    usage: dict[str, int] | None = None


@dataclass
class Episode:
    """One episode of one agent on one task instance.

    Attributes:
        episode_id: unique within a run.
        agent: the policy's name.
        seed, options: the reset arguments (same seed + options = same task instance).
        group_id: episodes of one GRPO group share it (None outside GRPO).
        instruction: what was asked; target_rows: SimpleDataEntry's rows (else empty).
        steps: the steps, in order.
        success: all target rows submitted, none wrong (the env's ``is_success``).
        error: the session failure that ended the episode, if any.
        final_prompt: ``(messages, images)`` of the state a truncated episode stopped in
            (model policies; PPO bootstraps its value from it); kept in memory only,
            not written.
    """

    episode_id: str
    agent: str
    seed: int | None
    options: dict[str, Any]
    instruction: str
    target_rows: list[int]
    steps: list[Step] = field(default_factory=list)
    success: bool = False
    error: str | None = None
    group_id: str | None = None
    task: str = "simple_data_entry"  # runs written before multi-task runs hold no task
    final_prompt: tuple[list[dict[str, Any]], list[np.ndarray]] | None = None

    @property
    def total_reward(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def length(self) -> int:
        return len(self.steps)

    @property
    def num_invalid(self) -> int:
        return sum(s.error is not None for s in self.steps)


class TrajectoryWriter:
    """Writes finished episodes to a run directory.

    Args:
        run_dir: the folder (created).
        append: keep episodes already there (a resumed run); False starts afresh.
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, append: bool = True) -> None:
        self.run_dir = Path(run_dir)
        (self.run_dir / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
        mode = "a" if append else "w"
        self._file = open(self.run_dir / EPISODES_FILE, mode, encoding="utf-8")  # noqa: SIM115

    def _save_image(self, image: np.ndarray) -> str:
        digest = hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest()[:20]
        name = f"{digest}_{image.shape[1]}x{image.shape[0]}.png"
        path = self.run_dir / IMAGES_DIR / name
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            Image.fromarray(image).save(tmp, format="PNG", compress_level=1)
            os.replace(tmp, path)
        return name

    def write(self, episode: Episode) -> None:
        record = {k: v for k, v in asdict(episode).items() if k not in ("steps", "final_prompt")}
        record["total_reward"] = episode.total_reward
        record["steps"] = [self._step_record(s) for s in episode.steps]
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def _step_record(self, step: Step) -> dict[str, Any]:
        record: dict[str, Any] = {
            k: v
            for k, v in asdict(step).items()
            if k not in ("screenshot", "model_images", "action")
        }
        record["action"] = step.action.to_dict() if step.action else None
        record["screenshot"] = (
            self._save_image(step.screenshot) if step.screenshot is not None else None
        )
        record["model_images"] = (
            [self._save_image(img) for img in step.model_images] if step.model_images else None
        )
        return record

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_episodes(
    run_dir: str | os.PathLike[str], *, load_images: bool = True
) -> Iterator[Episode]:
    """Episodes of a run directory, in the order written.

    A truncated last line (a crash while writing) is skipped with a warning.
    """
    run_dir = Path(run_dir)
    images_dir = run_dir / IMAGES_DIR

    def image(name: str | None) -> np.ndarray | None:
        if name is None or not load_images:
            return None
        with Image.open(images_dir / name) as img:
            return np.asarray(img.convert("RGB"))

    with open(run_dir / EPISODES_FILE, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s line %d is incomplete; skipped", run_dir / EPISODES_FILE, n)
                continue
            steps = []
            for s in record.pop("steps"):
                s["action"] = (
                    Action(**{"type": s["action"].pop("type"), **s["action"]})
                    if s["action"]
                    else None
                )
                s["screenshot"] = image(s["screenshot"])
                s["model_images"] = (
                    [image(name) for name in s["model_images"]] if s["model_images"] else None
                )
                steps.append(Step(**s))
            record.pop("total_reward", None)
            yield Episode(**record, steps=steps)


def load_episodes(run_dir: str | os.PathLike[str], *, load_images: bool = True) -> list[Episode]:
    return list(iter_episodes(run_dir, load_images=load_images))


def to_sft_examples(episodes: Iterable[Episode]) -> list[dict[str, Any]]:
    """One TRL SFT example per model step: prompt messages + the completion as assistant.

    Returns:
        ``[{"messages": [...], "images": [PIL.Image, ...]}, ...]``. The prompt turns come
        from the step's recorded messages; the completion is the step's output text.
        Steps without recorded messages are skipped: record expert demonstrations with
        ``ExpertPolicy(..., format=...)``, which writes them in the model's format.
    """
    examples = []
    for episode in episodes:
        for step in episode.steps:
            if step.messages is None or step.model_images is None:
                continue
            messages = [*step.messages, {"role": "assistant", "content": step.text}]
            examples.append(
                {
                    "messages": messages,
                    "images": [Image.fromarray(img) for img in step.model_images],
                }
            )
    return examples
