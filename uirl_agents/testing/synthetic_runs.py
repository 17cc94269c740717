"""Synthetic run directories, in the layout the trajectory writer produces, with real PNGs.

For tests and benchmarks of what reads runs (the dataset export): no session, no model.
:func:`write_synthetic_run` writes ``episodes`` episodes of ``steps`` steps through
:class:`~uirl_agents.episodes.trajectories.TrajectoryWriter` itself; each step's
screenshot is a distinct page-like frame (a spreadsheet scrolled per episode, a form
whose fields fill as the steps go, a moving pointer: text and flat colours, so that
the PNGs compress as real screenshots do, not as noise), and each step is written in a
model format as a demonstration is
(:meth:`~uirl_agents.policies.context.EpisodeContexts.demonstrate`: the prompt, the
model's image, the action's text), so the run has what a model policy's run has.

``observations`` adds text observations to every step record, under ``observation``,
as issue 41's writer is to record them: the export makes columns of them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from uirl_agents.episodes.trajectories import EPISODES_FILE, Episode, Step, TrajectoryWriter
from uirl_agents.formats import get_format
from uirl_agents.policies.context import EpisodeContexts
from uirl_gym.actions import Action, ActionType

_NAMES = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "John", "Radia"]
_ROW_PX = 18


class _Screen:
    """Page-like frames of one size: a tall sheet drawn once, cropped per episode."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.font = ImageFont.load_default()
        rows = height * 3 // _ROW_PX
        sheet = Image.new("RGB", (width // 2, rows * _ROW_PX), "white")
        draw = ImageDraw.Draw(sheet)
        for r in range(rows):
            y = r * _ROW_PX
            draw.line([(0, y), (width // 2, y)], fill=(218, 220, 224))
            first, last = _NAMES[r % len(_NAMES)], _NAMES[(r * 7 + 3) % len(_NAMES)]
            cells = (str(r + 1), first, last, f"{first}.{last}{r}@example.com".lower())
            for c, text in enumerate(cells):
                draw.text((4 + c * width // 9, y + 4), text, fill=(32, 33, 36), font=self.font)
        self.sheet = sheet

    def frame(self, episode: int, step: int) -> np.ndarray:
        image = Image.new("RGB", (self.width, self.height), (248, 249, 250))
        top = (episode * 7 * _ROW_PX) % max(1, self.sheet.height - self.height)
        image.paste(self.sheet.crop((0, top, self.width // 2, top + self.height)), (0, 0))
        draw = ImageDraw.Draw(image)
        left = self.width // 2 + max(4, self.width // 40)
        field_h = max(12, self.height // 16)
        for f in range(3):
            y = self.height // 8 + f * 2 * field_h
            draw.rectangle([left, y, self.width - 8, y + field_h], outline=(95, 99, 104))
            typed = _NAMES[(episode + f) % len(_NAMES)][: max(0, step - 2 * f)]
            draw.text((left + 4, y + 2), typed, fill=(32, 33, 36), font=self.font)
        x, y = self.pointer(episode, step)
        draw.polygon([(x, y), (x + 6, y + 12), (x + 1, y + 10)], fill=(0, 0, 0))
        return np.asarray(image)

    def pointer(self, episode: int, step: int) -> tuple[int, int]:
        return (
            (episode * 37 + step * 53) % (self.width - 8),
            (episode * 11 + step * 29) % (self.height - 14),
        )


def _action(screen: _Screen, episode: int, step: int) -> Action:
    if step % 3 == 1:
        return Action(ActionType.TYPE, text=_NAMES[(episode + step) % len(_NAMES)])
    x, y = screen.pointer(episode, step + 1)
    return Action(ActionType.LEFT_CLICK, x=x, y=y)


def write_synthetic_run(
    run_dir: str | os.PathLike[str],
    *,
    episodes: int,
    steps: int,
    screen: tuple[int, int] = (1280, 800),
    format: str = "ui-tars",
    observations: dict[str, Any] | None = None,
) -> Path:
    """Write a run directory of ``episodes`` episodes of ``steps`` steps.

    Args:
        run_dir: the folder (created; appended to if it holds a run).
        screen: the screenshots' ``(width, height)``.
        format: the model format the steps are written in.
        observations: text observations added to every step record (``observation``).

    Returns:
        ``run_dir``.
    """
    run_dir = Path(run_dir)
    page = _Screen(*screen)
    contexts = EpisodeContexts(get_format(format))
    instruction = "Copy the person in spreadsheet row 21 into the form on the right."
    with TrajectoryWriter(run_dir) as writer:
        for e in range(episodes):
            contexts.begin_episode(0)
            episode = Episode(
                episode_id=f"ep-{e}",
                agent="hf:synthetic",
                seed=e,
                options={"task": "simple_data_entry", "num_rows": 1},
                instruction=instruction,
                target_rows=[e % 100],
                success=e % 2 == 0,
            )
            for k in range(steps):
                shot = page.frame(e, k)
                observation = {"screenshot": shot, "instruction": instruction}
                written = contexts.demonstrate(0, observation, _action(page, e, k))
                last = k == steps - 1
                episode.steps.append(
                    Step(
                        screenshot=shot,
                        action=written.action,
                        text=written.text,
                        messages=written.messages,
                        model_images=written.images,
                        reward=1.0 if last and episode.success else 0.0,
                        terminated=last and episode.success,
                        truncated=last and not episode.success,
                        progress={"submitted_row_indices": [], "num_incorrect_submissions": 0},
                        policy_time_s=0.1,
                        env_time_s=0.05,
                    )
                )
            writer.write(episode)
    if observations is not None:
        _add_observations(run_dir / EPISODES_FILE, observations)
    return run_dir


def _add_observations(path: Path, observations: dict[str, Any]) -> None:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record in records:
        for step in record["steps"]:
            step["observation"] = observations
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
