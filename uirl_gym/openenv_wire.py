"""The OpenEnv wire types: the action, observation and state the server and client share.

They are OpenEnv's Pydantic models (``extra="forbid"``), so ``/schema`` publishes them
and the server refuses a message of the wrong shape before it reaches a session.

The split of the checks: Pydantic checks the *shape* (an object with ``action_type``
and no field the action does not have); a message of the wrong shape comes back as an
OpenEnv error frame (``VALIDATION_ERROR``) and nothing is stepped. The values are the
env's check, one validation for ``gym.make`` and OpenEnv
(:meth:`uirl_gym.actions.Action.validate`): an unknown action type, ``x: "10"`` or
``x: true``, a click without ``x``, ``x`` off the 1280x800 screen, an unknown key name,
text with a lone surrogate. The step counts, pays the task's invalid-action penalty,
and the observation's ``error`` says what was wrong. Either way the session goes on.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from uirl_gym.action_strings import parse_action

DEFAULT_TASK = "uirl/SimpleDataEntry-v0"
# The error of a call on a session the server closed (idle too long); clients that see
# it open a new WebSocket session.
SESSION_CLOSED = "this session was closed (idle too long?): open a new WebSocket session"

# Every action type of the env (``uirl_gym.actions.ActionType``), spelled out for the
# schema; tests/test_openenv.py checks that the two lists agree.
ActionTypeName = Literal[
    "screenshot",
    "mouse_move",
    "left_click",
    "right_click",
    "double_click",
    "triple_click",
    "type",
    "keys",
    "scroll",
    "finish",
    "drag",
    "fill",
    "select_option",
    "focus",
    "send_msg_to_user",
]
ACTION_TYPE_NAMES: tuple[str, ...] = get_args(ActionTypeName)


def _or_null(schema: dict[str, Any]) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [schema, {"type": "null"}]})


# Fields the wire takes as any JSON value, published with their schema: whether the value
# fits is the env's check (see the module docstring).
WireInt = Annotated[Any, _or_null({"type": "integer"})]
WireText = Annotated[Any, _or_null({"type": "string"})]
WireActionType = Annotated[Any, _or_null({"enum": list(ACTION_TYPE_NAMES)})]
WireDirection = Annotated[Any, _or_null({"enum": ["up", "down", "left", "right"]})]


class UirlAction(Action):
    """One action in screen pixels (the 1280x800 screen), as ``uirl_gym.actions.Action``.

    ``left_click``/``right_click``/``double_click``/``triple_click``/``mouse_move`` need
    ``x``, ``y``; ``type`` needs ``text``; ``keys`` needs ``keys`` (``ctrl+c``, ``Enter``);
    ``scroll`` needs ``direction`` (``amount`` notches, default 3; at ``x``, ``y`` when
    given); ``drag`` presses at ``x``, ``y`` and releases at ``end_x``, ``end_y``;
    ``finish`` declares the task done (ends the episode); ``screenshot`` only looks.
    On an element (``bid``, from the text observations): clicks, ``mouse_move``,
    ``drag`` (``end_bid``), ``keys``; ``fill`` (``text``), ``select_option`` (``text``:
    the option), ``focus``.

    The fields take any JSON value: ``UIEnv`` checks them (``x: "10"`` or ``x: true`` is
    an invalid action there and here alike), so the schema below says what is valid.
    """

    action_type: WireActionType = Field(
        default=None, description="What to do (uirl_gym.actions.ActionType)."
    )
    action_str: WireText = Field(
        default=None,
        description="In place of the fields: one BrowserGym action string, e.g. "
        "\"click('12')\" or \"fill('5', 'Ann')\" (as OpenEnv's BrowserGym env takes it).",
    )
    x: WireInt = Field(default=None, description="Pointer x, screen pixels 0..1279.")
    y: WireInt = Field(default=None, description="Pointer y, screen pixels 0..799.")
    text: WireText = Field(default=None, description="What `type` types.")
    keys: WireText = Field(
        default=None, description="The combination `keys` presses, e.g. 'ctrl+c', 'Enter'."
    )
    direction: WireDirection = Field(default=None, description="Where `scroll` scrolls.")
    amount: WireInt = Field(
        default=None, description="Wheel notches `scroll` turns (100 px each), 1..50."
    )
    end_x: WireInt = Field(default=None, description="Where `drag` releases, x.")
    end_y: WireInt = Field(default=None, description="Where `drag` releases, y.")
    bid: WireText = Field(
        default=None,
        description="The element to act on in place of x, y (its bid in the `axtree` "
        "observation); needed by `fill`, `select_option`, `focus`.",
    )
    end_bid: WireText = Field(default=None, description="The element `drag` releases on.")

    @model_validator(mode="after")
    def _one_form(self) -> UirlAction:
        # The shape's check: an action names its type or is an action string (which
        # values fit is the env's check, as for every field).
        if self.action_type is None and self.action_str is None:
            # (a PydanticCustomError: OpenEnv's error frame cannot carry a ValueError's ctx)
            raise PydanticCustomError(
                "missing_action", "an action needs action_type (and its fields) or action_str"
            )
        return self

    def to_env_action(self) -> dict[str, Any]:
        """The action as ``UIEnv.step`` takes it (``None`` fields left out; unvalidated).

        Raises:
            ValueError: an ``action_str`` that is not one known action call, or both an
                ``action_str`` and ``action_type``.
        """
        if self.action_str is not None:
            if self.action_type is not None:
                raise ValueError("give action_type (and its fields) or action_str, not both")
            if not isinstance(self.action_str, str):
                raise ValueError(f"action_str: expected a string, got {self.action_str!r}")
            return parse_action(self.action_str).to_dict()
        fields = self.model_dump(
            exclude={"metadata", "action_type", "action_str"}, exclude_none=True
        )
        return {"type": self.action_type, **fields}


class UirlObservation(Observation):
    """What a reset or step returns.

    ``reward`` and ``done`` are OpenEnv's (``done`` = ``terminated or truncated``);
    ``metadata`` is the env's ``info`` dict (``is_success``, the task's counts,
    ``progress``, ``task``, ``task_seed``, ``invalid_action`` or ``error``), JSON-ready.
    """

    screenshot: str = Field(
        default="", description="The screen after the action: a base64 PNG, 1280x800 RGB."
    )
    instruction: str = Field(default="", description="The episode's instruction.")
    task: str = Field(default="", description="The episode's Gymnasium id, e.g. uirl/FormFill-v0.")
    is_success: bool = Field(
        default=False, description="The task is solved (so far) with no mistake."
    )
    terminated: bool = Field(default=False, description="The episode ended (task done or finish).")
    truncated: bool = Field(
        default=False, description="The episode was cut: the step budget or a session failure."
    )
    error: str | None = Field(
        default=None,
        description="Why the action was refused (it still counted as a step), or why the "
        "session failed; None when all went well.",
    )
    # The text observations the reset asked for (``observations``; docs/env.md), empty
    # when not asked for.
    axtree: str = Field(default="", description="The accessibility tree as text, with bids.")
    html: str = Field(default="", description="The page as pruned HTML, with bids.")
    elements: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each rendered element: bid, bbox [x, y, w, h] (screen px), "
        "visibility 0..1, clickable 0|1, set_of_marks 0|1.",
    )
    som: str = Field(default="", description="The set-of-marks screenshot: a base64 PNG.")
    focused: str = Field(default="", description="The focused element's bid.")
    url: str = Field(default="", description="The page's URL.")
    last_action_error: str = Field(default="", description="Why the last action was refused.")


# The observations that travel as text (the set-of-marks screenshot travels as a PNG).
TEXT_FIELDS = ("axtree", "html", "focused", "url", "last_action_error")


class UirlState(State):
    """The session's episode: ``episode_id`` and ``step_count`` (OpenEnv's), and ours."""

    task: str | None = Field(default=None, description="The episode's Gymnasium id.")
    seed: int | None = Field(default=None, description="The seed the reset was given.")
    task_seed: int | None = Field(default=None, description="The task instance's seed.")
    episode_return: float = Field(default=0.0, description="The rewards summed so far.")
    is_success: bool = Field(default=False, description="The last step's is_success.")
    done: bool = Field(default=False, description="The episode has ended.")
