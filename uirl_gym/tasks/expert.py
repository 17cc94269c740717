"""What the tasks' scripted experts share: plan a short macro from ``/oracle``, play it,
plan again.

Re-planning after each macro (a few actions) is what makes an expert recover from
whatever the page shows. An expert reads privileged state and acts only through
agent actions (pixels), so its episodes are demonstrations a model can learn from.
"""

from __future__ import annotations

import abc
import math
from collections import deque
from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import MAX_SCROLL_AMOUNT, SCROLL_NOTCH_PX, Action, ActionType


def box_centre(box: list[int]) -> tuple[int, int]:
    """The centre of an ``[x, y, width, height]`` box (the oracle's element boxes)."""
    x, y, w, h = box
    return x + w // 2, y + h // 2


def click(box: list[int]) -> Action:
    """A left click at the centre of ``box``."""
    return Action(ActionType.LEFT_CLICK, *box_centre(box))


def scroll_towards(box: list[int], y: float, *, round_up: bool = False) -> Action:
    """One wheel scroll over the middle of ``box`` (a scrollable list, sheet or grid)
    that brings what is at screen height ``y`` near the box's vertical middle: at least
    one notch, at most :data:`~uirl_gym.actions.MAX_SCROLL_AMOUNT`; ``round_up``: round
    the notches up rather than to the nearest (scroll past rather than short of it).
    Experts call it again until the target is in view."""
    x0, y0, w, h = box
    delta = y - (y0 + h / 2)
    notches = abs(delta) / SCROLL_NOTCH_PX
    amount = math.ceil(notches) if round_up else round(notches)
    return Action(
        ActionType.SCROLL,
        x0 + w // 2,
        y0 + h // 2,
        direction="down" if delta > 0 else "up",
        amount=max(1, min(MAX_SCROLL_AMOUNT, amount)),
    )


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
