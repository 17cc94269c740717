"""uirl tasks inside TRL's ``GRPOTrainer``: screenshots every turn, pixel actions as tools.

TRL (>= 1.16) runs multi-turn episodes through ``GRPOTrainer(environment_factory=...)``:
it makes one environment instance per rollout (pooled, reused across batches), calls
``reset(**row)`` with the dataset row, exposes the instance's public methods to the
model as tools, feeds the images that tools return to generation *and* to the training
forward pass, and scores each rollout with ``get_reward()``.
:func:`make_environment` returns such a class for a uirl task::

    from trl import GRPOConfig, GRPOTrainer
    from uirl_agents.integrations.trl import log_episode_metrics, make_environment, seed_dataset

    env_class = make_environment(
        "uirl/SimpleDataEntry-v0",
        max_steps=8,
        screenshot_size=(448, 280),        # Qwen2.5-VL: 162 tokens a screenshot
        processor=processor,               # counts tokens as TRL does
        max_completion_length=4096,        # the trainer's: the class refuses steps that do not fit
    )
    trainer = GRPOTrainer(
        model=model,                       # Qwen3-VL as it ships, or Qwen2.5-VL / UI-TARS-1.5
        processing_class=processor,        # through use_tool_chat_template()
        args=GRPOConfig(
            output_dir="runs/trl",
            max_completion_length=4096,
            generation_kwargs=env_class.generation_kwargs(),  # turn cap, vision tokens blocked
        ),
        train_dataset=seed_dataset(64),    # one row per task instance: seed, split, options
        reward_funcs=[log_episode_metrics],  # success rate, steps, trained screenshots
        environment_factory=env_class,
    )
    trainer.train()

The tools (one per env action): ``click``, ``double_click``, ``right_click``, ``type``,
``keys``, ``scroll``, ``drag``, ``finish``. Coordinates are pixels of the screenshot
the model sees (``screenshot_size``, (644, 392) by default: every screenshot stays in
TRL's context, so they are downscaled, to a size Qwen2.5-VL's processor keeps; with a
``processor`` the class takes the size the processor passes on) and are mapped to the
1280x800 screen once, here. Every tool call that acts returns the screenshot and a
short report (TRL 1.16 fails on a batch whose first tool round returns no image); a bad
argument, a wrong argument name included, is an error message to the model (with the
unchanged screen), never an exception, costs a step and pays the task's invalid-action
charge, as through gym and OpenEnv. The episode ends at ``finish``, the task's own end,
a failed session, ``max_steps`` tool calls, or the token budget; a tool called after
that only says so (text, no action, no screenshot).

**The token budget.** TRL keeps a rollout's turns and tool results in
``max_completion_length`` tokens, and drops a tool result that would overflow it (its
screenshot never trained, after the env acted). With ``processor`` and
``max_completion_length`` the class counts every result's tokens as TRL does (a
screenshot at 644x392 is 324 tokens for Qwen2.5-VL), allows each model turn
``turn_tokens`` (``generation_kwargs()`` caps generation there), refuses a
``max_steps`` that does not fit (naming the largest that does), and ends an episode
itself (truncated, the report says why) before a result could overflow. Session
failures are not the policy's: ``get_reward`` returns None for them, so TRL leaves
them out of their group's baseline and gives them no advantage.

Sessions: each instance holds one warm uirl session (``UIEnv``), reused across episodes
with in-session resets: the local runtime by default, any :class:`Runtime` (e.g.
``KubernetesRuntime``) given as ``runtime``, or a
:class:`~uirl_gym.make.RuntimeSettings` (the trainers' ``env.runtime``
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
from typing import Any, ClassVar, Literal, Protocol, cast

import numpy as np
from PIL import Image

from uirl_agents.formats.base import ScreenGeometry
from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, SCREEN_HEIGHT, SCREEN_WIDTH, ActionType
from uirl_gym.make import (
    RuntimeSettings,
    build_runtime,
    check_runtime,
    make_env,
    shared_runtime,
)
from uirl_gym.runtimes.base import Runtime
from uirl_gym.tasks import TASKS, task_spec

__all__ = [
    "EnvironmentConfig",
    "TokenBudget",
    "UirlEnvironment",
    "close_environments",
    "log_episode_metrics",
    "make_environment",
    "seed_dataset",
    "task_name",
]

logger = logging.getLogger(__name__)


# A tool result's report is cut to this many tokens, its end-of-episode notice
# included: the budget keeps room for one such result after every step.
REPORT_TOKENS = 64
# A model turn's tokens at most, by default (a tool call is ~30 tokens; a short thought
# before it fits too).
TURN_TOKENS = 128


@dataclass(frozen=True)
class TokenBudget:
    """A rollout's completion in tokens, as TRL fills it: model turns and tool results.

    TRL keeps every turn the model writes and every tool result (its screenshot
    expanded to the image's tokens) in ``max_completion_length`` tokens, and drops a
    result that would overflow them. Make it with :meth:`from_processor`.

    Attributes:
        max_completion_length: TRL's ``GRPOConfig.max_completion_length``.
        turn_tokens: a model turn's tokens at most (generation stops there:
            :meth:`UirlEnvironment.generation_kwargs`).
        screenshot_tokens: one screenshot's tokens, vision markers included.
        step_tokens: a step as the budget plans it: a turn and a result whose report is
            the longest a valid action gets.
        last_step_tokens: a turn, the largest result (a report of ``REPORT_TOKENS``) and
            the closing turn TRL generates after the last result (cut to fit, that turn
            would end without an end-of-turn token, and TRL's
            ``mask_truncated_completions`` would then mask the whole rollout).
        result_tokens: a result's tokens, as TRL counts them (``content``: its parts).
        report_tokens: a report's tokens on its own (at least its count in a result).
    """

    max_completion_length: int
    turn_tokens: int
    screenshot_tokens: int
    step_tokens: int
    last_step_tokens: int
    result_tokens: Callable[[list[dict[str, Any]]], int]
    report_tokens: Callable[[str], int]

    @classmethod
    def from_processor(
        cls,
        processor: Any,
        screenshot_size: tuple[int, int],
        max_completion_length: int,
        turn_tokens: int = TURN_TOKENS,
    ) -> TokenBudget:
        """Count with TRL's own rule: the tokens a tool result adds to the completion
        are the suffix TRL appends (``GRPOTrainer._get_tool_suffix_ids``, with the
        chat template TRL trains with)."""
        from types import SimpleNamespace

        from trl import GRPOTrainer
        from trl.chat_template_utils import (
            get_training_chat_template,
            is_chat_template_prefix_preserving,
        )

        tokenizer = getattr(processor, "tokenizer", processor)
        template = (
            None
            if is_chat_template_prefix_preserving(processor)
            else get_training_chat_template(processor)
        )
        trainer = SimpleNamespace(
            processing_class=processor,
            chat_template=template,
            chat_template_kwargs={},
            _is_vlm=True,
            _tokenizer=tokenizer,
        )

        def result_ids(content: list[dict[str, Any]]) -> list[int]:
            message = {"role": "tool", "name": "click", "content": content}
            # The attributes the method reads, without building a trainer (a model).
            return GRPOTrainer._get_tool_suffix_ids(cast(GRPOTrainer, trainer), [message])

        def result_tokens(content: list[dict[str, Any]]) -> int:
            return len(result_ids(content))

        def report_tokens(report: str) -> int:
            return len(tokenizer(report, add_special_tokens=False)["input_ids"])

        from uirl_agents.policies.hf import vision_token_ids

        image = Image.new("RGB", screenshot_size)
        bare_ids = result_ids([{"type": "image", "image": image}, {"type": "text", "text": ""}])
        bare = len(bare_ids)
        vision = vision_token_ids(None, tokenizer)
        width, height = screenshot_size
        longest_valid = f"Dragged from ({width - 1}, {height - 1}) to ({width - 1}, {height - 1})."
        return cls(
            max_completion_length=max_completion_length,
            turn_tokens=turn_tokens,
            screenshot_tokens=sum(i in vision for i in bare_ids),
            step_tokens=turn_tokens + bare + report_tokens(longest_valid),
            last_step_tokens=turn_tokens + bare + REPORT_TOKENS + turn_tokens,
            result_tokens=result_tokens,
            report_tokens=report_tokens,
        )

    def tokens_for(self, steps: int) -> int:
        """The completion tokens ``steps`` steps may take: ``steps - 1`` planned steps,
        and room for the largest result after the last and the closing turn."""
        return (steps - 1) * self.step_tokens + self.last_step_tokens

    def max_steps(self) -> int:
        """The most steps that fit ``max_completion_length`` (0: not even one)."""
        room = self.max_completion_length - self.last_step_tokens
        return 0 if room < 0 else room // self.step_tokens + 1

    def fit(self, report: str, ending: str = "") -> str:
        """``report + ending`` cut to ``REPORT_TOKENS`` tokens (``report`` is cut)."""
        text = report + ending
        while self.report_tokens(text) > REPORT_TOKENS and report:
            report = report[: max(len(report) - 8, 0)]
            text = report.rstrip() + "..." + ending
        return text


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
        step_timeout_s: how long one action may take (the env's default, 10 s).
        budget: the completion's token budget (:class:`TokenBudget`; None: not kept,
            and TRL may drop a result that overflows ``max_completion_length``).
    """

    task: str = "uirl/SimpleDataEntry-v0"
    # 23 x 14 patches of 28 px: Qwen2.5-VL's processor passes it on unchanged (640x400
    # became 644x392, and the tools would have named a frame the model did not see).
    screenshot_size: tuple[int, int] = (644, 392)
    max_steps: int = 10
    reward_mode: Literal["sparse", "dense"] = "sparse"
    split: str = "train"
    task_options: Mapping[str, Any] = field(default_factory=dict)
    runtime: Runtime | RuntimeSettings | None = None
    base_url: str | None = None
    openenv_url: str | None = None
    step_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S
    budget: TokenBudget | None = None

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
        b = self.budget
        if b is not None and b.tokens_for(self.max_steps) > b.max_completion_length:
            fits = b.max_steps()
            raise ValueError(
                f"max_steps {self.max_steps} does not fit max_completion_length "
                f"{b.max_completion_length}: a step takes up to {b.turn_tokens} tokens of "
                f"the model's turn and {b.step_tokens - b.turn_tokens} of a tool result "
                f"({b.screenshot_tokens} for the {width}x{height} screenshot), so "
                f"{self.max_steps} steps need {b.tokens_for(self.max_steps)} tokens; "
                + (
                    f"at most {fits} fit. Set max_steps <= {fits}, "
                    if fits
                    else "not even one fits. "
                )
                + f"max_completion_length >= {b.tokens_for(self.max_steps)}, a smaller "
                "screenshot_size or fewer turn_tokens"
            )


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


