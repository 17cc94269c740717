"""BrowserGym's contract on uirl's tasks: ``gym.make("browsergym/uirl.<name>")``.

:class:`BrowserGymEnv` runs a :class:`~uirl_gym.env.UIEnv` and speaks BrowserGym's
``BrowserEnv`` API (browsergym-core 0.14): observations with its keys in its formats
(``chat_messages``, ``goal_object``, ``axtree_object``, ``dom_object``,
``extra_element_properties``, ``screenshot``, ...), ``step`` taking its high-level
action strings (``click('12')``), its ``info`` keys and its chat. An agent written for
BrowserGym (AgentLab's, BrowserGym's demo agent) runs on uirl's tasks with nothing
changed but the env id; browsergym-core's renderers (``flatten_axtree_to_str``,
``flatten_dom_to_str``, ``prune_html``, ``overlay_som``) take its observations as they
are. uirl never imports browsergym: the strings are read by
:mod:`uirl_gym.action_strings` (literals only, never run) and the page objects come
from the session (``GET /page?full=1``).

What differs from BrowserGym is in docs/env.md ("The BrowserGym contract"): no 0.5 s
wait before an observation, bids computed synchronously, the page's own reward (not
BrowserGym's 0/1), MiniWoB++'s ``#query`` instruction shown on the page, one page and
no navigation or tab actions.
"""

from __future__ import annotations

import copy
import inspect
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from uirl_gym.action_strings import ActionCall, parse_calls
from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, Action, ActionType
from uirl_gym.env import UIEnv, make_env

__all__ = ["AnyDict", "BrowserGymEnv", "Chat", "Float", "Unicode", "make_browsergym_env"]

logger = logging.getLogger(__name__)

# BrowserGym's first chat message, before the goal's.
GREETING = "Hi! I am your UI assistant, I can perform web tasks for you. What can I help you with?"
CHAT_ROLES = ("user", "user_image", "assistant", "info", "infeasible")
# The longest wait noop() gives (BrowserGym's has none; a step of uirl's has a timeout).
MAX_NOOP_WAIT_S = DEFAULT_ACTION_TIMEOUT_S
# The action space's sample: a step that changes nothing and waits for nothing.
SAMPLE_ACTION = "noop(0)"
PAGE_PARTS = ("axtree", "dom", "elements")
# A UIEnv action with neither point nor element: UIEnv refuses it, paying the task's
# invalid-action charge; a string the parser refuses is charged through it.
_REFUSED = Action(ActionType.LEFT_CLICK)
_ERROR_TYPE_RE = re.compile(r"^[A-Za-z]+Error: ")


class Unicode(spaces.Space[str]):
    """Any text (BrowserGym's ``Unicode``); samples are ``sample_text``."""

    def __init__(self, sample_text: str = "", seed: Any = None) -> None:
        super().__init__(None, None, seed)
        self.sample_text = sample_text

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return self.sample_text

    def __repr__(self) -> str:
        return "Unicode()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unicode)


class Float(spaces.Space[float]):
    """A Python float (BrowserGym's ``Float``: the chat's timestamps)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, float)

    def sample(self, mask: Any = None, probability: Any = None) -> float:
        return float(self.np_random.random())

    def __repr__(self) -> str:
        return "Float()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Float)


class AnyDict(spaces.Space[dict[str, Any]]):
    """Any dict (BrowserGym's ``AnyDict``: the page objects, the goal's parts)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict)

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return "AnyDict()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyDict)


def observation_space(screen: tuple[int, int]) -> spaces.Dict:
    """BrowserGym's observation space (``BrowserEnv``'s, without raw page output), the
    screenshot a Box of the env's screen."""
    width, height = screen
    message = spaces.Dict({"role": Unicode(), "timestamp": Float(), "message": Unicode()})
    return spaces.Dict(
        {
            "chat_messages": spaces.Sequence(message),
            "goal": Unicode(),
            "goal_object": spaces.Sequence(AnyDict()),
            "open_pages_urls": spaces.Sequence(Unicode()),
            "open_pages_titles": spaces.Sequence(Unicode()),
            "active_page_index": spaces.Box(low=0, high=255, dtype=int),
            "url": Unicode(),
            "screenshot": spaces.Box(0, 255, (height, width, 3), dtype=np.uint8),
            "dom_object": AnyDict(),
            "axtree_object": AnyDict(),
            "extra_element_properties": AnyDict(),
            "focused_element_bid": Unicode(),
            "last_action": Unicode(),
            "last_action_error": Unicode(),
            "elapsed_time": spaces.Box(low=0, high=np.inf, dtype=float),
        }
    )


