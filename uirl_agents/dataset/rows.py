"""The rows of an exported dataset, and their features (``datasets`` types).

Two configurations:

- ``episodes``: one row per episode: who played what (run, agent, model, format, task,
  seed, options, instruction), how it ended (success, rewards, terminated/truncated,
  error, tokens, cost) and its ``steps``, each with its screenshot (``datasets.Image``),
  its action in uirl's form (:class:`~uirl_gym.actions.Action`'s fields) and in the
  model format's text (``action_text``, the model's output), its reward and the task's
  progress;
- ``steps``: one row per step in the chat form VLM trainers take: ``messages`` (the
  prompt the policy saw, then its output as the assistant turn; every ``content`` a
  list of ``{"type": "text" | "image", "text"}`` parts) and ``images`` (the images of
  the prompt's placeholders, in order, as the policy saw them), with the step's action
  and reward and its episode's outcome (``episode_success``, ``episode_reward``) to
  filter on.

Screenshots are the run's PNG files byte for byte (no decoding, no re-encoding). A step
of a policy that recorded no prompt (a scripted agent) has a row in ``steps`` only when
the export writes it in a model format (``format=``: the prompt that format would show,
the action in its syntax, as expert demonstrations are written for training).

Text observations (issue 41) are columns of both when the steps carry them: a step
record's ``observation`` holds them by :data:`uirl_gym.env.TEXT_OBSERVATIONS` name
(``som`` is a PNG name under ``images/``, like the screenshot).
"""

from __future__ import annotations

import io
import json
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Features, Image, List, Value
from PIL import Image as PILImage

from uirl_agents.dataset.runs import OBSERVATION_KEY, LeftOut, RunSource
from uirl_agents.episodes.trajectories import IMAGES_DIR
from uirl_agents.policies.context import EpisodeContexts
from uirl_agents.policies.usage import USAGE_KEYS, add_usage
from uirl_gym.actions import ACTION_FIELDS, Action


def _action_features() -> dict[str, Value]:
    hints = typing.get_type_hints(Action)
    return {"type": Value("string")} | {
        name: Value("int64" if int in typing.get_args(hints[name]) else "string")
        for name in ACTION_FIELDS
    }


ACTION = _action_features()
USAGE = {key: Value("int64") for key in USAGE_KEYS}
# The env's text observations as columns (uirl_gym.env.observation_space's types).
OBSERVATION_FEATURES: dict[str, Any] = {
    "axtree": Value("string"),
    "html": Value("string"),
    "elements": List(
        {
            "bid": Value("string"),
            "bbox": List(Value("float32")),
            "visibility": Value("float32"),
            "clickable": Value("int64"),
            "set_of_marks": Value("int64"),
        }
    ),
    "som": Image(),
    "focused": Value("string"),
    "url": Value("string"),
    "last_action_error": Value("string"),
}
MESSAGES = List(
    {"role": Value("string"), "content": List({"type": Value("string"), "text": Value("string")})}
)
# What every row of both configurations says of its episode.
_EPISODE_KEYS: dict[str, Any] = {
    "episode_id": Value("string"),
    "run": Value("string"),
    "agent": Value("string"),
    "model": Value("string"),
    "format": Value("string"),
    "task": Value("string"),
    "seed": Value("int64"),
    "instruction": Value("string"),
}


def _observations(names: Iterable[str]) -> dict[str, Any]:
    return {name: OBSERVATION_FEATURES[name] for name in OBSERVATION_FEATURES if name in names}


def episode_features(observations: Iterable[str] = ()) -> Features:
    """The ``episodes`` configuration's features (``observations``: the text
    observations the steps carry)."""
    step = {
        "screenshot": Image(),
        "action": ACTION,
        "action_text": Value("string"),
        "error": Value("string"),
        "reward": Value("float64"),
        "terminated": Value("bool"),
        "truncated": Value("bool"),
        "progress": Value("string"),  # the task's record, JSON (its keys are the task's)
        "policy_time_s": Value("float64"),
        "env_time_s": Value("float64"),
        "usage": USAGE,
    } | _observations(observations)
    return Features(
        _EPISODE_KEYS
        | {
            "options": Value("string"),  # the reset options, JSON (their keys are the task's)
            "target_rows": List(Value("int64")),
            "group_id": Value("string"),
            "success": Value("bool"),
            "error": Value("string"),
            "total_reward": Value("float64"),
            "num_steps": Value("int64"),
            "terminated": Value("bool"),
            "truncated": Value("bool"),
            "usage": USAGE,
            "cost_usd": Value("float64"),
            "steps": List(step),
        }
    )


