"""UIEnv: a computer-use task as a Gymnasium env, on a session from a runtime.

The reward comes from the task's own record (``/progress``), never from pixels, and
the task's scorer turns it into rewards and success (``uirl_gym.tasks``): the env holds
no task-specific rule. The
session is kept across episodes (an in-session reset takes well under a second) and
replaced only when it fails: a failure mid-episode ends that episode truncated with
``info["error"]``; the next ``reset`` brings up a healthy session.

Lifecycle: ``step`` after an episode ended (terminated or truncated, for whatever
reason) raises :class:`ResetNeededError`; any call after ``close()`` raises
:class:`ClosedEnvironmentError` instead of quietly starting a new session.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import math
import string
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from uirl_gym import page_text
from uirl_gym.actions import (
    DEFAULT_ACTION_TIMEOUT_S,
    DEFAULT_SCREEN,
    MAX_ACTION_TIMEOUT_S,
    MAX_BID_LENGTH,
    MIN_ACTION_TIMEOUT_S,
    Action,
    ActionType,
    action_space,
    check_screen,
    to_action,
)
from uirl_gym.client import (
    IMAGE_FORMATS,
    ActionTimeoutError,
    InvalidActionError,
    SessionClient,
    SessionError,
    SessionHTTPError,
)
from uirl_gym.page_text import DEFAULT_TEXT_LIMIT
from uirl_gym.protocol import SessionInfo, token_from_environment
from uirl_gym.runtimes.base import Runtime
from uirl_gym.tasks import split_range, task_spec
from uirl_gym.tasks.base import EpisodeScorer
from uirl_gym.tasks.miniwob import dom_elements as miniwob_dom

# SimpleDataEntry's reward config, importable from here as before.

__all__ = ["ClosedEnvironmentError", "ResetNeededError", "UIEnv"]

logger = logging.getLogger(__name__)

MAX_INSTRUCTION_LENGTH = 2048
RESET_ATTEMPTS = 2
# How long a reset may take (a context switch, and a page load when the task changes).
RESET_TIMEOUT_S = 30.0


class ClosedEnvironmentError(gym.error.ClosedEnvironmentError, RuntimeError):
    """The env (or vector env) was used after ``close()``; make a new one."""


class ResetNeededError(gym.error.ResetNeeded, RuntimeError):
    """``step`` with no episode running: before the first reset, or after the episode ended."""


class InstructionText(spaces.Text):
    """A ``Text`` space holding any Unicode text up to ``max_length`` characters: every
    instruction a task can give (MiniWoB++'s unicode-test: ``Click on the "ÖK" button.``,
    a task in another language), not only ASCII.

    A ``Text`` space lists its characters, and all of Unicode (1.1 million code points)
    is too many to list; so it contains any string of whole characters (no lone
    surrogate) of the allowed length, and samples from printable ASCII and Latin-1 (the
    listed ``charset``).
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        sampled = "".join(chr(c) for c in (*range(32, 127), *range(0xA0, 0x100))) + "\n"
        super().__init__(max_length, min_length=min_length, charset=sampled, seed=seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    def __repr__(self) -> str:
        return f"InstructionText({self.min_length}, {self.max_length}, any Unicode text)"


# The observations an env can add to the screenshot and instruction (``observations=``;
# docs/env.md): the page as text, the elements, the set-of-marks screenshot.
TEXT_OBSERVATIONS = ("axtree", "html", "elements", "som", "focused", "url", "last_action_error")
# Observations of MiniWoB++ tasks only: the ``miniwob`` package's own DOM elements.
MINIWOB_OBSERVATIONS = ("dom_elements",)
# The parts of ``GET /page`` each needs.
_PAGE_PARTS = {
    "axtree": "axtree",
    "html": "dom",
    "elements": "elements",
    "som": "elements",
    "dom_elements": "dom_elements",
}
MAX_URL_LENGTH = 4096


def observation_space(
    screen: tuple[int, int] = DEFAULT_SCREEN,
    observations: tuple[str, ...] = (),
    text_limit: int = DEFAULT_TEXT_LIMIT,
) -> spaces.Dict:
    """``{"screenshot": uint8 (height, width, 3), "instruction": InstructionText}``; by
    default (800, 1280, 3); plus the ``observations`` asked for (:data:`TEXT_OBSERVATIONS`):

    - ``axtree``, ``html``: text of at most ``text_limit`` characters (page_text);
    - ``elements``: a ``Sequence`` of ``{"bid", "bbox": float32 [x, y, w, h] (screen
      pixels), "visibility": float32 0..1, "clickable": 0|1, "set_of_marks": 0|1}``;
    - ``som``: the screenshot with the set-of-marks elements boxed and numbered;
    - ``focused``: the focused element's bid (``""``: none); ``url``: the page's URL;
    - ``last_action_error``: why the last action was refused (``""``: it was not);
    - ``dom_elements`` (MiniWoB++ tasks): the ``miniwob`` package's own, in its space.
    """
    width, height = screen
    image = spaces.Box(0, 255, (height, width, 3), dtype=np.uint8)
    extra: dict[str, spaces.Space[Any]] = {
        "axtree": InstructionText(text_limit),
        "html": InstructionText(text_limit),
        "elements": spaces.Sequence(
            spaces.Dict(
                {
                    "bid": spaces.Text(MAX_BID_LENGTH, min_length=1, charset=_BID_CHARSET),
                    "bbox": spaces.Box(-np.inf, np.inf, (4,), dtype=np.float32),
                    "visibility": spaces.Box(0.0, 1.0, (), dtype=np.float32),
                    "clickable": spaces.Discrete(2),
                    "set_of_marks": spaces.Discrete(2),
                }
            )
        ),
        "som": image,
        "focused": spaces.Text(MAX_BID_LENGTH, min_length=0, charset=_BID_CHARSET),
        "url": InstructionText(MAX_URL_LENGTH),
        "last_action_error": InstructionText(MAX_INSTRUCTION_LENGTH),
    }
    if "dom_elements" in observations:
        extra["dom_elements"] = miniwob_dom.dom_elements_space(screen)
    return spaces.Dict(
        {
            "screenshot": image,
            "instruction": InstructionText(MAX_INSTRUCTION_LENGTH),
            **{name: extra[name] for name in observations},
        }
    )


_BID_CHARSET = string.ascii_letters + string.digits


def check_observations(value: Any) -> tuple[str, ...]:
    """The extra observations asked for, checked (ValueError naming the valid ones)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple):
        raise ValueError(
            f"observations: expected a list of names from {', '.join(TEXT_OBSERVATIONS)}, "
            f"got {value!r}"
        )
    valid = TEXT_OBSERVATIONS + MINIWOB_OBSERVATIONS
    unknown = [v for v in value if v not in valid]
    if unknown:
        hints = [
            f"did you mean {close[0]!r}?"
            for v in unknown
            if isinstance(v, str)
            and (close := difflib.get_close_matches(v, valid, n=1, cutoff=0.6))
        ]
        raise ValueError(
            f"observations: unknown {', '.join(map(repr, unknown))}; valid: "
            f"{', '.join(TEXT_OBSERVATIONS)} (and, for MiniWoB++ tasks, "
            f"{', '.join(MINIWOB_OBSERVATIONS)})" + (f" ({' '.join(hints)})" if hints else "")
        )
    return tuple(dict.fromkeys(value))


def _check_miniwob_observations(observations: tuple[str, ...], tasks: list[str]) -> None:
    """MiniWoB++'s own observations only for MiniWoB++ tasks (``ValueError`` naming one)."""
    asked = [name for name in observations if name in MINIWOB_OBSERVATIONS]
    other = next((t for t in tasks if task_spec(t).family != "miniwob"), None)
    if asked and other is not None:
        raise ValueError(
            f"observations: {', '.join(map(repr, asked))} (the miniwob package's own DOM "
            f"elements) exist for MiniWoB++ tasks only, and task {other!r} is not one: "
            "ask for 'axtree', 'html' or 'elements' instead"
        )


class UIEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """A computer-use task on a remote browser session.

    Attributes:
        observation_space: see :func:`observation_space`.
        action_space: see :func:`uirl_gym.actions.action_space`; ``step`` also takes an
            :class:`~uirl_gym.actions.Action` or a plain dict.
        task: the env's task id (``uirl_gym.tasks.TASKS``): every episode's, unless
            ``tasks`` or a reset's ``options["task"]`` names another.
        tasks: task id -> sampling weight: each reset without ``options["task"]`` draws
            its task from these (with the env's RNG: a seed gives the same task).
        task_options: task id -> default reset options for that task's episodes
            (``default_options`` are the ``task``'s).
        reward_mode: ``"sparse"`` (the task's record only) or ``"dense"`` (plus the
            task's shaping).
        rewards: the reward config of ``task``'s episodes (SimpleDataEntry:
            :class:`RewardConfig`); other tasks' episodes take their defaults.
        session: the session in use (None before the first reset).
        screen: the screen (width, height) of every episode: 1280x800 unless
            ``screen_size`` says otherwise (MiniWoB++ at zoom 1: ``(160, 210)``, the
            task area; the screen itself is that small, so each step renders and
            ships only that). Observations and actions are in its pixels.

    Methods:
        reset(seed=None, options=None): the task's options (SimpleDataEntry: ``rows``,
            0-based data rows to copy, ``num_rows``, ``data_seed``, ``num_data_rows``),
            ``split`` (``"train"`` or ``"test"``, default: the env's ``split``): the
            range the episode's task seed is drawn from (``uirl_gym.tasks.SPLITS``),
            and ``task``: the episode's task (any session serves any task). ``info``
            names the episode's ``task``.
        step(action): act, then reward from the task's record.
        oracle(): privileged state for scripted experts (never part of observations).
        close(): give the session back; stop the runtime if this env made it.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        runtime: Runtime | None = None,
        base_url: str | SessionInfo | None = None,
        task: str = "simple_data_entry",
        tasks: Mapping[str, float] | None = None,
        task_options: Mapping[str, Mapping[str, Any]] | None = None,
        split: str = "train",
        reward_mode: Literal["sparse", "dense"] = "sparse",
        rewards: Any = None,
        image_format: Literal["png", "jpeg", "raw"] = "png",
        step_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S,
        default_options: Mapping[str, Any] | None = None,
        screen_size: tuple[int, int] = DEFAULT_SCREEN,
        observations: tuple[str, ...] | list[str] = (),
        text_limit: int = DEFAULT_TEXT_LIMIT,
    ) -> None:
        # Every argument is checked here, so that gym.make refuses a bad one at once
        # with what it accepts, instead of a step failing later.
        _check_modes(render_mode, reward_mode, image_format)
        if runtime is not None and base_url is not None:
            raise ValueError("give a runtime or a base_url, not both")
        if base_url is not None and not isinstance(base_url, str | SessionInfo):
            raise ValueError(
                f"base_url: expected a URL (a string) or a SessionInfo, got {base_url!r}"
            )
        self.render_mode = render_mode
        self.task = _task_id("task", task)
        self._spec = task_spec(self.task)
        self.tasks = _task_weights(_mapping("tasks", tasks))
        self.task_options = {
            _task_id("task_options", name): dict(_mapping(f"task_options[{name!r}]", o))
            for name, o in _mapping("task_options", task_options).items()
        }
        for name, options in self.task_options.items():
            _check_task_options(f"task_options[{name!r}]", name, options)
        if not isinstance(split, str):
            raise ValueError(f"split: expected 'train' or 'test', got {split!r}")
        split_range(split)
        self.split = split
        self.reward_mode = reward_mode
        default_rewards = self._spec.rewards()
        if rewards is not None and not isinstance(rewards, type(default_rewards)):
            raise ValueError(
                f"rewards: expected None or a {type(default_rewards).__name__} (task "
                f"{self.task!r}'s reward config), got {rewards!r}"
            )
        self.rewards = default_rewards if rewards is None else rewards
        self.image_format = image_format
        self.step_timeout_s = _step_timeout(step_timeout_s)
        self.default_options = dict(_mapping("default_options", default_options))
        _check_task_options("default_options", self.task, self.default_options)
        self.screen = check_screen(screen_size)
        self.observations = check_observations(observations)
        if isinstance(text_limit, bool) or not isinstance(text_limit, int) or text_limit < 200:
            raise ValueError(f"text_limit: expected characters >= 200, got {text_limit!r}")
        self.text_limit = text_limit
        _check_miniwob_observations(self.observations, [self.task, *self.tasks])
        self.observation_space = observation_space(self.screen, self.observations, text_limit)
        self.action_space = action_space(screen=self.screen)
        self._base_url = base_url
        self._runtime = runtime
        self._owns_runtime = False
        self.session: SessionInfo | None = None
        self._client: SessionClient | None = None
        self._replacement: Future[SessionInfo] | None = None
        self._obs: dict[str, Any] | None = None
        self._episode: _EpisodeRecord | None = None
        self._closed = False
        # The task of the episode running (or last run); None before the first reset.
        self.episode_task: str | None = None
        # Wall times of the last reset or step (kept out of info, which must be
        # deterministic for a given seed and actions).
        self.timings: dict[str, float] = {}

    # -- sessions --------------------------------------------------------------------

    def _ensure_session(self) -> SessionClient:
        self._check_open()
        if self._client is not None:
            return self._client
        if isinstance(self._base_url, SessionInfo):
            self.session = self._base_url  # a runtime's session, its credentials with it
        elif self._base_url is not None:
            # A server started by hand: its token, if any, from $UIRL_SESSION_TOKEN.
            self.session = SessionInfo(
                session_id=self._base_url,
                base_url=self._base_url,
                headers=token_from_environment(),
            )
        elif self._replacement is not None:
            replacement, self._replacement = self._replacement, None
            self.session = replacement.result()
        else:
            if self._runtime is None:
                from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig

                self._runtime = LocalRuntime(LocalRuntimeConfig(task=self.task))
                self._owns_runtime = True
            self.session = self._runtime.acquire()
        # The session's credentials travel with it: the reward reads the record's
        # detail, which the server shows only to the token's holder.
        self._client = SessionClient(
            self.session,
            read_timeout_s=RESET_TIMEOUT_S,
            action_timeout_s=self.step_timeout_s,
            image_format=self.image_format,
        )
        return self._client

    def _drop_session(self, healthy: bool) -> None:
        if self._client is not None:
            self._client.close()
        if self._runtime is not None and self.session is not None:
            self._runtime.release(self.session, healthy=healthy)
            if not healthy:
                # Start the replacement now, so that the next reset finds it (nearly)
                # ready instead of waiting for a cold start.
                self._replacement = _in_background(self._runtime.acquire)
        self._client = None
        self.session = None

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedEnvironmentError(
                "this UIEnv is closed (its session was given back); make a new env with "
                "gym.make(...) instead of using it again"
            )

    # -- gym API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode. See the class docstring for ``options``.

        Raises:
            ClosedEnvironmentError: the env was closed.
            ValueError: options the env or the task refuses (e.g. more than
                ``MAX_TARGET_ROWS`` rows); no episode is running afterwards.
            SessionError: the session failed twice in a row.
        """
        self._check_open()
        # Whatever happens below, the previous episode is over: a failed reset must not
        # leave it steppable on a replacement session.
        self._episode = None
        super().reset(seed=seed)
        asked = dict(options or {})
        # The episode's task goes to the session, which switches to it if it ran
        # another (a pooled session may have served another env).
        name = asked.pop("task", None)
        if name is None and self.tasks:
            names = list(self.tasks)
            weights = np.array([self.tasks[n] for n in names])
            name = names[int(self.np_random.choice(len(names), p=weights / weights.sum()))]
        task = self.task if name is None else name
        _check_miniwob_observations(self.observations, [task])
        spec = task_spec(task)
        task_options = {
            **(self.default_options if task == self.task else {}),
            **self.task_options.get(task, {}),
            **asked,
        }
        split = task_options.pop("split", self.split)
        seeds = split_range(split)
        task_seed = seeds.start + int(self.np_random.integers(len(seeds)))
        spec.check_options(task_options)
        rewards = self.rewards if task == self.task else spec.rewards()
        for attempt in range(1, RESET_ATTEMPTS + 1):
            client = self._ensure_session()
            t0 = time.perf_counter()
            try:
                # The screen goes with every reset: a pooled session may have served
                # another env's (the server's default when not given).
                screen = None if self.screen == DEFAULT_SCREEN else self.screen
                started = client.reset(task_seed, task_options, task=task, screen=screen)
                self._check_task(started, task)
                # The screenshot's response carries the task record (one round trip).
                screenshot, progress = client.act_with_progress(Action(ActionType.SCREENSHOT))
                page = self._read_page(client)
                if screenshot.shape[:2] != (self.screen[1], self.screen[0]):
                    raise ValueError(
                        f"the session's screen is {screenshot.shape[1]}x{screenshot.shape[0]}, "
                        f"not the env's {self.screen[0]}x{self.screen[1]} (a server from "
                        "before per-episode screens?)"
                    )
                break
            except SessionHTTPError as exc:
                raise ValueError(f"reset refused: {exc.detail}") from None
            except SessionError as exc:
                logger.warning("reset failed on %s (attempt %d): %s", self.session, attempt, exc)
                self._drop_session(healthy=False)
                if attempt == RESET_ATTEMPTS:
                    raise
        self._obs = self._observation(screenshot, started["instruction"], page)
        scorer = spec.scorer(progress, rewards)
        self._episode = _EpisodeRecord(scorer, rewards)
        self.episode_task = task
        self._episode.potential = self._potential() if self.reward_mode == "dense" else 0.0
        info = {
            **scorer.reset_info(),
            "progress": _task_record(progress),
            "task": task,
            "task_seed": task_seed,
            "split": split,
        }
        self.timings = {"reset_s": time.perf_counter() - t0}
        return self._obs, info

    def step(
        self, action: Action | Mapping[str, Any]
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Act, then pay from the task's record. An invalid action is an observation.

        Raises:
            ClosedEnvironmentError: the env was closed.
            ResetNeededError: no episode is running (never reset, or the last one
                ended terminated or truncated).
        """
        self._check_open()
        if self._episode is None or self._obs is None:
            raise ResetNeededError("no episode is running: call reset() before step()")
        episode = self._episode
        if episode.ended is not None:
            raise ResetNeededError(
                f"the episode ended ({episode.ended}) on the last step; call reset() to "
                "start a new one before stepping again"
            )
        info: dict[str, Any] = {}
        reward = 0.0
        t0 = time.perf_counter()
        try:
            parsed = to_action(action).validate(screen=self.screen)
        except (ValueError, TypeError) as exc:
            return self._invalid(f"{type(exc).__name__}: {exc}", info)
        if parsed.type is ActionType.FINISH:
            info.update(episode.scorer.status())
            episode.ended = "terminated"
            return _fresh(self._obs), 0.0, True, False, info
        if parsed.type is ActionType.SEND_MSG_TO_USER:
            # No task of uirl's reads the chat: the message is kept in info, the page as is.
            info.update(episode.scorer.status(), message_to_user=parsed.text)
            return _fresh(self._obs), 0.0, False, False, info
        client = self._ensure_session()
        try:
            screenshot, progress = client.act_with_progress(parsed)
            t_act = time.perf_counter()
            page = self._read_page(client)
            potential = self._potential() if self.reward_mode == "dense" else 0.0
        except InvalidActionError as exc:
            return self._invalid(exc.detail, info)
        except ActionTimeoutError as exc:
            # The page hangs, the session does not: the episode ends, and the next reset
            # starts a fresh page in the same session.
            logger.warning("session %s: the page hangs: %s", self.session, exc)
            info.update(episode.scorer.status(), error=f"{type(exc).__name__}: {exc}")
            episode.ended = "truncated"
            return _fresh(self._obs), 0.0, False, True, info
        except SessionError as exc:
            logger.warning("session %s failed mid-episode: %s", self.session, exc)
            self._drop_session(healthy=False)
            info.update(episode.scorer.status(), error=f"{type(exc).__name__}: {exc}")
            episode.ended = "truncated"
            return _fresh(self._obs), 0.0, False, True, info
        reward += episode.scorer.reward(progress)
        reward += potential - episode.potential
        episode.potential = potential
        self._obs = self._observation(screenshot, self._obs["instruction"], page)
        terminated = episode.scorer.done
        if terminated:
            episode.ended = "terminated"
        info.update(episode.scorer.status(), progress=_task_record(progress))
        if client.last_dialogs:
            # A dialog shows in no screenshot: what the page said, and how it was answered.
            info["dialogs"] = client.last_dialogs
        self.timings = {"act_s": t_act - t0, "step_s": time.perf_counter() - t0}
        return self._obs, reward, terminated, False, info

    def _invalid(self, message: str, info: dict[str, Any]) -> tuple[Any, ...]:
        assert self._episode is not None and self._obs is not None
        info.update(self._episode.scorer.status(), invalid_action=message)
        if "last_action_error" in self.observations:
            self._obs = {**self._obs, "last_action_error": message[:MAX_INSTRUCTION_LENGTH]}
        return _fresh(self._obs), -self._episode.rewards.invalid_action, False, False, info

    def _read_page(self, client: SessionClient) -> dict[str, Any] | None:
        """What the text observations need of the page (None: none asked for)."""
        if not set(self.observations) - {"last_action_error"}:
            return None
        parts = {_PAGE_PARTS[name] for name in self.observations if name in _PAGE_PARTS}
        return client.page(sorted(parts))

    def _observation(
        self, screenshot: np.ndarray, instruction: str, page: dict[str, Any] | None
    ) -> dict[str, Any]:
        obs: dict[str, Any] = {"screenshot": screenshot, "instruction": instruction}
        for name in self.observations:
            if name == "last_action_error":
                obs[name] = ""
                continue
            assert page is not None
            if name == "axtree":
                obs[name] = page_text.axtree_text(page["axtree"]["nodes"], self.text_limit)
            elif name == "html":
                obs[name] = page_text.html_text(page["dom"], self.text_limit)
            elif name == "elements":
                obs[name] = page_text.element_list(page["elements"])
            elif name == "som":
                obs[name] = page_text.mark_screenshot(screenshot, page["elements"])
            elif name == "focused":
                obs[name] = page["focused_element_bid"]
            elif name == "url":
                obs[name] = page["url"][:MAX_URL_LENGTH]
            elif name == "dom_elements":
                obs[name] = miniwob_dom.dom_elements(page["dom_elements"])
        return obs

    def _potential(self) -> float:
        """Dense mode: the task's shaping potential of the current page."""
        assert self._episode is not None and self._client is not None
        return self._episode.scorer.potential(self._client.oracle())

    def _check_task(self, started: Mapping[str, Any], task: str) -> None:
        """The session runs the episode's task (servers that do not say are trusted)."""
        running = started.get("task", task)
        if running != task:
            raise ValueError(
                f"the session runs task {running!r}, this episode is scored as {task!r}: make "
                f"the env with task={running!r} (or reset with options={{'task': {task!r}}})"
            )

    def refuse(self, message: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """A step whose action was refused before it reached the env (an agent's text
        that does not parse: a BrowserGym action string, an OpenEnv ``action_str``): it
        counts and pays as an invalid action, ``info["invalid_action"]`` (and the
        ``last_action_error`` observation) is ``message``, the page is untouched.

        Raises:
            ClosedEnvironmentError, ResetNeededError: as :meth:`step`.
        """
        self._check_open()
        if self._episode is None or self._obs is None:
            raise ResetNeededError("no episode is running: call reset() before refuse()")
        if self._episode.ended is not None:
            raise ResetNeededError(f"the episode ended ({self._episode.ended}); call reset()")
        return self._invalid(message, {})

    def page(self, include: tuple[str, ...] = (), *, full: bool = False) -> dict[str, Any]:
        """The page as text now (``GET /page``): ``url``, ``title``,
        ``focused_element_bid``, ``open_pages_urls``, ``open_pages_titles`` and the parts
        ``include`` names (``axtree``, ``dom``, ``elements``), CDP's objects with each
        element's bid; ``full`` keeps every field CDP sends. What the text observations
        are made from (docs/env.md); it marks the page's elements with the bids that
        actions by element take."""
        return self._ensure_session().page(include, full=full)

    def oracle(self) -> dict[str, Any]:
        """The task's privileged state (target values, element boxes): for experts only."""
        return self._ensure_session().oracle()

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array" and self._obs is not None:
            return self._obs["screenshot"]
        return None

    def close(self) -> None:
        """Give the session back and stop an env-made runtime; later calls raise."""
        self._closed = True
        self._episode = None
        self._drop_session(healthy=True)
        if self._replacement is not None and self._runtime is not None:
            try:
                self._runtime.release(self._replacement.result(), healthy=True)
            except Exception as exc:
                logger.warning("the replacement session failed to start: %s", exc)
            self._replacement = None
        if self._owns_runtime and self._runtime is not None:
            self._runtime.close()
            self._runtime = None
            self._owns_runtime = False
        super().close()


def _in_background(fn: Callable[[], SessionInfo]) -> Future[SessionInfo]:
    future: Future[SessionInfo] = Future()

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="uirl-replacement", daemon=True).start()
    return future


def _fresh(obs: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an observation that shares no array with it: a step that does not change
    the page (an invalid action, a message, the end) returns the last observation again,
    and the caller may keep and modify both (Gymnasium's ``check_env`` checks)."""

    def copied(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.copy()
        if isinstance(value, tuple):
            return tuple(copied(v) for v in value)
        if isinstance(value, dict):
            return {k: copied(v) for k, v in value.items()}
        return value

    return {k: copied(v) for k, v in obs.items()}


def _task_record(progress: Mapping[str, Any]) -> dict[str, Any]:
    """The task's record without session bookkeeping (the episode counter)."""
    return {k: v for k, v in progress.items() if k != "episode"}


def make_env(**kwargs: Any) -> UIEnv:
    """The Gymnasium entry point of every uirl id: ``UIEnv(**kwargs)``, with an unknown
    argument named (and the nearest known one suggested).

    A function, not the class: Gymnasium turns ``render_mode="human"`` into
    ``"rgb_array"`` plus a pygame window for an env *class* that lacks it, which failed
    only at the first reset (no pygame); the function passes it on, and ``UIEnv``
    refuses it at ``gym.make``.

    Raises:
        TypeError: an argument ``UIEnv`` does not take.
        ValueError: a value ``UIEnv`` refuses (see ``UIEnv.__init__``).
    """
    accepted = [name for name in inspect.signature(UIEnv).parameters if name != "self"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.5)
            if name == "options":
                hints.append("reset options go to reset(options=...) (defaults: default_options=)")
            elif close:
                hints.append(f"did you mean {close[0]!r} for {name!r}?")
        raise TypeError(
            f"unknown argument(s) {', '.join(map(repr, unknown))} for a uirl env; "
            f"accepted: {', '.join(accepted)}" + (f" ({'; '.join(hints)})" if hints else "")
        )
    return UIEnv(**kwargs)


def _task_id(name: str, value: Any) -> str:
    """A registered task id (``ValueError`` naming the argument: not a string, unknown)."""
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected a task id such as 'simple_data_entry', got {value!r}")
    try:
        task_spec(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return value


def _mapping(name: str, value: Any) -> Mapping[Any, Any]:
    """``value`` if it is a mapping (None: empty); ``ValueError`` naming the argument."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name}: expected a dict, got {value!r}")
    return value


def _check_task_options(name: str, task: str, options: Mapping[str, Any]) -> None:
    """The task's own check of reset options, at construction (``ValueError``)."""
    checked = {k: v for k, v in options.items() if k != "split"}
    if "split" in options:
        if not isinstance(options["split"], str):
            raise ValueError(f"{name}: split: expected 'train' or 'test', got {options['split']!r}")
        split_range(options["split"])
    try:
        task_spec(task).check_options(checked)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: {exc}") from None


def _task_weights(tasks: Mapping[str, float] | None) -> dict[str, float]:
    """Checked sampling weights (``ValueError``: unknown task, or a weight not > 0)."""
    weights = {}
    for name, weight in (tasks or {}).items():
        task_spec(name)
        number = isinstance(weight, int | float) and not isinstance(weight, bool)
        if not number or not (0 < weight < math.inf):
            raise ValueError(
                f"tasks[{name!r}]: a weight must be a finite number > 0, got {weight!r}"
            )
        weights[name] = float(weight)
    return weights


@dataclass
class _EpisodeRecord:
    scorer: EpisodeScorer
    rewards: Any
    potential: float = 0.0
    # "terminated" or "truncated" once the episode has ended; stepping on then raises.
    ended: str | None = None


def _check_modes(render_mode: str | None, reward_mode: str, image_format: str) -> None:
    if render_mode is not None and render_mode not in UIEnv.metadata["render_modes"]:
        raise ValueError(
            f"render_mode: expected None or 'rgb_array', got {render_mode!r} (sessions "
            "are headless: show env.render()'s frames yourself, e.g. with "
            "gymnasium.wrappers.HumanRendering(env) made with 'rgb_array')"
        )
    if reward_mode not in ("sparse", "dense"):
        raise ValueError(f"reward_mode: expected 'sparse' or 'dense', got {reward_mode!r}")
    if image_format not in IMAGE_FORMATS:
        raise ValueError(
            f"image_format: expected one of {', '.join(IMAGE_FORMATS)}, got {image_format!r}"
        )


def _step_timeout(step_timeout_s: Any) -> float:
    number = isinstance(step_timeout_s, int | float) and not isinstance(step_timeout_s, bool)
    if not number or not MIN_ACTION_TIMEOUT_S <= step_timeout_s <= MAX_ACTION_TIMEOUT_S:
        raise ValueError(
            f"step_timeout_s: expected seconds in {MIN_ACTION_TIMEOUT_S:g}.."
            f"{MAX_ACTION_TIMEOUT_S:g}, got {step_timeout_s!r}"
        )
    return float(step_timeout_s)