class Chat:
    """The episode's chat, as ``env.unwrapped.chat`` (BrowserGym's ``Chat`` without its
    browser window): ``messages`` and ``add_message``; ``info`` messages (agent loops
    post their thoughts) are not kept, as BrowserGym's are only displayed."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def add_message(self, role: str, msg: str) -> None:
        """Add a message from ``role`` (``ValueError``: not one of :data:`CHAT_ROLES`)."""
        if role not in CHAT_ROLES:
            raise ValueError(f"Invalid role: {role}; allowed: {', '.join(CHAT_ROLES)}")
        if role != "info":
            self.messages.append({"role": role, "timestamp": time.time(), "message": msg})


class BrowserGymEnv(gym.Env[dict[str, Any], str]):
    """A uirl task behind BrowserGym's ``BrowserEnv`` API.

    Attributes:
        env: the :class:`UIEnv` that runs the task.
        chat: the episode's :class:`Chat` (greeting, goal, the agent's messages).
        strict, multiaction, allowed: how action strings are read (see ``__init__``).
        goal_object: the episode's goal, OpenAI-style parts.
        last_action, last_action_error: the last string and why it failed (``""``).

    Methods:
        reset(seed=None, options=None): ``UIEnv.reset``; info ``{"task_info": ...}``
            (UIEnv's reset info).
        step(action): run the action string; info has BrowserGym's timing keys and
            ``task_info`` (UIEnv's step info).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        env: UIEnv,
        *,
        action_mapping: Callable[[str], str] | None = None,
        terminate_on_infeasible: bool = True,
    ) -> None:
        """Args:
        env: the UIEnv to run (this env closes it).
        action_mapping: BrowserGym's action set, as ``HighLevelActionSet(...).to_python_code``:
            its ``strict``, ``multiaction`` and actions are honoured, and its code is
            never run. None: uirl's reading, strict, one call per step, every action
            uirl takes.
        terminate_on_infeasible: ``report_infeasible`` ends the episode (BrowserGym's).

        Raises:
            ValueError: an ``action_mapping`` that is not a ``to_python_code`` method.
        """
        self.env = env
        self.render_mode = env.render_mode
        self.strict, self.multiaction, self.allowed = _action_set(action_mapping)
        self.terminate_on_infeasible = terminate_on_infeasible
        self.observation_space = observation_space(env.screen)
        self.action_space = Unicode(SAMPLE_ACTION)
        self.chat = Chat()
        self.goal_object: list[dict[str, Any]] = []
        self.last_action = ""
        self.last_action_error = ""
        self._screenshot: np.ndarray | None = None
        self._page: dict[str, Any] = {}
        self._start_time = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options=options)
        self._screenshot = obs["screenshot"]
        self.goal_object = [{"type": "text", "text": obs["instruction"]}]
        self.chat = Chat()
        self.chat.add_message("assistant", GREETING)
        self.chat.add_message("user", obs["instruction"])
        self.last_action = ""
        self.last_action_error = ""
        self._page = self.env.page(PAGE_PARTS, full=True)
        self._start_time = time.time()
        return self._observation(), {"task_info": info}

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Run an action string: its calls in order, until one fails or ends the episode.

        A string the parser refuses costs what a refused action costs in uirl (UIEnv's
        ``invalid_action``), the page untouched; a call the page cannot take stops the
        calls after it; either way ``last_action_error`` says why and the episode goes on.
        """
        self.last_action = action if isinstance(action, str) else repr(action)
        info: dict[str, Any] = {"action_exec_start": time.time(), "action_exec_timeout": 0.0}
        try:
            calls = parse_calls(
                action, strict=self.strict, multiaction=self.multiaction, allowed=self.allowed
            )
            actions = [(call, call.to_action(self.env.screen)) for call in calls]
        except ValueError as exc:
            self.last_action_error = f"ValueError: {exc}"
            obs, reward, terminated, truncated, task_info = self.env.step(_REFUSED)
            task_info["invalid_action"] = self.last_action_error
            return self._finish_step(info, obs, reward, terminated, truncated, task_info)
        self.last_action_error = ""
        reward = 0.0
        for call, uirl_action in actions:
            obs, paid, terminated, truncated, task_info = self._run(call, uirl_action)
            reward += paid
            if "invalid_action" in task_info:
                self.last_action_error = _error_text(task_info["invalid_action"])
            if "error" in task_info and truncated:
                self.last_action_error = str(task_info["error"])
                if "ActionTimeoutError" in self.last_action_error:
                    info["action_exec_timeout"] = self.env.step_timeout_s
            if terminated or truncated or self.last_action_error:
                break
        return self._finish_step(info, obs, reward, terminated, truncated, task_info)

    def _run(self, call: ActionCall, action: Action) -> tuple[Any, float, bool, bool, dict]:
        """One call: the chat's part here, the page's in UIEnv."""
        if call.name == "report_infeasible":
            self.chat.add_message("infeasible", call.arguments()["reason"])
            if not self.terminate_on_infeasible:
                action = Action(ActionType.SCREENSHOT)
        elif call.name == "send_msg_to_user":
            self.chat.add_message("assistant", call.arguments()["text"])
            # UIEnv takes no answers yet: the message stays in the chat.
            action = Action(ActionType.SCREENSHOT)
        elif call.name == "noop":
            wait_s = min(max(float(call.arguments()["wait_ms"]), 0.0) / 1000, MAX_NOOP_WAIT_S)
            if wait_s:
                time.sleep(wait_s)  # the agent asked to let the page's time pass
        return self.env.step(action)

    def _finish_step(
        self,
        info: dict[str, Any],
        obs: Mapping[str, Any],
        reward: float,
        terminated: bool,
        truncated: bool,
        task_info: dict[str, Any],
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        done = time.time()
        info |= {
            "action_exec_stop": done,
            # No wait for the page (the session settles it as it acts), and the reward
            # came with the action's answer.
            "wait_for_page_loading_start": done,
            "wait_for_page_loading_stop": done,
            "validation_start": done,
            "validation_stop": done,
            "get_observation_start": done,
            "task_info": task_info,
        }
        self._screenshot = obs["screenshot"]
        if not truncated:  # a session that failed or hangs answers nothing more
            self._page = self.env.page(PAGE_PARTS, full=True)
        info["get_observation_stop"] = time.time()
        return self._observation(), float(reward), terminated, truncated, info

    def _observation(self) -> dict[str, Any]:
        page = self._page
        urls = tuple(page["open_pages_urls"])
        return {
            "chat_messages": tuple(copy.deepcopy(self.chat.messages)),
            "goal": "\n".join(p["text"] for p in self.goal_object if p["type"] == "text"),
            "goal_object": tuple(copy.deepcopy(self.goal_object)),
            "open_pages_urls": urls,
            "open_pages_titles": tuple(page["open_pages_titles"]),
            "active_page_index": np.asarray(
                [urls.index(page["url"]) if page["url"] in urls else 0]
            ),
            "url": page["url"],
            "screenshot": self._screenshot,
            "dom_object": page["dom"],
            "axtree_object": page["axtree"],
            "extra_element_properties": page["elements"],
            "focused_element_bid": page["focused_element_bid"] or "",
            "last_action": self.last_action,
            "last_action_error": self.last_action_error,
            "elapsed_time": np.asarray([time.time() - self._start_time]),
        }

    def render(self) -> np.ndarray | None:
        return self._screenshot if self.render_mode == "rgb_array" else None

    def close(self) -> None:
        self.env.close()
        super().close()


def _error_text(message: str) -> str:
    """A refusal as BrowserGym writes an action's error: ``"<Type>: <message>"``."""
    return message if _ERROR_TYPE_RE.match(message) else f"ValueError: {message}"


