"""uirl tasks inside TRL's ``GRPOTrainer``: screenshots every turn, pixel actions as tools.

TRL (>= 1.16) runs multi-turn episodes through ``GRPOTrainer(environment_factory=...)``:
it makes one environment instance per rollout (pooled, reused across batches), calls
``reset(**row)`` with the dataset row, exposes the instance's public methods to the
model as tools, feeds the images that tools return to generation *and* to the training
forward pass, and scores each rollout with ``get_reward()``.
:func:`make_environment` returns such a class for a uirl task::

    from trl import GRPOConfig, GRPOTrainer
    from uirl_agents.integrations.trl import log_episode_metrics, make_environment, seed_dataset

    trainer = GRPOTrainer(
        model=model,                       # Qwen3-VL as it ships, or Qwen2.5-VL / UI-TARS-1.5
        processing_class=processor,        # through use_tool_chat_template()
        args=GRPOConfig(output_dir="runs/trl", max_completion_length=2048),
        train_dataset=seed_dataset(64),    # one row per task instance: seed, split, options
        reward_funcs=[log_episode_metrics],  # success rate and steps; the reward is the env's
        environment_factory=make_environment("uirl/SimpleDataEntry-v0", max_steps=8),
    )
    trainer.train()

The tools (one per env action): ``click``, ``double_click``, ``right_click``, ``type``,
``keys``, ``scroll``, ``drag``, ``finish``. Coordinates are pixels of the screenshot
the model sees (``screenshot_size``, (640, 400) by default: every screenshot stays in
TRL's context, so they are downscaled) and are mapped to the 1280x800 screen once,
here. Every tool call returns the screenshot and a short report (always an image: TRL
1.16 fails on a batch whose first tool round returns none); a bad argument, a wrong
argument name included, is an error message to the model (with the unchanged screen),
never an exception, and costs a step like an invalid action; after the episode ends (``finish``, the task's own end, a failed session, or ``max_steps`` tool
calls), a tool only says so.

Sessions: each instance holds one warm uirl session (``UIEnv``), reused across episodes
with in-session resets: the local runtime by default, any :class:`Runtime` (e.g.
``KubernetesRuntime``) given as ``runtime``, or a
:class:`~uirl_gym.runtimes.settings.RuntimeSettings` (the trainers' ``env.runtime``
setting: a runtime built from it is shared by the class's instances in this process),
a session server at ``base_url``, or an OpenEnv server at ``openenv_url``. Sessions close when their instance is garbage
collected, at :func:`close_environments`, at exit, and on SIGINT/SIGTERM (the local
runtime's own handlers; its servers also exit when their parent dies).
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from PIL import Image

from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, ActionType
from uirl_gym.runtimes.base import Runtime
from uirl_gym.runtimes.settings import RuntimeSettings, build_runtime, check_runtime
from uirl_gym.tasks import TASKS, task_spec

__all__ = [
    "EnvironmentConfig",
    "UirlEnvironment",
    "close_environments",
    "log_episode_metrics",
    "make_environment",
    "seed_dataset",
    "task_name",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvironmentConfig:
    """Settings shared by every instance of one environment class.

    Attributes:
        task: the task (``uirl/<Task>-v0`` or its short name, e.g. ``form_fill``).
        screenshot_size: (width, height) of the screenshots the model sees, and the
            frame its coordinates are in. For Qwen2.5-VL, multiples of 28 are passed
            through its processor unchanged.
        max_steps: tool calls per episode; the last one says that the limit is reached.
        reward_mode: ``"sparse"`` (the task's record only) or ``"dense"`` (plus the
            task's shaping).
        split: ``"train"`` or ``"test"``: the range task seeds are drawn from, unless a
            dataset row names its own ``split``.
        task_options: the task's reset options (a row's ``options`` override them).
        runtime: a shared :class:`Runtime` (e.g. ``KubernetesRuntime``; the caller
            closes it), or a ``RuntimeSettings`` (``kubernetes``/``servers``: one runtime
            built from it, shared by this process's instances; ``openenv``: as
            ``openenv_url``; ``local``: as None); None: each instance starts its own
            local session.
        base_url: a running session server instead of a runtime.
        openenv_url: an OpenEnv server (``python -m uirl_gym.openenv``) instead.
        step_timeout_s: how long one action may take.
    """

    task: str = "uirl/SimpleDataEntry-v0"
    screenshot_size: tuple[int, int] = (640, 400)
    max_steps: int = 10
    reward_mode: Literal["sparse", "dense"] = "sparse"
    split: str = "train"
    task_options: Mapping[str, Any] = field(default_factory=dict)
    runtime: Runtime | RuntimeSettings | None = None
    base_url: str | None = None
    openenv_url: str | None = None
    step_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "task", task_name(self.task))
        width, height = self.screenshot_size
        if not (16 <= width <= SCREEN_WIDTH and 16 <= height <= SCREEN_HEIGHT):
            raise ValueError(
                f"screenshot_size: expected (width, height) within 16..{SCREEN_WIDTH} x "
                f"16..{SCREEN_HEIGHT}, got {self.screenshot_size!r}"
            )
        if self.max_steps < 1:
            raise ValueError(f"max_steps: expected >= 1, got {self.max_steps}")
        if self.reward_mode not in ("sparse", "dense"):
            raise ValueError(f"reward_mode: expected 'sparse' or 'dense', got {self.reward_mode!r}")
        sources = [n for n in ("runtime", "base_url", "openenv_url") if getattr(self, n)]
        if len(sources) > 1:
            raise ValueError(f"give one of runtime, base_url, openenv_url; got {sources}")
        if isinstance(self.runtime, RuntimeSettings):
            check_runtime(self.runtime, num_envs=1, rank=_rank(), world_size=_world_size())
            if self.runtime.runtime == "openenv":
                object.__setattr__(self, "openenv_url", self.runtime.openenv_url)
        if self.openenv_url and self.reward_mode == "dense":
            raise ValueError("reward_mode 'dense' needs the oracle, which OpenEnv does not expose")


def task_name(task: str) -> str:
    """The task's short name from a gym id (``uirl/FormFill-v0`` -> ``form_fill``) or a name.

    Raises:
        ValueError: an unknown task (with the closest known one).
    """
    for name, spec in TASKS.items():
        if task in (spec.env_id, spec.env_id.removeprefix("uirl_gym:")):
            return name
    return task_spec(task).name


# ---- the session behind an instance -------------------------------------------------------


class EpisodeBackend(Protocol):
    """What an environment instance needs from a session (Gymnasium's step results)."""

    def reset(
        self, seed: int | None, options: dict[str, Any]
    ) -> tuple[np.ndarray, str, dict[str, Any]]: ...

    def step(
        self, action: dict[str, Any]
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]: ...

    def close(self) -> None: ...


class _GymBackend:
    """A :class:`~uirl_gym.env.UIEnv` on the local runtime, a shared runtime or a URL.

    On the local runtime (the default) the instance owns its runtime, and its session
    starts in the background as soon as the instance exists: TRL makes a batch's
    instances one after another and then resets them one after another, so the
    sessions' cold starts (~1 s each) overlap instead of adding up.
    """

    def __init__(self, config: EnvironmentConfig) -> None:
        from uirl_gym.env import UIEnv

        runtime = config.runtime
        self._owned_runtime: Runtime | None = None
        self._warming: threading.Thread | None = None
        if isinstance(runtime, RuntimeSettings):
            runtime = None if runtime.runtime == "local" else _shared_runtime(runtime)
        if runtime is None and config.base_url is None:
            runtime = self._owned_runtime = build_runtime(RuntimeSettings(), task=config.task)
            self._warming = threading.Thread(target=self._warm, name="uirl-warm", daemon=True)
            self._warming.start()
        self.env = UIEnv(
            task=config.task,
            runtime=runtime,
            base_url=config.base_url,
            split=config.split,
            reward_mode=config.reward_mode,
            step_timeout_s=config.step_timeout_s,
        )

    def _warm(self) -> None:
        """Start a session and leave it idle in the runtime, for the first reset."""
        assert self._owned_runtime is not None
        try:
            self._owned_runtime.release(self._owned_runtime.acquire(), healthy=True)
        except Exception as exc:  # the first reset starts one itself, and reports failures
            logger.warning("warming a uirl session failed: %s", exc)

    def _wait_warm(self) -> None:
        if self._warming is not None:
            self._warming.join()
            self._warming = None

    def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[np.ndarray, str, dict]:
        self._wait_warm()
        obs, info = self.env.reset(seed=seed, options=options)
        return obs["screenshot"], obs["instruction"], info

    def step(self, action: dict[str, Any]) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs["screenshot"], float(reward), terminated, truncated, info

    def close(self) -> None:
        self._wait_warm()  # a session still starting would outlive a closed runtime
        self.env.close()
        if self._owned_runtime is not None:
            self._owned_runtime.close()


class _OpenEnvBackend:
    """A session on an OpenEnv server (``python -m uirl_gym.openenv``), over its WebSocket."""

    def __init__(self, config: EnvironmentConfig) -> None:
        from uirl_gym.openenv import OpenEnvSession

        self.session = OpenEnvSession(config.openenv_url, message_timeout_s=config.step_timeout_s)
        self.task = TASKS[config.task].env_id
        self.split = config.split

    def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[np.ndarray, str, dict]:
        options = {"split": self.split, **options}
        task = options.pop("task", self.task)
        return self.session.reset(task=task, seed=seed, options=options)

    def step(self, action: dict[str, Any]) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self.session.step(action)

    def close(self) -> None:
        self.session.close()


# The runtimes built from RuntimeSettings, one per settings object (per class), shared by
# the instances of this process; the Kubernetes runtime deletes its pods at exit.
_SHARED_RUNTIMES: dict[int, tuple[RuntimeSettings, Runtime]] = {}
_SHARED_LOCK = threading.Lock()


def _shared_runtime(settings: RuntimeSettings) -> Runtime:
    with _SHARED_LOCK:
        if id(settings) not in _SHARED_RUNTIMES:
            runtime = build_runtime(settings, rank=_rank(), world_size=_world_size())
            assert runtime is not None  # not openenv: that goes to _OpenEnvBackend
            _SHARED_RUNTIMES[id(settings)] = (settings, runtime)
        return _SHARED_RUNTIMES[id(settings)][1]


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _open_backend(config: EnvironmentConfig) -> EpisodeBackend:
    if config.openenv_url:
        return _OpenEnvBackend(config)
    return _GymBackend(config)


def _close_backend(holder: dict[str, EpisodeBackend | None]) -> None:
    backend, holder["backend"] = holder["backend"], None
    if backend is not None:
        try:
            backend.close()
        except Exception as exc:  # closing must never raise from a finalizer
            logger.warning("closing a uirl session failed: %s", exc)


# ---- the environment class ------------------------------------------------------------------

# Every live instance, for close_environments() (weak: TRL's pool owns them).
_LIVE: weakref.WeakSet[UirlEnvironment] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


class UirlEnvironment:
    """One rollout's uirl episode, for TRL's ``environment_factory``.

    Make the class with :func:`make_environment` (it binds an :class:`EnvironmentConfig`);
    TRL calls it with no arguments. Public methods other than ``reset`` and
    ``get_reward`` are the model's tools.

    Attributes:
        config: the class's settings.
        is_success: whether the last episode reached the task's success.
        steps: tool calls made in the last episode.
        images_returned: screenshots returned to the model in the last episode: the
            reset's and one per tool call (each one is an image row in TRL's training
            batch).
        ended: why the last episode ended (None while it runs).
    """

    config: ClassVar[EnvironmentConfig] = EnvironmentConfig()

    def __init__(self) -> None:
        # The session opens now (in the background where it can): TRL resets instances
        # soon after making them.
        self._holder: dict[str, EpisodeBackend | None] = {"backend": _open_backend(self.config)}
        # Closes the session when TRL drops the instance (and at exit), without
        # keeping the instance alive.
        self._finalizer = weakref.finalize(self, _close_backend, self._holder)
        self._reward = 0.0
        self._screenshot = np.zeros((SCREEN_HEIGHT, SCREEN_WIDTH, 3), np.uint8)
        self.is_success = False
        self.steps = 0
        self.images_returned = 0
        self.ended: str | None = "not started"
        self.last_info: dict[str, Any] = {}
        with _LIVE_LOCK:
            _LIVE.add(self)

    # -- TRL's contract -----------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        task: str | None = None,
        options: Mapping[str, Any] | None = None,
        split: str | None = None,
        **row: Any,
    ) -> list[dict[str, Any]]:
        """Start the episode of a dataset row; return the first screenshot and the task.

        Args:
            seed: the task instance (every member of a GRPO group gets the same row,
                hence the same instance).
            task: run this task instead of the class's (the session switches).
            options: the task's reset options, over ``config.task_options``.
            split: ``"train"`` or ``"test"`` (default: ``config.split``).
            row: the row's other columns (``prompt``, ...), ignored.
        """
        del row
        backend = self._backend()
        asked = {**self.config.task_options, **(options or {})}
        if task is not None:
            asked["task"] = task_name(task)
        if split is not None:
            asked["split"] = split
        screenshot, instruction, info = backend.reset(None if seed is None else int(seed), asked)
        self._screenshot = screenshot
        self._reward = 0.0
        self.is_success = False
        self.steps = 0
        self.images_returned = 1
        self.ended = None
        self.last_info = info
        width, height = self.config.screenshot_size
        text = (
            f"{instruction}\n\nThe screenshot is {width}x{height} pixels; (0, 0) is its top-left "
            f"corner. Act with the tools, at most {self.config.max_steps} actions; call finish "
            "when the task is done."
        )
        return [{"type": "image", "image": self._image(screenshot)}, {"type": "text", "text": text}]

    def get_reward(self) -> float:
        """The episode's reward: the sum of the task's rewards over its steps."""
        return self._reward

    # -- the tools ----------------------------------------------------------------------------

    def click(self, x: int, y: int) -> list[dict[str, Any]]:
        """Click the left mouse button at a point of the screenshot.

        Args:
            x: the pixel column in the screenshot, from 0 (left edge) to {width_1} (right edge).
            y: the pixel row in the screenshot, from 0 (top edge) to {height_1} (bottom edge).

        Returns:
            The screenshot after the click and a short report.
        """
        return self._pointer(ActionType.LEFT_CLICK, x, y)

    def double_click(self, x: int, y: int) -> list[dict[str, Any]]:
        """Double-click the left mouse button at a point of the screenshot (e.g. to edit a cell).

        Args:
            x: the pixel column in the screenshot, from 0 (left edge) to {width_1} (right edge).
            y: the pixel row in the screenshot, from 0 (top edge) to {height_1} (bottom edge).

        Returns:
            The screenshot after the double click and a short report.
        """
        return self._pointer(ActionType.DOUBLE_CLICK, x, y)

    def right_click(self, x: int, y: int) -> list[dict[str, Any]]:
        """Click the right mouse button at a point of the screenshot (opens context menus).

        Args:
            x: the pixel column in the screenshot, from 0 (left edge) to {width_1} (right edge).
            y: the pixel row in the screenshot, from 0 (top edge) to {height_1} (bottom edge).

        Returns:
            The screenshot after the click and a short report.
        """
        return self._pointer(ActionType.RIGHT_CLICK, x, y)

    def type(self, text: str) -> list[dict[str, Any]]:
        """Type text with the keyboard into the focused field ("\\n" presses Enter, "\\t" Tab).

        Args:
            text: the text to type, at most 512 characters.

        Returns:
            The screenshot after typing and a short report.
        """
        if not isinstance(text, str):
            return self._error(f"text: expected a string, got {text!r}")
        return self._act({"type": "type", "text": text}, f"Typed {len(text)} characters.")

    def keys(self, keys: str) -> list[dict[str, Any]]:
        """Press a key or a key combination, e.g. "enter", "tab", "ctrl+c", "ctrl+a".

        Args:
            keys: key names joined by "+" (pyautogui names: ctrl, shift, alt, enter, tab,
                esc, backspace, delete, up, down, left, right, pageup, pagedown, a-z, ...).

        Returns:
            The screenshot after the key press and a short report.
        """
        if not isinstance(keys, str):
            return self._error(f"keys: expected a string such as 'ctrl+c', got {keys!r}")
        return self._act({"type": "keys", "keys": keys}, f"Pressed {keys}.")

    def scroll(self, x: int, y: int, direction: str, amount: int = 3) -> list[dict[str, Any]]:
        """Turn the mouse wheel with the pointer at a point of the screenshot.

        Args:
            x: the pixel column in the screenshot, from 0 (left edge) to {width_1} (right edge).
            y: the pixel row in the screenshot, from 0 (top edge) to {height_1} (bottom edge).
            direction: "up", "down", "left" or "right".
            amount: wheel notches, 1 to 50 (one notch scrolls about 100 screen pixels).

        Returns:
            The screenshot after scrolling and a short report.
        """
        try:
            point = self._screen_point(x, y)
            notches = _integer(amount, "amount")
        except ValueError as exc:
            return self._error(str(exc))
        action = {"type": "scroll", "x": point[0], "y": point[1]}
        action |= {"direction": direction, "amount": notches}
        return self._act(action, f"Scrolled {direction} by {notches} at ({x}, {y}).")

    def drag(self, x: int, y: int, end_x: int, end_y: int) -> list[dict[str, Any]]:
        """Press the left button at (x, y), move to (end_x, end_y) and release it.

        Args:
            x: the pixel column to press at, from 0 to {width_1}.
            y: the pixel row to press at, from 0 to {height_1}.
            end_x: the pixel column to release at, from 0 to {width_1}.
            end_y: the pixel row to release at, from 0 to {height_1}.

        Returns:
            The screenshot after the drag and a short report.
        """
        try:
            start = self._screen_point(x, y)
            end = self._screen_point(end_x, end_y, names=("end_x", "end_y"))
        except ValueError as exc:
            return self._error(str(exc))
        action = {"type": "drag", "x": start[0], "y": start[1], "end_x": end[0], "end_y": end[1]}
        return self._act(action, f"Dragged from ({x}, {y}) to ({end_x}, {end_y}).")

    def finish(self) -> list[dict[str, Any]]:
        """Declare the task done and end the episode (no more actions run after it).

        Returns:
            A short report.
        """
        return self._act({"type": "finish"}, "Finished.")

    # -- plumbing -----------------------------------------------------------------------------

    def _backend(self) -> EpisodeBackend:
        backend = self._holder["backend"]
        if backend is None:
            backend = self._holder["backend"] = _open_backend(self.config)
        return backend

    def _close(self) -> None:
        """Close this instance's session now (a later reset opens a new one)."""
        _close_backend(self._holder)

    def _pointer(self, kind: ActionType, x: Any, y: Any) -> list[dict[str, Any]]:
        try:
            sx, sy = self._screen_point(x, y)
        except ValueError as exc:
            return self._error(str(exc))
        return self._act({"type": kind.value, "x": sx, "y": sy}, f"{_verb(kind)} at ({x}, {y}).")

    def _screen_point(self, x: Any, y: Any, names: tuple[str, str] = ("x", "y")) -> tuple[int, int]:
        """Screenshot pixels -> screen pixels: the centre of the screen area the pixel covers."""
        width, height = self.config.screenshot_size
        point = []
        for name, value, size, screen in zip(
            names, (x, y), (width, height), (SCREEN_WIDTH, SCREEN_HEIGHT), strict=True
        ):
            v = _integer(value, name)
            if not 0 <= v < size:
                raise ValueError(
                    f"{name}: {v} is outside the {width}x{height} screenshot; use 0..{size - 1}"
                )
            point.append(min(screen - 1, int((v + 0.5) * screen / size)))
        return point[0], point[1]

    def _act(self, action: dict[str, Any], report: str) -> list[dict[str, Any]]:
        if self.ended is not None:
            return self._ended_report()
        self.steps += 1
        screenshot, reward, terminated, truncated, info = self._backend().step(action)
        self._reward += reward
        self.last_info = info
        self.is_success = bool(info.get("is_success", self.is_success))
        if info.get("invalid_action"):
            report = f"Error: {info['invalid_action']}"
        if terminated or truncated:
            self.ended = (
                "finish"
                if action["type"] == "finish"
                else (
                    "the task ended"
                    if terminated
                    else f"the session failed: {info.get('error', '?')}"
                )
            )
        elif self.steps >= self.config.max_steps:
            self.ended = f"the limit of {self.config.max_steps} actions"
        if self.ended is not None and action["type"] != "finish":
            report = report if report.endswith(".") else report + "."
            report += f" The episode has ended ({self.ended}): do not call more tools."
        self._screenshot = screenshot
        return self._observation(report)

    def _error(self, message: str) -> list[dict[str, Any]]:
        """A bad argument: the model reads why; it costs a step like an invalid action."""
        if self.ended is not None:
            return self._ended_report()
        self.steps += 1
        if self.steps >= self.config.max_steps:
            self.ended = f"the limit of {self.config.max_steps} actions"
            message = message if message.endswith(".") else message + "."
            message += f" The episode has ended ({self.ended}): do not call more tools."
        return self._observation(f"Error: {message}")

    def _observation(self, report: str) -> list[dict[str, Any]]:
        """The screen as it is now (unchanged after an error) and the report: every tool
        result shows the model a screenshot."""
        self.images_returned += 1
        return [
            {"type": "image", "image": self._image(self._screenshot)},
            {"type": "text", "text": report},
        ]

    def _ended_report(self) -> list[dict[str, Any]]:
        return self._observation(
            f"The episode has ended ({self.ended}); no action runs now. Stop calling tools."
        )

    def _image(self, screenshot: np.ndarray) -> Image.Image:
        image = Image.fromarray(screenshot)
        if image.size != self.config.screenshot_size:
            image = image.resize(self.config.screenshot_size, Image.Resampling.BILINEAR)
        return image


