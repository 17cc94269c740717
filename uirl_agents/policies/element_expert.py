"""A task's scripted expert acting by element: its points become the elements under them.

The scripted experts (``uirl_gym.tasks.*.expert``) plan from the oracle and act at
points, the centres of the boxes the oracle gives. :class:`ElementExpert` plays the same
plan through actions on elements, found in the step's text observations: the element a
point means is the innermost visible element whose box holds it (``elements``;
:func:`element_at`), and what the action becomes is the element form of it:

- a click, double or right click, a move: the same on the element (its ``bid``);
- a click into a text field or a <select> (role ``textbox``, ``searchbox``,
  ``combobox``, ``spinbutton`` in the ``axtree``) that the plan follows with typing
  (``ctrl+a`` first or not): one ``fill`` of the field (``select_option`` of a
  <select>) with the text; typing elsewhere fills the focused element;
- keys: pressed on the focused element (``focused``; else the one clicked last);
- a drag: from the element under its start to the element under its end;
- a scroll at a point: a move onto the element under it, then a scroll at the pointer
  (a scroll names no element; it carries no point either).

Which element is on top at a point the page knows, not the observation: when the
session refuses an action because another element covers its element's centre
(``last_action_error``: ``... is covered by <div bid="31"> at its centre``), the
expert plays the same action on the covering element.

A bid click acts at the element's visible centre, so a plan that means a point off an
element's centre (use-slider's clicks at the ends of its track) is not played the same
way; docs/agents.md lists what the element form solves.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from uirl_agents.formats.page import axtree_entries
from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert

# The env observations an ElementExpert reads (UIEnv's ``observations=``).
ELEMENT_OBSERVATIONS = ("axtree", "elements", "focused", "last_action_error")
# How far from an element's centre a point of the plan may be and still mean it: the
# oracle's boxes are whole pixels, the elements' are not.
CENTRE_TOLERANCE_PX = 2.0
# Roles of the fields typing goes into: filled, or (a <select>) chosen from.
FIELD_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton"})
SELECT_ROLES = frozenset({"combobox"})
_POINT_TYPES = frozenset(
    {
        ActionType.LEFT_CLICK,
        ActionType.RIGHT_CLICK,
        ActionType.DOUBLE_CLICK,
        ActionType.TRIPLE_CLICK,
        ActionType.MOUSE_MOVE,
    }
)
_AS_IS = frozenset({ActionType.FINISH, ActionType.SCREENSHOT, ActionType.SEND_MSG_TO_USER})
# The session's refusal of an element hidden under another at its centre.
_COVERED = re.compile(r"^bid '([A-Za-z0-9]+)': .* is covered by <[^>]*\bbid=\"([A-Za-z0-9]+)\"")


class NoElementError(ValueError):
    """A point of the plan with no visible element under it (the message says where)."""


def element_at(elements: Sequence[Mapping[str, Any]], x: float, y: float) -> str:
    """The bid of the element a point means, of the visible elements whose box holds
    ``(x, y)``: one centred on the point (the experts click the centres of the boxes the
    oracle gives: a menu's item over a field of the page is the item), else one of the
    innermost (whose box holds no other's); of several, the later bid (what a wrapper
    wraps; a menu opened after the rows under it).

    Raises:
        NoElementError: no visible element holds the point.
    """
    holding = []
    for order, element in enumerate(elements):
        left, top, width, height = (float(v) for v in element["bbox"])
        if left <= x < left + width and top <= y < top + height and element["visibility"] > 0:
            holding.append((order, (left, top, left + width, top + height), str(element["bid"])))
    if not holding:
        raise NoElementError(f"no visible element at ({x}, {y}): the plan's point is off the page")
    centred = [
        (order, bid)
        for order, box, bid in holding
        if abs((box[0] + box[2]) / 2 - x) <= CENTRE_TOLERANCE_PX
        and abs((box[1] + box[3]) / 2 - y) <= CENTRE_TOLERANCE_PX
    ]
    innermost = [
        (order, bid)
        for order, box, bid in holding
        if not any(
            other != order and _within(other_box, box) and (other_box != box or other > order)
            for other, other_box, _ in holding
        )
    ]
    return max(centred or innermost)[1]


def _within(inner: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    return (
        outer[0] <= inner[0]
        and outer[1] <= inner[1]
        and inner[2] <= outer[2]
        and inner[3] <= outer[3]
    )


class ElementExpert:
    """One episode of a scripted expert, its actions on elements (module docstring).

    Args:
        expert: the task's expert, reset for the episode.

    Methods:
        next_action(oracle, observation): the next action, ``oracle()`` called only when
            the expert plans.
    """

    def __init__(self, expert: MacroExpert) -> None:
        self.expert = expert
        # The plan's actions read ahead and not played yet (points: placed when played).
        self._pending: deque[Action] = deque()
        self._last_bid: str | None = None
        self._played: Action | None = None

    def next_action(
        self, oracle: Callable[[], Mapping[str, Any]], observation: Mapping[str, Any]
    ) -> Action:
        """The next action on an element, for the step that shows ``observation``
        (with :data:`ELEMENT_OBSERVATIONS`).

        Raises:
            NoElementError: a point of the plan with no element under it.
        """
        covered = _COVERED.match(observation.get("last_action_error") or "")
        played = self._played
        if covered is not None and played is not None and played.bid == covered[1]:
            self._played = dataclasses.replace(played, bid=covered[2])
            return self._played
        self._played = self._element_action(oracle, observation)
        return self._played

    def _element_action(
        self, oracle: Callable[[], Mapping[str, Any]], observation: Mapping[str, Any]
    ) -> Action:
        action = self._next_planned(oracle)
        t = action.type
        if t in _AS_IS or (t is ActionType.SCROLL and action.x is None):
            return action
        elements = observation["elements"]
        if t is ActionType.SCROLL:
            assert action.x is not None and action.y is not None
            self._pending.appendleft(dataclasses.replace(action, x=None, y=None))
            return Action(ActionType.MOUSE_MOVE, bid=element_at(elements, action.x, action.y))
        if t is ActionType.DRAG:
            assert action.x is not None and action.y is not None
            assert action.end_x is not None and action.end_y is not None
            return Action(
                ActionType.DRAG,
                bid=element_at(elements, action.x, action.y),
                end_bid=element_at(elements, action.end_x, action.end_y),
                keys=action.keys,
            )
        roles = {
            bid: entry.split(" ", 1)[0]
            for bid, entry in axtree_entries(observation["axtree"]).items()
        }
        if t in (ActionType.TYPE, ActionType.KEYS):
            bid = observation["focused"] or self._last_bid
            if bid is None:
                raise NoElementError(f"{t.value} with no element focused nor clicked before")
            if t is ActionType.KEYS:
                return dataclasses.replace(action, bid=bid)
            return _typed_into(bid, roles.get(bid, ""), action.text or "")
        if t not in _POINT_TYPES:
            raise ValueError(f"{t.value}: no element form for this action")
        assert action.x is not None and action.y is not None
        bid = element_at(elements, action.x, action.y)
        self._last_bid = bid
        if t is ActionType.LEFT_CLICK and roles.get(bid) in FIELD_ROLES:
            typed = self._typing_ahead()
            if typed is not None:
                return _typed_into(bid, roles[bid], typed)
        return Action(t, bid=bid, keys=action.keys)

    def _next_planned(self, oracle: Callable[[], Mapping[str, Any]]) -> Action:
        if self._pending:
            return self._pending.popleft()
        return self.expert.next_action(oracle() if self.expert.needs_oracle else None)

    def _typing_ahead(self) -> str | None:
        """The text the plan types next into the field just clicked (an optional
        ``ctrl+a`` before it), taken from the plan; None (the plan left as it was)
        when it does something else next."""
        read: list[Action] = []
        while (ahead := self._read_ahead()) is not None:
            read.append(ahead)
            if ahead.type is not ActionType.KEYS or ahead.keys != "ctrl+a":
                break
        if read and read[-1].type is ActionType.TYPE:
            return read[-1].text or ""
        self._pending.extendleft(reversed(read))
        return None

    def _read_ahead(self) -> Action | None:
        """The plan's next action if it is already planned (None: the expert would plan)."""
        if self._pending:
            return self._pending.popleft()
        return None if self.expert.needs_oracle else self.expert.next_action(None)


def _typed_into(bid: str, role: str, text: str) -> Action:
    if role in SELECT_ROLES:
        return Action(ActionType.SELECT_OPTION, bid=bid, text=text)
    return Action(ActionType.FILL, bid=bid, text=text)
