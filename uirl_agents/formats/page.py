"""Formats for models that read the page and act on its elements by id: ``axtree``, ``som``.

Both answer with a thought, then one of BrowserGym's action strings, parsed (never run)
by :func:`uirl_gym.action_strings.parse_action`; the action set is BrowserGym's ``chat``
and ``bid`` subsets (``click('12')``, ``fill('21', "Ann")``, ``select_option('16',
"Iran")``, ``press('21', 'Enter')``, ``hover('8')``, ``scroll(0, 300)``,
``drag_and_drop('5', '9')``, ``send_msg_to_user("...")``, ``noop()``)::

    Thought: The username field is empty.
    Action: fill('21', "juan")

The ``Action:`` line may be left out (the reply's last line is then the action), and a
markdown fence or backticks around the call are dropped.

- ``axtree``: a text-only model (any chat LLM, a causal LM with a chat template). Each
  step shows the page's accessibility tree (the env's ``axtree`` observation: one line
  an element, its bid in brackets) and, after an action that failed, why; no image.
  Every message's content is a plain string, as text-only chat templates expect.
- ``som``: a vision model prompted with set-of-marks. Each step shows the marked
  screenshot (the env's ``som`` observation: numbered boxes over the elements one can
  act on) and the list of those elements, ``[bid] role 'name'`` (from the AXTree).

:func:`action_string` writes an action as the call that parses back to it, so the
scripted experts' episodes (by element: ``expert-elements``) are demonstrations in
these formats.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from uirl_gym.action_strings import describe_actions, parse_action, subset_actions
from uirl_gym.actions import (
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    Action,
    ActionType,
    held_modifiers,
    parse_keys,
)

from .base import (
    IMAGE_PLACEHOLDER,
    FormatParseError,
    Message,
    ModelFormat,
    ScreenGeometry,
    StepView,
    split_at_action_line,
    text_part,
)

# The BrowserGym action subsets both formats offer: answer the user, act on elements.
ACTION_SUBSETS = ("chat", "bid")
ALLOWED_ACTIONS = tuple(subset_actions(ACTION_SUBSETS))

_AXTREE_LINE = re.compile(r"^\t*\[([A-Za-z0-9]+)\] (.*)$", re.MULTILINE)
_FENCE = re.compile(r"^[ \t]*```[A-Za-z]*[ \t]*$", re.MULTILINE)

_PROMPT = """\
You operate a web page for a user. Each turn you see the page {seen}; decide the \
single next action.

## Reply format
Thought: a short plan for the next action
Action: one action from the list below, e.g. click('12')

## Actions
{actions}
## Notes
- Actions name an element by its bid, the id in brackets before it{where}.
- One action per reply; you see the page again after it.