def _verb(kind: ActionType) -> str:
    return {
        ActionType.LEFT_CLICK: "Clicked",
        ActionType.DOUBLE_CLICK: "Double-clicked",
        ActionType.RIGHT_CLICK: "Right-clicked",
    }[kind]


def _integer(value: Any, name: str) -> int:
    """An integer argument; models write 12, 12.0 or "12"."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an integer, got {value!r}") from None
    if not math.isfinite(number) or number != int(number):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    return int(number)


# The tools' docstrings name the screenshot's frame; filled in per class.
_TOOLS = ("click", "double_click", "right_click", "type", "keys", "scroll", "drag", "finish")


def _tool_with_frame(method: Callable[..., Any], width: int, height: int) -> Callable[..., Any]:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def tool(self: UirlEnvironment, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        try:
            signature.bind(self, *args, **kwargs)
        except TypeError as exc:  # a wrong or missing argument name: the model reads why
            return self._error(f"{method.__name__}: {exc}")
        return method(self, *args, **kwargs)

    tool.__doc__ = (method.__doc__ or "").replace("{width_1}", str(width - 1))
    tool.__doc__ = tool.__doc__.replace("{height_1}", str(height - 1))
    return tool


def make_environment(
    task: str | Sequence[str] = "uirl/SimpleDataEntry-v0", **options: Any
) -> type[UirlEnvironment] | dict[str, type[UirlEnvironment]]:
    """The class TRL's ``environment_factory`` expects, for one task or several.

    Args:
        task: a task (``uirl/FormFill-v0`` or ``form_fill``): returns one class; a list
            of tasks: returns ``{env id: class}``, for a dataset whose ``environment``
            column picks each row's task.
        options: :class:`EnvironmentConfig` fields (``screenshot_size``, ``max_steps``,
            ``reward_mode``, ``split``, ``task_options``, ``runtime``, ``base_url``,
            ``openenv_url``, ``step_timeout_s``); ``runtime`` may also be the mapping of
            a ``RuntimeSettings`` (a YAML config's).

    Raises:
        ValueError: an unknown task or option, or a bad value.
    """
    if isinstance(options.get("runtime"), Mapping):  # from a YAML config (train_trl.py)
        # One settings object for every task's class: they share its runtime.
        options["runtime"] = RuntimeSettings(**options["runtime"])
    if not isinstance(task, str):
        return {
            TASKS[task_name(t)].env_id: make_environment(t, **options)  # type: ignore[misc]
            for t in task
        }
    known = set(EnvironmentConfig.__dataclass_fields__) - {"task"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; known: {sorted(known)}")
    config = EnvironmentConfig(task=task, **options)
    width, height = config.screenshot_size
    namespace: dict[str, Any] = {
        name: _tool_with_frame(getattr(UirlEnvironment, name), width, height) for name in _TOOLS
    }
    namespace["config"] = config
    namespace["__doc__"] = f"{TASKS[config.task].env_id} for TRL: {UirlEnvironment.__doc__}"
    class_name = "Uirl" + "".join(part.title() for part in config.task.split("_"))
    return type(class_name, (UirlEnvironment,), namespace)


def close_environments() -> int:
    """Close the session of every live environment instance; return how many were open.

    ``scripts/train_trl.py`` calls it when training ends (also after Ctrl-C); the
    instances' finalizers and the local runtime's exit handlers are the fallback.
    """
    with _LIVE_LOCK:
        instances = list(_LIVE)
    open_ = [i for i in instances if i._holder["backend"] is not None]
    for instance in open_:
        instance._close()
    return len(open_)


def log_episode_metrics(
    environments: Sequence[UirlEnvironment] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    **_: Any,
) -> list[float | None]:
    """A TRL reward function that scores nothing and logs the episodes' figures.

    Pass it in ``reward_funcs``: it logs ``uirl/success_rate``, ``uirl/steps`` and
    ``uirl/images`` (screenshots per episode) through TRL's ``log_metric``, and returns
    None for every rollout, so the reward stays the environment's own.
    """
    envs = [e for e in environments or () if isinstance(e, UirlEnvironment)]
    if envs and log_metric is not None:
        log_metric("uirl/success_rate", float(np.mean([e.is_success for e in envs])))
        log_metric("uirl/steps", float(np.mean([e.steps for e in envs])))
        log_metric("uirl/images", float(np.mean([e.images_returned for e in envs])))
    return [None] * len(environments or ())


def seed_dataset(
    num_rows: int,
    *,
    first_seed: int = 0,
    tasks: Sequence[str] | None = None,
    split: str = "train",
    options: Mapping[str, Any] | None = None,
    prompt: str = "",
) -> Any:
    """A ``datasets.Dataset`` of task instances: one row per seed.

    Args:
        num_rows: how many rows (seeds ``first_seed ..``).
        tasks: when given, rows cycle through them and carry an ``environment``
            column (the env id) for a ``dict`` factory from :func:`make_environment`.
        split: each row's ``split``.
        options: each row's task ``options``.
        prompt: text before the task's own (e.g. a system-style preamble); the row's
            user message, to which TRL appends the first screenshot and instruction.
    """
    from datasets import Dataset

    rows: dict[str, list[Any]] = {
        "prompt": [[{"role": "user", "content": prompt}] for _ in range(num_rows)],
        "seed": [first_seed + i for i in range(num_rows)],
        "split": [split] * num_rows,
    }
    if options:
        rows["options"] = [dict(options) for _ in range(num_rows)]
    if tasks:
        ids = [TASKS[task_name(t)].env_id for t in tasks]
        rows["environment"] = [ids[i % len(ids)] for i in range(num_rows)]
    return Dataset.from_dict(rows)
