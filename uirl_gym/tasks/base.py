"""The task contract: what the session server needs from a task.

A task owns its episode state (data, targets, the record of what was done), renders
its web app, and reports progress from its own record, never from pixels. The session
server is task-agnostic: it serves :meth:`Task.page_html` at ``/task/app`` and the page
bridge every app loads at ``/task/uirl.js`` (:func:`bridge_script`), hands the events
the app records with ``await uirl.record(event)`` (an in-browser binding, not an HTTP
route, so no one outside the browser can fake a submission) to
:meth:`Task.handle_event`, and answers ``/progress`` with :meth:`Task.progress` (to the
holder of the session token; others get :meth:`Task.public_progress`).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeGuard
from urllib.parse import urlencode

from uirl_gym.actions import DEFAULT_SCREEN
from uirl_gym.protocol import Route


class TaskOptionsError(ValueError):
    """The reset options are not valid for this task."""


@dataclass(frozen=True)
class Dialog:
    """A JavaScript dialog the app's page opened, as the page showed it.

    Attributes:
        type: ``alert``, ``confirm``, ``prompt`` or ``beforeunload`` (the page asked
            before it is left).
        message: its text (a ``beforeunload`` prompt's is the browser's own: pages
            cannot set it).
        default_prompt: a ``prompt``'s default answer (its text field's first value).
        url: the page that opened it.
    """

    type: str
    message: str
    default_prompt: str = ""
    url: str = ""


@dataclass(frozen=True)
class DialogAnswer:
    """How a dialog is closed: OK (``accept``: ``confirm`` returns true, ``prompt``
    returns ``prompt_text``, a page being left goes) or Cancel (``confirm`` returns
    false, ``prompt`` null, the page stays). ``prompt_text`` None: the prompt's
    default answer."""

    accept: bool
    prompt_text: str | None = None


ACCEPT = DialogAnswer(accept=True)
DISMISS = DialogAnswer(accept=False)


@dataclass(frozen=True)
class TaskSpec:
    """What the server and the env need to know about a task: a task package exports
    one as ``TASK_SPEC`` (a task family: a function returning a list of them), and the
    registry (:mod:`uirl_gym.tasks`) finds it there or through the ``uirl.tasks`` entry
    point group of any installed package.

    Attributes:
        name: the task id (``LocalRuntimeConfig.task``, the server's ``--task``).
        env_id: its Gymnasium id.
        task: a new server-side task object.
        rewards: the task's reward config class (default values when called bare).
        scorer: ``scorer(first_progress, rewards)``: one episode's scorer.
        check_options: refuses reset options before any round trip (``ValueError``).
        expert: ``expert(**options)``: a scripted expert, with ``reset()`` and
            ``next_action(oracle) -> Action`` (it reads ``/oracle``, acts through
            agent actions only).
        nondeterministic: the same seed may not give the same episode (Gymnasium's
            ``EnvSpec.nondeterministic``; some MiniWoB++ pages).
        family: the task family it belongs to (``"miniwob"``), None for a single task.
        doc: the task's docs page (Markdown; its package docstring), which
            ``scripts/gen_task_docs.py`` writes to ``docs/tasks/<name>.md``; None for a
            family's tasks (the family has one page).
    """

    name: str
    env_id: str
    task: Callable[[], Task]
    rewards: Callable[[], Any]
    scorer: Callable[[Mapping[str, Any], Any], EpisodeScorer]
    check_options: Callable[[Mapping[str, Any]], None]
    expert: Callable[..., Any]
    nondeterministic: bool = False
    family: str | None = None
    doc: str | None = None


class Task(abc.ABC):
    """One kind of task, with the state of its current episode.

    Attributes:
        name: the task's id, e.g. ``simple_data_entry``.
        episode_id: increases with every reset; events from older episodes are ignored.
        screen: the episode's screen (width, height), set by the server before ``reset``.
    """

    name: str
    episode_id: int = 0
    screen: tuple[int, int] = DEFAULT_SCREEN
    # The keys of :meth:`progress` that anyone may read (``/progress`` and ``X-Progress``
    # without the session token): counts that say nothing about which answer is right,
    # so that an agent that can make HTTP calls cannot test guesses through them. The
    # rest (what matched, which goal is met) is for the env, which holds the token.
    public_progress_keys: frozenset[str] = frozenset({"episode"})

    @abc.abstractmethod
    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        """Start a new episode.

        Returns:
            ``{"instruction": str, "app_state": dict}``: the text for the agent and
            the JSON the web app renders (passed to the page's ``uirl.onLoad``
            handler); optional
            ``"page_scale"`` (float, default 1): the browser zooms the page by it (pinch
            zoom: the page's layout is untouched, screen pixels map to page pixels
            divided by it); optional ``"in_page"`` (bool, default False): the page may
            start this episode where the last one ran (``uirlLoad`` again, no fresh
            page) when it holds this task's app at this screen size.

        Raises:
            TaskOptionsError: unknown or invalid options.
        """

    def page_html(self) -> str:
        """The web app's page: static, the episode's data arrives via ``uirl.onLoad``.

        Default: ``static/app.html`` next to the task's module.
        """
        return _static_page(type(self).__module__.rpartition(".")[0])

    def app_path(self) -> str:
        """The app page's path and query on the session server (default: ``/task/app``,
        which serves :meth:`page_html`). A task whose page loads files by relative URL
        (MiniWoB++) serves it from ``/task/files/<task>/...`` instead (:meth:`file`)."""
        return f"{Route.TASK_APP}?{urlencode({'task': self.name})}"

    def file(self, path: str) -> tuple[bytes, str]:
        """A file of the app under ``/task/files/<task>/<path>``: ``(body, media type)``.

        Raises:
            FileNotFoundError: no such file (the default: a task serves no files).
        """
        raise FileNotFoundError(path)

    def page_loaded(self, result: Any, instruction: str) -> str:
        """The episode's page has rendered; ``result`` is what its ``uirlLoad`` returned
        (its ``uirl.onLoad`` handler's value, JSON; null for most apps). Returns the episode's instruction: ``instruction``
        (what :meth:`reset` gave) unless the page writes its own (MiniWoB++)."""
        return instruction

    def answer_dialog(self, dialog: Dialog) -> DialogAnswer:
        """How a JavaScript dialog the app opened is answered (``alert``, ``confirm``,
        ``prompt``, a ``beforeunload`` prompt): the page is frozen until it is, and a
        headless browser shows none, so the server answers each at once, as this says.
        ``dialog`` is what the page showed; a task that scores it keeps it in its record.

        Default: :data:`ACCEPT` (OK, as the agent that clicked meant): ``confirm``
        returns true, ``prompt`` its default answer, a page being left goes.
        """
        return ACCEPT

    @abc.abstractmethod
    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Record an event from the web app's ``window.uirlRecord`` (e.g. a submission).

        Raises:
            ValueError: a malformed event (the app's call rejects with the message).
        """

    @abc.abstractmethod
    def progress(self) -> dict[str, Any]:
        """The task's record of the episode so far (JSON)."""

    def public_progress(self) -> dict[str, Any]:
        """What :meth:`progress` shows to a request without the session token."""
        return {k: v for k, v in self.progress().items() if k in self.public_progress_keys}

    @abc.abstractmethod
    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        """Privileged state for scripted experts and tests.

        Args:
            page_state: what the app's ``uirl.onInspect`` handler returned (element
                boxes, values).
        """


# Where the session server serves the page bridge (what every app's <script src> names).
BRIDGE_PATH = "/task/uirl.js"


@functools.cache
def bridge_script() -> str:
    """The page bridge every task app loads from ``/task/uirl.js`` (``static/uirl.js``):
    ``uirl.onLoad``, ``uirl.record``, ``uirl.onInspect``, ``uirl.box`` (docs/tasks.md)."""
    return resources.files(__package__).joinpath("static/uirl.js").read_text("utf-8")


@functools.cache
def _static_page(package: str) -> str:
    return resources.files(package).joinpath("static/app.html").read_text("utf-8")


def check_option_names(options: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Raises ``TaskOptionsError`` naming the options not in ``allowed``."""
    unknown = set(options) - allowed
    if unknown:
        raise TaskOptionsError(f"unknown option(s) {sorted(unknown)}; allowed: {sorted(allowed)}")


def is_int(value: Any) -> TypeGuard[int]:
    """An integer that is not a bool (JSON's ``true`` arrives as ``True``, an ``int``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def int_option(options: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """``options[name]`` (or ``default``), an integer in ``low..high`` (``TaskOptionsError``)."""
    value = options.get(name, default)
    if not is_int(value) or not low <= value <= high:
        raise TaskOptionsError(f"{name}: must be an integer in {low}..{high}, got {value!r}")
    return value


class EpisodeScorer(abc.ABC):
    """One episode's rewards and success, from the task's record: the env asks it, so
    that the env itself holds no task-specific rule.

    It runs in the env (client side) on the JSON the session returns: ``/progress``
    after every action and, for dense shaping, ``/oracle``. A task's scorer is made at
    reset from the first ``/progress`` and the task's reward config (which has an
    ``invalid_action`` charge: the env pays it for refused actions).
    """

    def reset_info(self) -> dict[str, Any]:
        """Extra keys for ``reset``'s info (e.g. what the episode asks for)."""
        return {}

    @abc.abstractmethod
    def reward(self, progress: Mapping[str, Any]) -> float:
        """The sparse reward for what the record gained since the last call."""

    @abc.abstractmethod
    def potential(self, oracle: Mapping[str, Any]) -> float:
        """Dense mode: the shaping potential of the current state (the reward adds its
        change over each step)."""

    @property
    @abc.abstractmethod
    def done(self) -> bool:
        """Every goal of the episode is reached: the episode terminates."""

    @abc.abstractmethod
    def status(self) -> dict[str, Any]:
        """Keys for every step's info: ``is_success`` and the task's own counts."""


class RecordScoreScorer(EpisodeScorer):
    """A scorer whose sparse reward is the change of a score of the record since the
    last call, so undoing a mistake refunds its charge and the episode's return is the
    final record's score less the first one's.

    A task gives :meth:`read` (take what the score needs from ``/progress``) and
    :meth:`score`; this class keeps the last score.
    """

    def __init__(self, progress: Mapping[str, Any], rewards: Any) -> None:
        self.rewards = rewards
        self.read(progress)
        self._score = self.score()

    @abc.abstractmethod
    def read(self, progress: Mapping[str, Any]) -> None:
        """Take the counts the score needs from ``progress`` (the record)."""

    @abc.abstractmethod
    def score(self) -> float:
        """The score of the record last read."""

    def reward(self, progress: Mapping[str, Any]) -> float:
        """The change of the record's score since the last call."""
        self.read(progress)
        score = self.score()
        reward, self._score = score - self._score, score
        return reward


class GoalsScorer(RecordScoreScorer):
    """The score of a record that lists goals: ``correct_goal`` per goal met minus
    ``stray_change`` per change nobody asked for (``/progress`` gives ``goals``, ``met``
    per goal and ``num_stray``); done when every goal is met, a success when also no
    stray change is left. A task gives :meth:`potential`.
    """

    def __init__(self, progress: Mapping[str, Any], rewards: Any) -> None:
        self.goals: list[str] = list(progress["goals"])
        self.num_met = 0
        self.num_stray = 0
        super().__init__(progress, rewards)

    def read(self, progress: Mapping[str, Any]) -> None:
        self.num_met = sum(progress["met"])
        self.num_stray = progress["num_stray"]

    def score(self) -> float:
        return self.rewards.correct_goal * self.num_met - self.rewards.stray_change * self.num_stray

    def reset_info(self) -> dict[str, Any]:
        return {"goals": list(self.goals)}

    @property
    def done(self) -> bool:
        return self.num_met == len(self.goals)

    def status(self) -> dict[str, Any]:
        return {
            "is_success": self.done and self.num_stray == 0,
            "num_met": self.num_met,
            "num_stray": self.num_stray,
        }