## Task
{instruction}
"""

# Clicks on an element: BrowserGym's call and its arguments after the bid.
_CLICK_CALLS = {
    ActionType.LEFT_CLICK: ("click", ""),
    ActionType.RIGHT_CLICK: ("click", ", button='right'"),
    ActionType.DOUBLE_CLICK: ("dblclick", ""),
}
_SCROLL_DELTAS = {"down": (0, 1), "up": (0, -1), "right": (1, 0), "left": (-1, 0)}


def axtree_entries(axtree: str) -> dict[str, str]:
    """Each element of an ``axtree`` observation: bid -> the rest of its line
    (``textbox 'Name', focused``).

    >>> axtree_entries("RootWebArea 'Login'\\n\\t[21] textbox 'Name', focused\\n\\t[25] button 'Go'")
    {'21': "textbox 'Name', focused", '25': "button 'Go'"}
    """
    return {m[1]: m[2] for m in _AXTREE_LINE.finditer(axtree)}


def action_string(action: Action) -> str:
    """The BrowserGym call that parses back to ``action`` (an action on an element by
    its bid, a scroll at the pointer, a message to the user, ``noop``).

    >>> action_string(Action(ActionType.FILL, bid="21", text="Ann"))
    "fill('21', 'Ann')"
    >>> action_string(Action(ActionType.KEYS, bid="21", keys="ctrl+a"))
    "press('21', 'Control+a')"

    Raises:
        ValueError: an action these formats cannot express (a point without an
            element, a triple click, ``finish``).
    """
    t, bid = action.type, action.bid
    if t is ActionType.SCREENSHOT:
        return "noop()"
    if t is ActionType.SEND_MSG_TO_USER:
        return f"send_msg_to_user({action.text or ''!r})"
    if t is ActionType.SCROLL and action.x is None:
        dx, dy = _SCROLL_DELTAS[action.scroll_direction.value]
        pixels = action.scroll_amount * 100
        return f"scroll({dx * pixels}, {dy * pixels})"
    if bid is None or (t is ActionType.DRAG and action.end_bid is None):
        raise ValueError(
            f"{action.type.value}: these formats act on elements by bid; the action has "
            "a point instead"
        )
    if t is ActionType.KEYS:
        return f"press({bid!r}, {parse_keys(action.keys or '')!r})"
    held = action.keys and t in _CLICK_CALLS
    modifiers = f", modifiers={held_modifiers(action.keys or '')!r}" if held else ""
    calls = {
        **{
            kind: f"{name}({bid!r}{args}{modifiers})" for kind, (name, args) in _CLICK_CALLS.items()
        },
        ActionType.MOUSE_MOVE: f"hover({bid!r})",
        ActionType.DRAG: f"drag_and_drop({bid!r}, {action.end_bid!r})",
        ActionType.FILL: f"fill({bid!r}, {action.text or ''!r})",
        ActionType.SELECT_OPTION: f"select_option({bid!r}, {action.text or ''!r})",
        ActionType.FOCUS: f"focus({bid!r})",
    }
    if t not in calls or (action.keys and not held):
        raise ValueError(f"{t.value}: BrowserGym's action set has no such action on an element")
    return calls[t]


class _PageFormat(ModelFormat):
    """The prompt, the reply's syntax and its parsing; subclasses say what a step shows."""

    seen: ClassVar[str]
    where: ClassVar[str] = ""

    def system_prompt(self, geometry: ScreenGeometry) -> str:
        return "You are a helpful assistant."

    def task_prompt(self, instruction: str, geometry: ScreenGeometry) -> str:
        return _PROMPT.format(
            seen=self.seen,
            actions=describe_actions(ACTION_SUBSETS),
            where=self.where,
            instruction=instruction,
        )

    def split_thought(self, text: str) -> tuple[str, str]:
        text = _FENCE.sub("", text)
        thought, action = split_at_action_line(text)
        if action is None:  # no "Action:" line: the last line is the action
            lines = [line for line in text.strip().splitlines() if line.strip()]
            thought = "\n".join(lines[:-1]).strip()
            action = lines[-1] if lines else ""
        return thought, action.strip().strip("`").strip()

    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        if not action_text:
            raise FormatParseError("no action: expected a line 'Action: click('12')'")
        try:
            action = parse_action(
                action_text,
                allowed=ALLOWED_ACTIONS,
                screen=(geometry.screen_width, geometry.screen_height),
            )
        except ValueError as exc:
            raise FormatParseError(str(exc)) from None
        return action, ()

    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        return f"Thought: {thought}\nAction: {action_string(action)}"

    @staticmethod
    def _error(observation: Mapping[str, Any]) -> str:
        error = observation.get("last_action_error") or ""
        return f"\n\n## The last action failed\n{error}" if error else ""


class AXTreeFormat(_PageFormat):
    """The page's accessibility tree as text, no image (see the module docstring)."""

    name = "axtree"
    mode = "axtree"
    observations = ("axtree", "last_action_error")
    seen = "as its accessibility tree"

    def geometry(
        self, screen_width: int = SCREEN_WIDTH, screen_height: int = SCREEN_HEIGHT
    ) -> ScreenGeometry:
        # No image: any point is the screen's own.
        return ScreenGeometry(screen_width, screen_height, screen_width, screen_height)

    def view(self, observation: Mapping[str, Any]) -> StepView:
        return StepView(None, f"## Page\n{observation['axtree']}" + self._error(observation))

    def step_parts(self, page: str) -> list[dict[str, str]]:
        return [text_part(page)]

    def build_messages(
        self,
        instruction: str,
        history: Sequence[str],
        num_images: int,
        geometry: ScreenGeometry,
        pages: Sequence[str] = (),
    ) -> list[Message]:
        """The layout of every format, each message's parts joined into one string."""
        messages = super().build_messages(instruction, history, num_images, geometry, pages)
        return [
            {**m, "content": "\n\n".join(part["text"] for part in m["content"])}
            if isinstance(m["content"], list)
            else m
            for m in messages
        ]


class SetOfMarksFormat(_PageFormat):
    """The set-of-marks screenshot and its elements' list (see the module docstring)."""

    name = "som"
    mode = "som"
    observations = ("som", "elements", "axtree", "last_action_error")
    seen = "as a screenshot with a numbered box over each element, and the list of them"
    where = " in the list and on its box"

    def view(self, observation: Mapping[str, Any]) -> StepView:
        entries = axtree_entries(observation["axtree"])
        marked = [
            f"[{e['bid']}] {entries.get(e['bid'], 'element')}"
            for e in observation["elements"]
            if e["set_of_marks"]
        ]
        text = "## Elements\n" + ("\n".join(marked) or "(none marked)")
        return StepView(self.prepare_image(observation["som"]), text + self._error(observation))

    def step_parts(self, page: str) -> list[dict[str, str]]:
        return [dict(IMAGE_PLACEHOLDER), text_part(page)]