def step_features(observations: Iterable[str] = ()) -> Features:
    """The ``steps`` configuration's features."""
    return Features(
        _EPISODE_KEYS
        | {
            "step": Value("int64"),
            "messages": MESSAGES,
            "images": List(Image()),
            "action": ACTION,
            "error": Value("string"),
            "reward": Value("float64"),
            "terminated": Value("bool"),
            "truncated": Value("bool"),
            "episode_success": Value("bool"),
            "episode_reward": Value("float64"),
        }
        | _observations(observations)
    )


def action_of(row: dict[str, Any] | None) -> Action | None:
    """The :class:`Action` of an ``action`` column's value (None stays None)."""
    if row is None:
        return None
    return Action(**{k: v for k, v in row.items() if v is not None})


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message with its ``content`` as a list of ``{"type", "text"}`` parts (a string
    is one text part): the one shape a Parquet column can hold for every role."""
    content = message["content"]
    parts = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else [{"type": p["type"], "text": p.get("text")} for p in content]
    )
    return {"role": message["role"], "content": parts}


@dataclass
class EpisodeRows:
    """An episode's rows: its ``episodes`` row, its ``steps`` rows, what was left out,
    and the image bytes they hold (to size row groups and shards)."""

    episode: dict[str, Any]
    steps: list[dict[str, Any]]
    left_out: list[LeftOut]
    episode_bytes: int
    step_bytes: int


class RowBuilder:
    """Turns one run directory's episode records into rows.

    Args:
        source: the run directory.
        observations: the text observations to make columns of.
        render: writes the steps without a recorded prompt in a model format (None:
            those steps have no ``steps`` row).
    """

    def __init__(
        self,
        source: RunSource,
        observations: Sequence[str],
        render: EpisodeContexts | None = None,
    ) -> None:
        self.source = source
        self.observations = [n for n in OBSERVATION_FEATURES if n in observations]
        self.render = render
        self._images_dir = source.path / IMAGES_DIR

    def rows(self, record: dict[str, Any]) -> EpisodeRows:
        images = _ImageFiles(self._images_dir)
        steps = record["steps"]
        usage = add_usage(s.get("usage") for s in steps)
        price = self.source.price
        common = self._common(record)
        episode = common | {
            "options": json.dumps(record.get("options") or {}, sort_keys=True),
            "target_rows": record.get("target_rows") or [],
            "group_id": record.get("group_id"),
            "success": bool(record.get("success")),
            "error": record.get("error"),
            "total_reward": _total_reward(record),
            "num_steps": len(steps),
            "terminated": bool(steps and steps[-1].get("terminated")),
            "truncated": bool(steps and steps[-1].get("truncated")),
            "usage": usage,
            "cost_usd": price.cost_usd(usage) if price is not None and usage else None,
            "steps": [self._episode_step(s, images) for s in steps],
        }
        episode_bytes = images.read_bytes
        step_rows, left_out = self._step_rows(record, common, images)
        return EpisodeRows(
            episode, step_rows, left_out, episode_bytes, images.read_bytes - episode_bytes
        )

    def _common(self, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "episode_id": record["episode_id"],
            "run": self.source.name,
            "agent": record.get("agent"),
            "model": self.source.model,
            "format": self.source.format,
            "task": record.get("task", "simple_data_entry"),  # runs before multi-task runs
            "seed": record.get("seed"),
            "instruction": record.get("instruction", ""),
        }

    def _episode_step(self, step: dict[str, Any], images: _ImageFiles) -> dict[str, Any]:
        progress = step.get("progress")
        return {
            "screenshot": images.column(step.get("screenshot")),
            "action": _action_row(step.get("action")),
            "action_text": step.get("text", ""),
            "error": step.get("error"),
            "reward": float(step.get("reward", 0.0)),
            "terminated": bool(step.get("terminated")),
            "truncated": bool(step.get("truncated")),
            "progress": None if progress is None else json.dumps(progress, sort_keys=True),
            "policy_time_s": float(step.get("policy_time_s", 0.0)),
            "env_time_s": float(step.get("env_time_s", 0.0)),
            "usage": step.get("usage"),
        } | self._observation_columns(step, images)

    def _observation_columns(self, step: dict[str, Any], images: _ImageFiles) -> dict[str, Any]:
        observed = step.get(OBSERVATION_KEY) or {}
        columns = {name: observed.get(name) for name in self.observations}
        if "som" in columns:
            columns["som"] = images.column(columns["som"])
        return columns

    def _step_rows(
        self, record: dict[str, Any], common: dict[str, Any], images: _ImageFiles
    ) -> tuple[list[dict[str, Any]], list[LeftOut]]:
        outcome = {
            "episode_success": bool(record.get("success")),
            "episode_reward": _total_reward(record),
        }
        if self.render is not None:
            self.render.begin_episode(0)
        rows, left_out = [], []
        for n, step in enumerate(record["steps"]):
            if step.get("messages") is not None:
                prompt = self._recorded_prompt(step, images)
                written_in = self.source.format
            elif self.render is not None and step.get("action") and step.get("screenshot"):
                try:
                    prompt = self._rendered_prompt(record, step, images)
                except ValueError as exc:  # an action the format cannot express
                    where = f"episode {record['episode_id']} step {n}"
                    left_out.append(
                        LeftOut(self.source.name, where, f"{exc} (and the steps after)")
                    )
                    break
                written_in = self.render.format.name
            else:
                continue
            messages, step_images = prompt
            if sum(p["type"] == "image" for m in messages for p in m["content"]) != len(
                step_images
            ):
                where = f"episode {record['episode_id']} step {n}"
                left_out.append(LeftOut(self.source.name, where, "image placeholders != images"))
                continue
            rows.append(
                common
                | {"format": written_in, "step": n, "messages": messages, "images": step_images}
                | {
                    "action": _action_row(step.get("action")),
                    "error": step.get("error"),
                    "reward": float(step.get("reward", 0.0)),
                    "terminated": bool(step.get("terminated")),
                    "truncated": bool(step.get("truncated")),
                }
                | outcome
                | self._observation_columns(step, images)
            )
        return rows, left_out

    def _recorded_prompt(
        self, step: dict[str, Any], images: _ImageFiles
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        messages = [chat_message(m) for m in step["messages"]]
        messages.append(chat_message({"role": "assistant", "content": step.get("text", "")}))
        return messages, [images.image(name) for name in step.get("model_images") or []]

    def _rendered_prompt(
        self, record: dict[str, Any], step: dict[str, Any], images: _ImageFiles
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        assert self.render is not None
        screenshot = images.pixels(step["screenshot"])
        observation = {"screenshot": screenshot, "instruction": record.get("instruction", "")}
        action = action_of(_action_row(step["action"]))
        assert action is not None
        written = self.render.demonstrate(0, observation, action)
        messages = [chat_message(m) for m in written.messages or []]
        messages.append(chat_message({"role": "assistant", "content": written.text}))
        return messages, [images.encoded(img) for img in written.images or []]


def _total_reward(record: dict[str, Any]) -> float:
    return float(sum(float(s.get("reward", 0.0)) for s in record["steps"]))


def _action_row(action: dict[str, Any] | None) -> dict[str, Any] | None:
    if action is None:
        return None
    return {"type": action["type"]} | {name: action.get(name) for name in ACTION_FIELDS}


class _ImageFiles:
    """One episode's PNG files, each read once, as ``datasets.Image`` values."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.read_bytes = 0
        self._cache: dict[str, bytes] = {}

    def _load(self, name: str) -> bytes:
        data = self._cache.get(name)
        if data is None:
            data = self._cache[name] = (self.folder / name).read_bytes()
        return data

    def data(self, name: str) -> bytes:
        data = self._load(name)
        self.read_bytes += len(data)  # each use is a copy in the Parquet file
        return data

    def image(self, name: str) -> dict[str, Any]:
        return {"bytes": self.data(name), "path": name}

    def column(self, name: str | None) -> dict[str, Any] | None:
        return None if name is None else self.image(name)

    def pixels(self, name: str) -> np.ndarray:
        with PILImage.open(io.BytesIO(self._load(name))) as img:
            return np.asarray(img.convert("RGB"))

    def encoded(self, image: np.ndarray) -> dict[str, Any]:
        buffer = io.BytesIO()
        PILImage.fromarray(image).save(buffer, format="PNG", compress_level=1)
        data = buffer.getvalue()
        self.read_bytes += len(data)
        return {"bytes": data, "path": None}
