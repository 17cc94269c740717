"""The policy interface every agent implements: batched, one step per sub-env.

A policy sees what the agent sees (``{"screenshot": uint8 (H, W, 3), "instruction": str}``
per sub-env) and returns one :class:`PolicyStep` per sub-env. Model policies fill in what
the trainers need (the exact images and prompt the model saw, token ids, logprobs).
A model's malformed output is not an exception: the step carries ``action=None`` and
``error`` (the env counts it as an invalid action).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from uirl_gym.actions import Action


@dataclass
class PolicyStep:
    """What a policy did for one sub-env at one step.

    Attributes:
        action: the env action, or None when the output could not be parsed.
        error: why there is no action (a parse error), else None.
        text: the model's raw output ("" for non-model policies).
        messages: the chat messages of the prompt, images as ``{"type": "image"}``
            placeholders in order (for SFT conversion and the loss pass).
        images: the exact images the model saw, in placeholder order.
        prompt_ids, completion_ids: token ids of the prompt and the generated completion.
        logprobs: per completion token, under the sampling policy.
        policy_time_s: this step's share of the batch's policy wall time.
        extra: anything else a policy wants recorded (e.g. the thought, and the parse's
            ``notes``: dropped extra actions, a call for the user).
    """

    action: Action | None
    error: str | None = None
    text: str = ""
    messages: list[dict[str, Any]] | None = None
    images: list[np.ndarray] | None = None
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None
    policy_time_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Policy(Protocol):
    """A batched agent.

    ``begin_episode(i)`` tells the policy that sub-env ``i`` starts a new episode (clear
    its history); ``act`` takes one observation per sub-env in ``env_indices`` order and
    returns one step each.
    """

    name: str

    def begin_episode(self, env_index: int) -> None: ...

    def act(
        self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]
    ) -> list[PolicyStep]: ...


@runtime_checkable
class FinalPromptPolicy(Protocol):
    """A model policy that can give the prompt of an episode's last observation.

    ``final_prompt(env_index, observation)`` returns ``(messages, images)`` exactly as
    ``act`` would have built them for ``observation``, without acting: the state a
    truncated episode stopped in, whose value PPO bootstraps from. Call it once, when
    the episode ends (it takes the observation into the sub-env's context).
    """

    def final_prompt(
        self, env_index: int, observation: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[np.ndarray]]: ...
