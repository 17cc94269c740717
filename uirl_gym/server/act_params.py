"""``GET /act`` query parameters -> an action, the ui-verifiers way.

The session server is a superset of the ui-verifiers server, whose ``/act`` passes its
parameters to pyautogui. So a request that server accepts is accepted here too, with
the same effect:

- coordinates off the screen are clamped to its edge (as X clamps the pointer), and so
  are ``delay``, ``amount`` and ``quality`` out of range; the answer's ``X-Clamped``
  header says what was changed (``x=1500->1279``);
- parameters the server does not know, or that the action does not use (``x`` on a
  ``type``), are ignored and named in the ``X-Ignored-Params`` header;
- ``direction`` is case-insensitive, ``type`` with empty text types nothing.

What neither server could do stays a 400: non-numeric numbers, unknown action types,
keys that are no key name. ``finish`` is refused: it ends an episode in the env
(``UIEnv.step``) and means nothing to a session.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from uirl_gym.actions import (
    ACTION_FIELDS,
    DEFAULT_ACTION_TIMEOUT_S,
    DEFAULT_SCREEN,
    MAX_ACTION_TIMEOUT_S,
    MAX_KEYS_LENGTH,
    MAX_SCROLL_AMOUNT,
    MIN_ACTION_TIMEOUT_S,
    POINTER_ACTIONS,
    Action,
    ActionType,
)
from uirl_gym.server.chromium import ImageFormat

ACT_PARAMS: tuple[str, ...] = ("action_type", *ACTION_FIELDS, "delay")
ACT_PARAMS += ("format", "quality", "timeout")
MAX_DELAY_S = 10.0
# Longer than the action space's 512: upstream types whatever fits in a URL. Bounded so
# that one request cannot hold the session for minutes (~2-5 ms per character).
MAX_TYPED_TEXT = 8192
# The longest query string GET /act needs: the longest text and keys with every character
# percent-encoded UTF-8 (up to 12 bytes: "%F0%9F%98%80"), and 4 KiB for the other
# parameters, whose values are short. The routing proxy's and the servers' limits on a
# request derive from it (guards.MAX_TARGET_BYTES), so that none refuses what this allows.
MAX_ACT_QUERY_BYTES = (MAX_TYPED_TEXT + MAX_KEYS_LENGTH) * 12 + 4096
# An integer parameter: every one is clamped into its range, so negatives are fine.
_INTEGER = re.compile(r"-?[0-9]+")
# Actions a session performs (``finish`` is the env's, see the module docstring).
SESSION_ACTIONS = tuple(t for t in ActionType if t is not ActionType.FINISH)
# The fields each action type reads; anything else it is given is ignored. A pointer
# action's ``keys`` are modifiers held while it acts (``shift`` for a shift+click).
FIELDS_USED: dict[ActionType, set[str]] = {
    ActionType.TYPE: {"text"},
    ActionType.KEYS: {"keys"},
    ActionType.SCROLL: {"x", "y", "direction", "amount", "keys"},
    **{t: {"x", "y", "keys"} for t in POINTER_ACTIONS if t is not ActionType.SCROLL},
    ActionType.DRAG: {"x", "y", "end_x", "end_y", "keys"},
}


@dataclass
class ActRequest:
    """One parsed ``GET /act``.

    Attributes:
        action: the validated action (coordinates on the screen).
        delay_s, image_format, jpeg_quality: how to take the screenshot.
        timeout_s: how long the action and its capture may take (``timeout``; the
            server's default when not given).
        clamped: ``name=given->used`` for each value moved into range.
        ignored: parameters that had no effect.
    """

    action: Action
    delay_s: float = 0.0
    image_format: ImageFormat = ImageFormat.PNG
    jpeg_quality: int = 90
    timeout_s: float = DEFAULT_ACTION_TIMEOUT_S
    clamped: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def parse_act_query(
    query: Mapping[str, str],
    screen: tuple[int, int] = DEFAULT_SCREEN,
    default_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S,
) -> ActRequest:
    """Parse and validate ``GET /act`` parameters (see the module docstring) for a
    ``screen`` (width, height) screen; ``timeout`` defaults to ``default_timeout_s``.

    Raises:
        ValueError: naming the parameter and what is allowed.
    """
    clamped: list[str] = []
    ignored = sorted(set(query) - set(ACT_PARAMS))
    action_type = _action_type(query.get("action_type"))
    used = FIELDS_USED.get(action_type, set())
    ignored += [name for name in ACTION_FIELDS if name in query and name not in used]
    fields: dict[str, Any] = {"type": action_type}
    has_x, has_y = _given(query, "x"), _given(query, "y")
    if action_type is ActionType.SCROLL and has_x != has_y:
        # Upstream moves the pointer only when both are given.
        ignored.append("x" if has_x else "y")
    elif "x" in used and (has_x or has_y):
        for name, size in (("x", screen[0]), ("y", screen[1])):
            if not _given(query, name):
                continue  # Action.validate names the missing one
            fields[name] = _clamp(name, _int(query, name), 0, size - 1, clamped)
    if action_type is ActionType.DRAG:
        for name, size in (("end_x", screen[0]), ("end_y", screen[1])):
            if _given(query, name):  # Action.validate names a missing one
                fields[name] = _clamp(name, _int(query, name), 0, size - 1, clamped)
    if "text" in used and query.get("text") is not None:
        fields["text"] = query["text"]
    if "keys" in used and query.get("keys") is not None:
        fields["keys"] = query["keys"]
    if "direction" in used and query.get("direction") is not None:
        fields["direction"] = query["direction"]
    if "amount" in used and _given(query, "amount"):
        fields["amount"] = _clamp("amount", _int(query, "amount"), 1, MAX_SCROLL_AMOUNT, clamped)
    action = Action(**fields).validate(max_text_length=MAX_TYPED_TEXT, screen=screen)
    delay = _float(query, "delay", 0.0)
    quality = _int(query, "quality") if _given(query, "quality") else 90
    try:
        image_format = ImageFormat(query.get("format") or "png")
    except ValueError:
        allowed = ", ".join(f.value for f in ImageFormat)
        raise ValueError(f"format: must be one of {allowed}, got {query['format']!r}") from None
    timeout = _float(query, "timeout", default_timeout_s)
    return ActRequest(
        action=action,
        delay_s=_clamp("delay", delay, 0.0, MAX_DELAY_S, clamped),
        image_format=image_format,
        jpeg_quality=_clamp("quality", quality, 1, 100, clamped),
        timeout_s=_clamp("timeout", timeout, MIN_ACTION_TIMEOUT_S, MAX_ACTION_TIMEOUT_S, clamped),
        clamped=clamped,
        ignored=sorted(set(ignored)),
    )


def _action_type(raw: str | None) -> ActionType:
    allowed = ", ".join(t.value for t in SESSION_ACTIONS)
    if raw is None or raw == "":
        raise ValueError(f"action_type: missing; allowed: {allowed}")
    if raw == ActionType.FINISH.value:
        raise ValueError(
            "action_type: 'finish' is not a session action: it ends an episode in the env "
            f"(UIEnv.step) and is never sent to a session; allowed here: {allowed}"
        )
    try:
        return ActionType(raw)
    except ValueError:
        raise ValueError(f"action_type: unknown {raw!r}; allowed: {allowed}") from None


def _given(query: Mapping[str, str], name: str) -> bool:
    return query.get(name) not in (None, "")


def _int(query: Mapping[str, str], name: str) -> int:
    # ASCII digits only: Python's int() also takes " 5", "+5", "5_0" and other scripts'
    # digits ("٣"), which no client means as a coordinate.
    raw = query[name]
    if not _INTEGER.fullmatch(raw):
        raise ValueError(
            f"{name}: must be an integer (ASCII digits, an optional leading '-'), got {raw[:40]!r}"
        )
    return int(raw)


def _float(query: Mapping[str, str], name: str, default: float) -> float:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    # ASCII and nothing around it, as an integer (float() takes " 5" and "٣" too).
    if not raw.isascii() or raw != raw.strip():
        raise ValueError(f"{name}: must be a number, got {raw[:40]!r}")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}: must be a number, got {raw[:40]!r}") from None
    if math.isnan(value):
        raise ValueError(f"{name}: must be a number, got {raw[:40]!r}")
    return value


N = TypeVar("N", int, float)


def _clamp(name: str, value: N, low: N, high: N, notes: list[str]) -> N:
    used = min(max(value, low), high)
    if used != value:
        notes.append(f"{name}={_short(value)}->{_short(used)}")
    return used


def _short(value: float) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else text[:12] + "..." + text[-8:]
