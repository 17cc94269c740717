"""What the tasks' scripted experts share: plan a short macro from ``/oracle``, play it,
plan again.

Re-planning after each macro (a few actions) is what makes an expert recover from
whatever the page shows. An expert reads privileged state and acts only through
agent actions (pixels), so its episodes are demonstrations a model can learn from.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType


def box_centre(box: list[int]) -> tuple[int, int]:
    """The centre of an ``[x, y, width, height]`` box (the oracle's element boxes)."""
    x, y, w, h = box
    return x + w // 2, y + h // 2


def click(box: list[int]) -> Action:
    """A left click at the centre of ``box``."""
    return Action(ActionType.LEFT_CLICK, *box_centre(box))


class MacroExpert(abc.ABC):
    """A scripted expert that plays macros planned from the oracle.

    Methods:
        next_action(oracle): the next action given the current ``/oracle`` JSON (None
            is allowed while a macro is in progress: see ``needs_oracle``).
        needs_oracle: whether the next call plans (callers may skip an ``/oracle``
            round trip otherwise).
        reset(): forget the macro in progress (call at every episode start).
    """

    def __init__(self) -> None:
        self._queue: deque[Action] = deque()

    def reset(self) -> None:
        self._queue.clear()

    @property
    def needs_oracle(self) -> bool:
        return not self._queue

    def next_action(self, oracle: Mapping[str, Any] | None) -> Action:
        """The next action (``ValueError``: no macro in progress and no ``oracle``)."""
        if not self._queue:
            if oracle is None:
                raise ValueError("no macro in progress: pass the current /oracle state")
            self._queue.extend(self._plan(oracle))
        return self._queue.popleft()

    @abc.abstractmethod
    def _plan(self, oracle: Mapping[str, Any]) -> list[Action]:
        """The next macro (at least one action) for the state ``oracle`` shows."""