class _EnvBackend:
    """The instance's env, from :func:`uirl_gym.make.make_env`: a ``UIEnv`` on the local
    runtime, a shared runtime or a URL, or an ``OpenEnvEnv`` on an OpenEnv server.

    On the local runtime (the default) the instance owns its runtime, and its session
    starts in the background as soon as the instance exists: TRL makes a batch's
    instances one after another and then resets them one after another, so the
    sessions' cold starts (~1 s each) overlap instead of adding up.
    """

    def __init__(self, config: EnvironmentConfig) -> None:
        settings, runtime = RuntimeSettings(), config.runtime
        self._owned_runtime: Runtime | None = None
        self._warming: threading.Thread | None = None
        if config.openenv_url:
            settings, runtime = RuntimeSettings("openenv", openenv_url=config.openenv_url), None
        elif isinstance(runtime, RuntimeSettings):
            settings = runtime
            runtime = None
            if settings.runtime != "local":
                runtime = shared_runtime(settings, rank=_rank(), world_size=_world_size())
        if settings.runtime == "local" and runtime is None and config.base_url is None:
            runtime = self._owned_runtime = build_runtime(settings, task=config.task)
            self._warming = threading.Thread(target=self._warm, name="uirl-warm", daemon=True)
            self._warming.start()
        env_kwargs: dict[str, Any] = {
            "task": config.task,
            "split": config.split,
            "reward_mode": config.reward_mode,
            "step_timeout_s": config.step_timeout_s,
        }
        if config.base_url is not None:
            env_kwargs["base_url"] = config.base_url
        self.env = make_env(settings, runtime=runtime, **env_kwargs)

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


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _open_backend(config: EnvironmentConfig) -> EpisodeBackend:
    return _EnvBackend(config)


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
            reset's and one per step (each one is an image row in TRL's training
            batch; a call after the end returns text only).
        ended: why the last episode ended (None while it runs).
        session_error: the session failure that ended the last episode, if any (then
            :meth:`get_reward` is None: the episode is no evidence about the policy).
        tokens_used: the completion tokens the last episode may have taken so far
            (with a budget: each step's turn at ``turn_tokens``, each result as TRL
            counts it).
    """

    config: ClassVar[EnvironmentConfig] = EnvironmentConfig()
    # The processor's vision special tokens (make_environment with a processor).
    _vision_ids: ClassVar[frozenset[int] | None] = None

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
        self.session_error: str | None = None
        self.tokens_used = 0
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
        self.session_error = None
        self.tokens_used = 0
        self.last_info = info
        width, height = self.config.screenshot_size
        text = (
            f"{instruction}\n\nThe screenshot is {width}x{height} pixels; (0, 0) is its top-left "
            f"corner. Act with the tools, at most {self.config.max_steps} actions; call finish "
            "when the task is done."
        )
        return [{"type": "image", "image": self._image(screenshot)}, {"type": "text", "text": text}]

    def get_reward(self) -> float | None:
        """The episode's reward: the sum of the task's rewards over its steps; None when
        its session failed (TRL then leaves the rollout out of its group's baseline and
        gives it no advantage: the env, not the policy, ended it)."""
        return None if self.session_error is not None else self._reward

    @classmethod
    def generation_kwargs(cls, *, use_vllm: bool = False) -> dict[str, Any]:
        """``GRPOConfig.generation_kwargs`` for this class: each model turn capped at the
        budget's ``turn_tokens`` (the budget counts on it), and the vision special
        tokens blocked (a generated ``<|image_pad|>`` makes TRL drop the batch's
        ``pixel_values`` or stop with a mismatch). HF ``generate``: ``max_new_tokens``
        and ``suppress_tokens``; vLLM: ``max_tokens`` and ``logit_bias`` -100.

        Raises:
            ValueError: the class has no budget (make it with ``processor`` and
                ``max_completion_length``).
        """
        from uirl_agents.policies.hf import BLOCKED_LOGIT_BIAS

        budget = cls.config.budget
        if budget is None or cls._vision_ids is None:
            raise ValueError(
                "generation_kwargs needs the class's token budget: make_environment(..., "
                "processor=processor, max_completion_length=...)"
            )
        blocked = sorted(cls._vision_ids)
        if use_vllm:
            return {
                "max_tokens": budget.turn_tokens,
                "logit_bias": {i: BLOCKED_LOGIT_BIAS for i in blocked},
            }
        return {"max_new_tokens": budget.turn_tokens, "suppress_tokens": blocked}

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
        """Screenshot pixels -> screen pixels: the formats' one mapping (the screen pixel
        under the centre of the screenshot's)."""
        width, height = self.config.screenshot_size
        point = []
        for name, value, size in zip(names, (x, y), (width, height), strict=True):
            v = _integer(value, name)
            if not 0 <= v < size:
                raise ValueError(
                    f"{name}: {v} is outside the {width}x{height} screenshot; use 0..{size - 1}"
                )
            point.append(v)
        return ScreenGeometry(SCREEN_WIDTH, SCREEN_HEIGHT, width, height).to_screen(*point)

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
            if action["type"] == "finish":
                self.ended = "finish"
            elif terminated:
                self.ended = "the task ended"
            else:
                self.session_error = str(info.get("error", "?"))
                self.ended = f"the session failed: {self.session_error}"
        self._screenshot = screenshot
        return self._result(report)

    def _error(self, message: str) -> list[dict[str, Any]]:
        """A bad argument: the model reads why; it costs a step and the task's
        invalid-action charge, as the same mistake does through gym and OpenEnv (the env
        is handed an action it refuses, so the charge is the env's own)."""
        if self.ended is not None:
            return self._ended_report()
        self.steps += 1
        _, reward, _, _, info = self._backend().step(REFUSED_ACTION)
        self._reward += reward
        self.last_info = info
        return self._result(f"Error: {message}")

    def _result(self, report: str) -> list[dict[str, Any]]:
        """A step's tool result: the screen as it is now (unchanged after an error) and
        the report, which says so when the episode has ended: at ``max_steps``, or, with
        a budget, when one more turn and result might not fit the completion (TRL
        would drop that result after the env had acted)."""
        if self.ended is None and self.steps >= self.config.max_steps:
            self.ended = f"the limit of {self.config.max_steps} actions"
        budget = self.config.budget
        if self.ended is None and budget is not None:
            left = budget.max_completion_length - self.tokens_used
            if budget.turn_tokens + self._tokens_of(report) + budget.last_step_tokens > left:
                self.ended = f"the budget of {budget.max_completion_length} completion tokens"
        ending = ""
        if self.ended is not None and self.ended != "finish":
            report = report if report.endswith(".") else report + "."
            ending = f" The episode has ended ({self.ended}): do not call more tools."
        content = self._content(report, ending)
        if budget is not None:
            self.tokens_used += budget.turn_tokens + budget.result_tokens(content)
        self.images_returned += 1
        return content

    def _content(self, report: str, ending: str = "") -> list[dict[str, Any]]:
        budget = self.config.budget
        text = report + ending if budget is None else budget.fit(report, ending)
        return [
            {"type": "image", "image": self._image(self._screenshot)},
            {"type": "text", "text": text},
        ]

    def _tokens_of(self, report: str) -> int:
        assert self.config.budget is not None
        return self.config.budget.result_tokens(self._content(report))

    def _ended_report(self) -> list[dict[str, Any]]:
        """A call after the end: text only (no action ran, and a screenshot would cost
        the completion's tokens for nothing)."""
        return [
            {
                "type": "text",
                "text": f"The episode has ended ({self.ended}); no action runs now. "
                "Stop calling tools.",
            }
        ]

    def _image(self, screenshot: np.ndarray) -> Image.Image:
        image = Image.fromarray(screenshot)
        if image.size != self.config.screenshot_size:
            image = image.resize(self.config.screenshot_size, Image.Resampling.BILINEAR)
        return image


