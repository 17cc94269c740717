"""The session protocol, both ends: what a session server and its clients agree on.

Everything that crosses the wire between :mod:`uirl_gym.session` (the server) and
:mod:`uirl_gym.client` (the env's side) or the routing proxy is named here, once:

- the routes and the headers (:class:`Route`, the ``*_HEADER`` names);
- the session: :class:`SessionInfo` (its URL and credentials) and its token;
- the screenshot formats (:class:`ImageFormat`);
- the JSON headers' codec (``X-Progress``, ``X-Dialogs``: :func:`encode_json_header`,
  :func:`decode_json_header`);
- ``GET /act``'s query <-> an :class:`~uirl_gym.actions.Action` (:func:`act_query` builds
  it, :func:`parse_act_query` reads it back, the ui-verifiers way: below).

docs/protocol.md is the user's description of the same protocol.

``GET /act``, the ui-verifiers way:

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

import enum
import json
import math
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from uirl_gym.actions import (
    ACTION_FIELDS,
    DEFAULT_ACTION_TIMEOUT_S,
    DEFAULT_SCREEN,
    ENV_ACTIONS,
    MAX_ACTION_TIMEOUT_S,
    MAX_KEYS_LENGTH,
    MAX_SCROLL_AMOUNT,
    MIN_ACTION_TIMEOUT_S,
    POINTER_ACTIONS,
    Action,
    ActionType,
)


class Route(enum.StrEnum):
    """The session server's routes (docs/protocol.md)."""

    STATUS = "/"
    HEALTH = "/health"
    RESET = "/reset"
    ACT = "/act"
    PROGRESS = "/progress"
    ORACLE = "/oracle"
    # The page as text: the accessibility tree, the DOM, the elements' boxes (issue 41).
    PAGE = "/page"
    TASK_APP = "/task/app"


class ProxyRoute(enum.StrEnum):
    """The Kubernetes routing proxy's routes: a session at ``{proxy}/proxy/{id}/...``."""

    HEALTH = "/healthz"
    SESSIONS = "/proxy"


def proxied_url(proxy_url: str, session_id: str) -> str:
    """A session's root URL through the routing proxy."""
    return f"{proxy_url.rstrip('/')}{ProxyRoute.SESSIONS}/{session_id}"


# ---- headers ------------------------------------------------------------------------------

# Sent by routers (the Kubernetes proxy) with the session id they mean; a session server
# refuses (421) a request meant for another session.
SESSION_HEADER = "X-UIRL-Session-Id"
# The session's token for its privileged routes (/reset, /oracle): created by the
# runtime, handed to the server in this environment variable (never argv, which every
# local user can read) and to the env through SessionInfo, never to the agent.
TOKEN_ENV_VAR = "UIRL_SESSION_TOKEN"
TOKEN_HEADER = "X-UIRL-Token"
# Names one action (``GET /act``): a session remembers the answers to its last few, so
# that a client whose connection broke before the answer came can send the same action
# again and get that answer, never a second click.
ACTION_ID_HEADER = "X-UIRL-Action-Id"
# On a 504 from ``GET /act``: the action ran past its deadline (the page hangs); the
# session is fine and its next reset starts a fresh page, so a client keeps it.
ACTION_TIMEOUT_HEADER = "X-UIRL-Action-Timeout"
# ``GET /act``'s answer: the task's public record after the action (one round trip), the
# screen's size, the server's own time for the action and its capture (ms), the episode.
PROGRESS_HEADER = "X-Progress"
WIDTH_HEADER = "X-Width"
HEIGHT_HEADER = "X-Height"
ACTION_MS_HEADER = "X-Action-Ms"
CAPTURE_MS_HEADER = "X-Capture-Ms"
EPISODE_HEADER = "X-Episode"
# What ``GET /act`` changed or ignored of its parameters (the ui-verifiers way, below),
# and that an answer is the replay of an action id seen before.
CLAMPED_HEADER = "X-Clamped"
IGNORED_PARAMS_HEADER = "X-Ignored-Params"
REPLAYED_HEADER = "X-Action-Replayed"
# The JavaScript dialogs the action's page opened (alert, confirm, prompt, beforeunload)
# and how the task answered them, as JSON; how many more were not listed.
DIALOGS_HEADER = "X-Dialogs"
DIALOGS_NOT_LISTED_HEADER = "X-Dialogs-Not-Listed"
# A session server's Chromium profile folder in the temp directory:
# uirl-chromium-<server pid>-*. The local runtime removes those of servers that died.
PROFILE_PREFIX = "uirl-chromium-"
# How long a session server keeps an idle keep-alive connection open; clients retire
# theirs sooner (SessionClient.max_idle_s), so that they never send on a connection the
# server is closing. LLM agents think for seconds to minutes between steps.
DEFAULT_KEEP_ALIVE_S = 75.0


