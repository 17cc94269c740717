"""Per-sub-env episode context for model policies: what goes into the next prompt.

Both model policies (:mod:`.hf`, :mod:`.openai_compat`) keep, per sub-env, the
instruction, what the model was shown of the latest ``max_images`` steps (the format's
:class:`~uirl_agents.formats.base.StepView`: the resized screenshot, or the page as text)
and the model's earlier outputs, and build the prompt from them with the format. This module
is that bookkeeping, once. It does not import torch.

A reply that did not parse reaches the env as no action; the next step's
``last_action_error`` then says what the parse found wrong (the format's message), so a
format that shows the error (``axtree``, ``som``) tells the model why.

It also tracks where the mouse pointer is (screen pixels): the point of the last parsed
action of the episode that had one. :meth:`EpisodeContexts.observe` hands it to the
format in ``Prompt.geometry.pointer``, so that a click without coordinates (Qwen's
``left_click`` with no ``coordinate``) becomes a click at that point: the env keeps
receiving explicit screen pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from uirl_agents.formats import ModelFormat, ScreenGeometry
from uirl_agents.formats.base import Message, StepView
from uirl_agents.policies.base import PolicyStep
from uirl_gym.actions import Action


@dataclass
class Prompt:
    """One sub-env's prompt for one step.

    Attributes:
        messages: chat messages with ``{"type": "image"}`` placeholders.
        images: the resized screenshots, in placeholder order (uint8, (h, w, 3)); none
            for a format that shows the page as text only.
        geometry: maps the model's coordinates to the screen; its ``pointer`` is where
            the episode's last pointer action went (None before the first one).
    """

    messages: list[Message]
    images: list[np.ndarray]
    geometry: ScreenGeometry


@dataclass
class _Episode:
    instruction: str = ""
    views: list[StepView] = field(default_factory=list)  # of the latest max_images steps
    outputs: list[str] = field(default_factory=list)
    geometry: ScreenGeometry | None = None  # of the step observed last
    pointer: tuple[int, int] | None = None  # screen pixels; a fresh episode's is unknown
    parse_error: str = ""  # why the last output did not parse ("": it did)


class EpisodeContexts:
    """The prompt context of every sub-env.

    Args:
        format: builds messages and resizes screenshots.
        max_images: steps shown with their observation in the prompt (latest ones,
            current included; a screenshot, or the page as text); >= 1.
        max_history: earlier outputs kept as assistant turns (latest ones); None: all.

    Raises:
        ValueError: ``max_images < 1`` or ``max_history < 0``.
    """

    def __init__(self, format: ModelFormat, max_images: int = 1, max_history: int | None = None):
        if max_images < 1:
            raise ValueError(f"max_images: expected >= 1, got {max_images}")
        if max_history is not None and max_history < 0:
            raise ValueError(f"max_history: expected None or >= 0, got {max_history}")
        self.format = format
        self.max_images = max_images
        self.max_history = max_history
        self._episodes: dict[int, _Episode] = {}

    def begin_episode(self, env_index: int) -> None:
        """Forget sub-env ``env_index``'s screenshots and outputs."""
        self._episodes[env_index] = _Episode()

    def observe(self, env_index: int, observation: dict[str, Any]) -> Prompt:
        """Add what the model is shown of this step and return the prompt for it.

        A sub-env seen for the first time starts an episode implicitly.
        """
        episode = self._episodes.setdefault(env_index, _Episode())
        screenshot = observation["screenshot"]
        episode.instruction = observation["instruction"]
        if episode.parse_error:
            observation = {**observation, "last_action_error": episode.parse_error}
        episode.views.append(self.format.view(observation))
        del episode.views[: -self.max_images]
        history = episode.outputs
        if self.max_history is not None:
            history = history[len(history) - min(self.max_history, len(history)) :]
        views = episode.views[-min(len(episode.views), len(history) + 1) :]
        geometry = replace(self.format.geometry_for(screenshot), pointer=episode.pointer)
        episode.geometry = geometry
        messages = self.format.build_messages(
            episode.instruction,
            history,
            len(views),
            geometry,
            pages=[view.text for view in views],
        )
        images = [view.image for view in views if view.image is not None]
        return Prompt(messages, images, geometry)

    def record(self, env_index: int, output: str) -> None:
        """Add the model's output for the step just observed (it becomes history).

        The output is parsed again (cheap, and the same inputs give the same action
        the policy returned) to move the tracked pointer to the action's point, and to
        keep the parse's error for the next step's ``last_action_error``.
        """
        episode = self._episodes.setdefault(env_index, _Episode())
        episode.outputs.append(output)
        if episode.geometry is not None:
            parsed = self.format.parse(output, episode.geometry)
            action = parsed.action
            episode.parse_error = parsed.error or ""
            if action is not None and action.end_x is not None and action.end_y is not None:
                episode.pointer = (action.end_x, action.end_y)  # a drag ends there
            elif action is not None and action.x is not None and action.y is not None:
                episode.pointer = (action.x, action.y)

    def demonstrate(
        self, env_index: int, observation: dict[str, Any], action: Action
    ) -> PolicyStep:
        """A demonstration step: ``action`` written as the model would have written it.

        Used for every demonstrator (the scripted experts, a person at the recorder), so
        that their steps are SFT data in the model's own format: the prompt and images
        the model would see, the completion text it would write.

        Returns:
            The step, whose ``action`` is what the text says (e.g. UI-TARS scrolls carry
            no amount), so that a demonstration's text and its effect always agree.
        """
        prompt = self.observe(env_index, observation)
        text = self.format.render(action, prompt.geometry)
        executed = self.format.parse(text, prompt.geometry).action or action
        self.record(env_index, text)
        return PolicyStep(
            action=executed, text=text, messages=prompt.messages, images=prompt.images
        )

    def pointer(self, env_index: int) -> tuple[int, int] | None:
        """Where sub-env ``env_index``'s pointer is (screen pixels), None if not known."""
        episode = self._episodes.get(env_index)
        return episode.pointer if episode is not None else None