# An action every env refuses (a click without a point): a tool argument the model got
# wrong is charged the env's invalid-action penalty through it.
REFUSED_ACTION: dict[str, Any] = {"type": ActionType.LEFT_CLICK.value}


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
    task: str | Sequence[str] = "uirl/SimpleDataEntry-v0",
    *,
    processor: Any = None,
    max_completion_length: int | None = None,
    turn_tokens: int = TURN_TOKENS,
    **options: Any,
) -> type[UirlEnvironment] | dict[str, type[UirlEnvironment]]:
    """The class TRL's ``environment_factory`` expects, for one task or several.

    Args:
        task: a task (``uirl/FormFill-v0`` or ``form_fill``): returns one class; a list
            of tasks: returns ``{env id: class}``, for a dataset whose ``environment``
            column picks each row's task.
        processor: the model's processor. The screenshots are sized as it passes them
            to the model (the tools state that frame), and with ``max_completion_length``
            the class keeps the token budget (:class:`TokenBudget`).
        max_completion_length: the trainer's ``GRPOConfig.max_completion_length``.
        turn_tokens: a model turn's tokens at most (set
            ``GRPOConfig.generation_kwargs`` to the class's ``generation_kwargs()``).
        options: :class:`EnvironmentConfig` fields (``screenshot_size``, ``max_steps``,
            ``reward_mode``, ``split``, ``task_options``, ``runtime``, ``base_url``,
            ``openenv_url``, ``step_timeout_s``); ``runtime`` may also be the mapping of
            a ``RuntimeSettings`` (a YAML config's).

    Raises:
        ValueError: an unknown task or option, a bad value, ``max_completion_length``
            without ``processor``, or ``max_steps`` steps that do not fit the budget (the
            message names the largest ``max_steps`` that does).
    """
    if isinstance(options.get("runtime"), Mapping):  # from a YAML config (train_trl.py)
        # One settings object for every task's class: they share its runtime.
        options["runtime"] = RuntimeSettings(**options["runtime"])
    if isinstance(task, str):
        return _environment_class(task, processor, max_completion_length, turn_tokens, options)
    return {
        TASKS[task_name(t)].env_id: _environment_class(
            t, processor, max_completion_length, turn_tokens, dict(options)
        )
        for t in task
    }