def _action_set(
    action_mapping: Callable[[str], str] | None,
) -> tuple[bool, bool, list[str] | None]:
    """``(strict, multiaction, allowed names)`` of BrowserGym's action set whose
    ``to_python_code`` is ``action_mapping`` (None: uirl's reading, every action)."""
    if action_mapping is None:
        return True, False, None
    owner = getattr(action_mapping, "__self__", None)
    if not inspect.ismethod(action_mapping) or action_mapping.__name__ != "to_python_code":
        raise ValueError(
            "action_mapping: uirl reads BrowserGym's action strings itself and never runs "
            "code; pass a HighLevelActionSet's to_python_code (its strict, multiaction and "
            f"actions are honoured) or None, got {action_mapping!r}"
        )
    # BrowserGym's HighLevelActionSet, read by its attributes (uirl does not import it).
    strict = bool(getattr(owner, "strict", False))
    multiaction = bool(getattr(owner, "multiaction", True))
    allowed = list(getattr(owner, "action_set", {}))
    return strict, multiaction, allowed


# BrowserGym's BrowserEnv arguments uirl takes: ignored (they change nothing a uirl
# session does), refused unless they have their default (the value that works here).
_IGNORED = ("headless", "slow_mo", "timeout", "pre_observation_delay", "resizeable_window",
            "tags_to_mark")  # fmt: skip