# ---- the session --------------------------------------------------------------------------


def new_session_token() -> str:
    """A fresh per-session token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_from_environment() -> dict[str, str]:
    """The credentials of a session server started by hand: ``$UIRL_SESSION_TOKEN``."""
    token = os.environ.get(TOKEN_ENV_VAR)
    return {TOKEN_HEADER: token} if token else {}


@dataclass(frozen=True)
class SessionInfo:
    """A ready session server.

    Attributes:
        session_id: unique within the runtime.
        base_url: the protocol's root, e.g. ``http://127.0.0.1:41234``.
        headers: credentials every request to it carries (the session token, the
            proxy's bearer token); left out of ``repr`` so that logs never show them.
            They travel runtime -> SessionInfo -> client, never through anything the
            agent sees.
    """

    session_id: str
    base_url: str
    # A plain dict (not a read-only proxy): SessionInfo must stay picklable and copyable.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


class ImageFormat(enum.StrEnum):
    """How ``GET /act`` sends the screenshot (``format``)."""

    PNG = "png"
    JPEG = "jpeg"
    RAW = "raw"


# ---- the task record ----------------------------------------------------------------------


def encode_json_header(value: Mapping[str, Any] | list[Any]) -> str:
    """A record (``X-Progress``) or the dialogs (``X-Dialogs``) as a header value: JSON in
    ASCII (DEL, which ``json.dumps`` leaves alone and no header may hold, is escaped too:
    an agent can type it into a record, and a page can put it in a dialog)."""
    return json.dumps(value, separators=(",", ":")).replace("\x7f", "\\u007f")


def decode_json_header(name: str, value: str, expected: type[dict] | type[list]) -> Any:
    """A JSON header's value (:func:`encode_json_header`): the record (``X-Progress``, a
    dict) or the dialogs (``X-Dialogs``, a list of ``{type, message, accepted, ...}``).

    Raises:
        ValueError: not JSON, or not of the ``expected`` kind.
    """
    decoded = json.loads(value)
    if not isinstance(decoded, expected):
        raise ValueError(
            f"{name}: expected a JSON {expected.__name__}, got {type(decoded).__name__}"
        )
    return decoded


# ---- GET /act -----------------------------------------------------------------------------


def act_query(action: Action) -> dict[str, str]:
    """The ``GET /act`` query parameters for ``action`` (``None`` fields left out)."""
    query = {"action_type": action.type.value}
    for name in ACTION_FIELDS:
        value = getattr(action, name)
        if value is not None:
            query[name] = str(value.value if isinstance(value, enum.Enum) else value)
    return query


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
# Actions a session performs (``finish`` and ``send_msg_to_user`` are the env's, see
# the module docstring).
SESSION_ACTIONS = tuple(t for t in ActionType if t not in ENV_ACTIONS)
# The fields each action type reads; anything else it is given is ignored. A pointer
# action's ``keys`` are modifiers held while it acts (``shift`` for a shift+click).
FIELDS_USED: dict[ActionType, set[str]] = {
    ActionType.TYPE: {"text"},
    ActionType.KEYS: {"keys", "bid"},
    ActionType.SCROLL: {"x", "y", "direction", "amount", "keys"},
    **{t: {"x", "y", "keys", "bid"} for t in POINTER_ACTIONS if t is not ActionType.SCROLL},
    ActionType.DRAG: {"x", "y", "end_x", "end_y", "keys", "bid", "end_bid"},
    ActionType.FILL: {"bid", "text"},
    ActionType.SELECT_OPTION: {"bid", "text"},
    ActionType.FOCUS: {"bid"},
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
    for name in ("bid", "end_bid"):
        if name in used and _given(query, name):
            fields[name] = query[name]
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
    if raw in ENV_ACTIONS:
        raise ValueError(
            f"action_type: {raw!r} is not a session action: the env (UIEnv.step) answers "
            f"it and never sends it to a session; allowed here: {allowed}"
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