def _environment_class(
    task: str,
    processor: Any,
    max_completion_length: int | None,
    turn_tokens: int,
    options: dict[str, Any],
) -> type[UirlEnvironment]:
    """:func:`make_environment` for one task; ``options`` is its own (filled in here)."""
    known = set(EnvironmentConfig.__dataclass_fields__) - {"task", "budget"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; known: {sorted(known)}")
    vision_ids = None
    if processor is not None:
        from uirl_agents.policies.hf import vision_token_ids

        size = options.get("screenshot_size", EnvironmentConfig.screenshot_size)
        options["screenshot_size"] = processor_frame(processor, tuple(size))
        vision_ids = vision_token_ids(None, getattr(processor, "tokenizer", processor))
    if max_completion_length is not None:
        if processor is None:
            raise ValueError(
                "max_completion_length: the budget counts tokens with the model's processor; "
                "give processor= too"
            )
        if turn_tokens < 1:
            raise ValueError(f"turn_tokens: expected >= 1, got {turn_tokens}")
        options["budget"] = TokenBudget.from_processor(
            processor, options["screenshot_size"], max_completion_length, turn_tokens
        )
    else:
        logger.info(
            "make_environment without max_completion_length: no token budget is kept, and "
            "TRL drops any tool result that overflows its completion budget"
        )
    config = EnvironmentConfig(task=task, **options)
    width, height = config.screenshot_size
    namespace: dict[str, Any] = {
        name: _tool_with_frame(getattr(UirlEnvironment, name), width, height) for name in _TOOLS
    }
    namespace["config"] = config
    namespace["_vision_ids"] = vision_ids
    namespace["__doc__"] = f"{TASKS[config.task].env_id} for TRL: {UirlEnvironment.__doc__}"
    class_name = "Uirl" + "".join(part.title() for part in config.task.split("_"))
    return type(class_name, (UirlEnvironment,), namespace)


def processor_frame(processor: Any, size: tuple[int, int]) -> tuple[int, int]:
    """The (width, height) a screenshot of ``size`` reaches the model at: Qwen-style
    processors resize to whole patches (Qwen2.5-VL: multiples of 28, so 640x400 becomes
    644x392; Qwen3-VL: of 32) within their pixel limits. Other processors: ``size``."""
    image_processor = getattr(processor, "image_processor", None)
    if image_processor is None:
        return size
    out = image_processor(images=[Image.new("RGB", size)], return_tensors="np")
    grid, patch = out.get("image_grid_thw"), getattr(image_processor, "patch_size", None)
    if grid is None or patch is None:
        return size
    frame = (int(grid[0][2]) * patch, int(grid[0][1]) * patch)
    if frame != tuple(size):
        logger.info(
            "screenshot_size %s -> %s: the size the processor passes to the model", size, frame
        )
    return frame


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
    completions: Sequence[Any] | None = None,
    **_: Any,
) -> list[float | None]:
    """A TRL reward function that scores nothing and logs the episodes' figures.

    Pass it in ``reward_funcs``: it returns None for every rollout, so the reward stays
    the environment's own, and logs through TRL's ``log_metric``, as means per episode:
    ``uirl/success_rate``, ``uirl/steps``, ``uirl/images`` (screenshots in the training
    batch: the reset's and the tool results TRL kept), ``uirl/images_dropped`` (the
    env's screenshots TRL left out because they overflowed ``max_completion_length``:
    0 with a token budget; a warning says otherwise), ``uirl/budget_ends`` (episodes
    the budget ended) and ``uirl/session_failures`` (episodes a failed session ended:
    left out of the update).
    """
    envs = [e for e in environments or () if isinstance(e, UirlEnvironment)]
    if envs and log_metric is not None:
        log_metric("uirl/success_rate", float(np.mean([e.is_success for e in envs])))
        log_metric("uirl/steps", float(np.mean([e.steps for e in envs])))
        log_metric(
            "uirl/session_failures", float(np.mean([e.session_error is not None for e in envs]))
        )
        log_metric("uirl/budget_ends", float(np.mean([_budget_ended(e) for e in envs])))
        if completions is not None:
            trained = [1 + _tool_images(c) for c in completions]
            dropped = sum(
                max(e.images_returned - n, 0) for e, n in zip(envs, trained, strict=False)
            )
            log_metric("uirl/images", float(np.mean(trained)))
            log_metric("uirl/images_dropped", dropped / len(envs))
            if dropped:
                logger.warning(
                    "TRL dropped %d screenshot(s) of %d rollouts (tool results past "
                    "max_completion_length): give make_environment processor= and "
                    "max_completion_length= so that episodes end before",
                    dropped,
                    len(envs),
                )
        else:
            log_metric("uirl/images", float(np.mean([e.images_returned for e in envs])))
    return [None] * len(environments or ())


def _tool_images(completion: Any) -> int:
    """Screenshots in a rollout's completion (the tool results TRL kept)."""
    if not isinstance(completion, list):
        return 0
    images = 0
    for message in completion:
        if not (isinstance(message, dict) and message.get("role") == "tool"):
            continue
        content = message.get("content")
        if isinstance(content, list):
            images += sum(
                isinstance(part, dict) and part.get("type") == "image" for part in content
            )
    return images


def _budget_ended(env: UirlEnvironment) -> bool:
    return env.ended is not None and env.ended.startswith("the budget")


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