_DEFAULTS_ONLY: dict[str, tuple[Any, str]] = {
    "use_raw_page_output": (False, "uirl gives no Playwright page: its observations are the page"),
    "wait_for_user_message": (False, "uirl's chat has no user to wait for"),
    "record_video_dir": (None, "uirl records no videos (uirl_agents' recorder records episodes)"),
    "locale": (None, "a uirl task's page has its own locale"),
    "timezone_id": (None, "a uirl task's page has its own time zone"),
    "pw_chromium_kwargs": ({}, "uirl's session starts Chromium itself"),
    "pw_context_kwargs": ({}, "uirl's session starts Chromium itself"),
}


def make_browsergym_env(**kwargs: Any) -> BrowserGymEnv:
    """The entry point of the ``browsergym/uirl.<name>`` ids: BrowserGym's ``BrowserEnv``
    arguments (what ``gym.make`` gets from BrowserGym's and AgentLab's loops), the
    rest ``UIEnv``'s (``uirl_gym.env.make_env``).

    ``action_mapping`` and ``terminate_on_infeasible`` are honoured; ``task_kwargs``
    become UIEnv's ``default_options`` (reset options); ``viewport`` must be the env's
    screen (``screen_size`` sets it); ``headless``, ``slow_mo``, ``timeout``,
    ``pre_observation_delay``, ``resizeable_window``, ``tags_to_mark`` are taken and
    change nothing; the others are refused unless at their default.

    Raises:
        ValueError: a BrowserGym argument uirl cannot honour (the message says why).
        TypeError: an argument neither BrowserGym's nor UIEnv's.
    """
    bg = {name: kwargs.pop(name) for name in (*_IGNORED, *_DEFAULTS_ONLY) if name in kwargs}
    for name, (default, why) in _DEFAULTS_ONLY.items():
        if name in bg and bg[name] not in (default, None):
            raise ValueError(f"{name}={bg[name]!r}: not supported, {why}")
    action_mapping = kwargs.pop("action_mapping", None)
    terminate_on_infeasible = kwargs.pop("terminate_on_infeasible", True)
    viewport = kwargs.pop("viewport", None)
    task_kwargs = kwargs.pop("task_kwargs", None)
    if task_kwargs:
        kwargs["default_options"] = {**task_kwargs, **kwargs.get("default_options", {})}
    env = make_env(**kwargs)
    try:
        if viewport is not None and (viewport.get("width"), viewport.get("height")) != env.screen:
            raise ValueError(
                f"viewport={viewport!r}: the task's screen is {env.screen[0]}x{env.screen[1]}; "
                "to change it, make the env with screen_size=(width, height)"
            )
        return BrowserGymEnv(
            env, action_mapping=action_mapping, terminate_on_infeasible=terminate_on_infeasible
        )
    except BaseException:
        env.close()
        raise
