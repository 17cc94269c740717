"""One MiniWoB++ task, served from the installed wheel, scored by the page itself.

The page: the wheel's own HTML (``miniwob/<task>.html``, FlightWoB's
``flight/<site>/wrapper.html``), served at ``/task/files/miniwob.<task>/...`` so that its
relative URLs (``../core/core.js``) resolve to the wheel's files, with uirl's page
bridge (``/task/uirl.js``, as every task app) and the MiniWoB++ page script built on it
(``static/miniwob.js``, ``static/miniwob.css``) added to its head. The script seeds the
page (``Math.seedrandom(seed)``), sets the data mode, calls ``core.startEpisodeReal()``
(what the ``miniwob`` package's env does), hides the START cover, the reward display
and the click canvas, and reports ``core.endEpisode``'s reward
(``WOB_RAW_REWARD_GLOBAL``, ``WOB_REWARD_GLOBAL``) with ``uirl.record``.

The screen: the task area (160x210 page pixels; FlightWoB 540x667) at the top-left,
zoomed by an integer (pinch zoom: the page's own layout and events are untouched), so a
page pixel is exactly ``zoom`` x ``zoom`` screen pixels; default: the largest zoom that
fits the episode's screen (1280x800: 3, 480x630; a 160x210 screen: 1, the task area and
nothing else, as the ``miniwob`` package's env sees it).

Episodes after the first: the page restarts in place, as the ``miniwob`` package's env
does (``uirlLoad`` again: the seed, then ``core.startEpisodeReal()``), for
the tasks whose restarted page shows the same screen as a fresh one for a seed
(``MiniWobInfo.restarts_in_page``); the others get a fresh page per episode.

Options (reset ``options``; docs/tasks.md, MiniWoB++):
    reward: ``"raw"`` (default: the page's reward, partial credit included, no time
        penalty), ``"binary"`` (1 when the raw reward reaches ``success_threshold``,
        else -1: the wheel's ``get_thresholded_reward``) or ``"time_discounted"`` (the
        page's own reward, scaled by the time left of its ``EPISODE_MAX_TIME``, as
        MiniWoB++ reports it).
    success_threshold: the raw reward that counts as a success (default 1.0).
    data_mode: ``"train"`` or ``"test"`` (the pages that have two distributions); default:
        ``"test"`` for a seed of the test split, else ``"train"``.
    time_limit_s: end the episode (reward -1, "timed out") after this many seconds of
        wall clock, as MiniWoB++ does after 10 s; default None: no time limit.
    zoom: screen pixels per page pixel (1 .. the largest that fits).

The record (``/progress``): ``done``, ``raw_reward`` and ``reward`` (per the ``reward``
option; None until done), ``reason``, the options that scoring needs.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from uirl_gym.actions import DEFAULT_SCREEN
from uirl_gym.tasks.base import BRIDGE_PATH, Task, TaskOptionsError, check_option_names
from uirl_gym.tasks.miniwob.wheel import PREFIX, MiniWobInfo, html_root, miniwob_tasks

REWARD_KINDS: tuple[str, ...] = ("raw", "binary", "time_discounted")
DATA_MODES = ("train", "test")
OPTION_NAMES = frozenset({"reward", "success_threshold", "data_mode", "time_limit_s", "zoom"})
MAX_TIME_LIMIT_S = 3600.0
# Seeds from here on are the test split's (uirl_gym.tasks.SPLITS; not imported: cycle).
TEST_SEEDS_START = 2**31


def max_zoom(size: tuple[int, int], screen: tuple[int, int] = DEFAULT_SCREEN) -> int:
    """The largest integer zoom at which a task area of ``size`` fits ``screen`` (1 when
    even that does not fit: the task area is then cut at the screen's edge)."""
    return max(1, min(screen[0] // size[0], screen[1] // size[1]))


@dataclass(frozen=True)
class Options:
    """An episode's options (see the module docstring)."""

    reward: str = "raw"
    success_threshold: float = 1.0
    data_mode: str | None = None
    time_limit_s: float | None = None
    zoom: int | None = None


def parse_options(
    options: Mapping[str, Any],
    info: MiniWobInfo | None = None,
    screen: tuple[int, int] = DEFAULT_SCREEN,
) -> Options:
    """Checked reset options (``zoom`` against ``screen``, the episode's).

    Raises:
        TaskOptionsError: an unknown option, or a value of the wrong type or range.
    """
    check_option_names(options, OPTION_NAMES)
    reward = options.get("reward", "raw")
    if reward not in REWARD_KINDS:
        raise TaskOptionsError(f"reward: expected one of {list(REWARD_KINDS)}, got {reward!r}")
    threshold = options.get("success_threshold", 1.0)
    if not _is_number(threshold) or not 0 < threshold <= 1:
        raise TaskOptionsError(f"success_threshold: expected a number in (0, 1], got {threshold!r}")
    data_mode = options.get("data_mode")
    if data_mode is not None and data_mode not in DATA_MODES:
        raise TaskOptionsError(f"data_mode: expected 'train', 'test' or null, got {data_mode!r}")
    limit = options.get("time_limit_s")
    if limit is not None and (not _is_number(limit) or not 0 < limit <= MAX_TIME_LIMIT_S):
        raise TaskOptionsError(
            f"time_limit_s: expected null (no limit) or seconds in (0, {MAX_TIME_LIMIT_S:g}], "
            f"got {limit!r}"
        )
    zoom = options.get("zoom")
    highest = max_zoom(info.size if info is not None else (160, 210), screen)
    if zoom is not None and (
        isinstance(zoom, bool) or not isinstance(zoom, int) or not 1 <= zoom <= highest
    ):
        raise TaskOptionsError(
            f"zoom: expected an integer in 1..{highest} (the task area must fit the "
            f"{screen[0]}x{screen[1]} screen), got {zoom!r}"
        )
    return Options(reward, float(threshold), data_mode, limit, zoom)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@cache
def _head() -> str:
    """What the page's head gets: uirl's bridge, then the MiniWoB++ script on it."""
    static = resources.files(__package__).joinpath("static")
    css = static.joinpath("miniwob.css").read_text("utf-8")
    js = static.joinpath("miniwob.js").read_text("utf-8")
    return f'<style>{css}</style>\n<script src="{BRIDGE_PATH}"></script>\n<script>{js}</script>\n'


def episode_reward(
    kind: str, raw: float | None, discounted: float | None, threshold: float
) -> float:
    """The reward an ended episode pays under reward kind ``kind``."""
    raw = raw or 0.0
    if kind == "binary":
        return 1.0 if raw >= threshold else -1.0
    if kind == "time_discounted":
        return discounted or 0.0
    return raw


class MiniWobTask(Task):
    """One MiniWoB++ task (see the module docstring)."""

    public_progress_keys = frozenset({"episode"})

    def __init__(self, subdomain: str) -> None:
        self.name = PREFIX + subdomain
        self.info = miniwob_tasks()[self.name]
        self.options = Options()
        self.seed: int | None = None
        self._clear()

    def _clear(self) -> None:
        self.done = False
        self.raw_reward: float | None = None
        self.discounted_reward: float | None = None
        self.reason: str | None = None
        self.utterance = ""
        self.fields: dict[str, Any] | None = None

    # -- the page --------------------------------------------------------------------

    def app_path(self) -> str:
        return f"/task/files/{quote(self.name)}/{self.info.page}"

    def page_html(self) -> str:
        # Also at /task/app, but only app_path's URL resolves the page's relative URLs.
        return self._page()

    def _page(self) -> str:
        html = html_root().joinpath(self.info.page).read_text("utf-8")
        at = html.lower().find("</head>")
        if at < 0:
            raise FileNotFoundError(f"{self.info.page}: no </head> to add uirl's bridge to")
        return html[:at] + _head() + html[at:]

    def file(self, path: str) -> tuple[bytes, str]:
        """The page (with uirl's scripts) or any other file of the wheel's ``html`` folder."""
        parts = PurePosixPath(path).parts
        if not parts or any(p in ("..", "") or p.startswith("/") for p in parts):
            raise FileNotFoundError(path)
        media_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
        if path == self.info.page:
            return self._page().encode("utf-8"), "text/html; charset=utf-8"
        node = html_root().joinpath(*parts)
        if not node.is_file():
            raise FileNotFoundError(path)
        if media_type.startswith("text/") or media_type.endswith("javascript"):
            media_type += "; charset=utf-8"
        return node.read_bytes(), media_type

    # -- episodes --------------------------------------------------------------------

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options, self.info, self.screen)
        self.options = opts
        self.seed = seed
        self._clear()
        self.episode_id += 1
        data_mode = opts.data_mode or (
            "test" if seed is not None and seed >= TEST_SEEDS_START else "train"
        )
        limit = opts.time_limit_s
        return {
            "instruction": "",  # the page writes it (page_loaded)
            "app_state": {
                "episode": self.episode_id,
                "seed": seed,
                "data_mode": data_mode,
                "time_limit_ms": None if limit is None else round(limit * 1000),
            },
            "page_scale": float(opts.zoom or max_zoom(self.info.size, self.screen)),
            "in_page": self.info.restarts_in_page,
        }

    def page_loaded(self, result: Any, instruction: str) -> str:
        if isinstance(result, Mapping):
            self.utterance = str(result.get("utterance") or "")
            fields = result.get("fields")
            self.fields = dict(fields) if isinstance(fields, Mapping) else None
        return self.utterance or instruction

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        if event.get("type") != "end":
            raise ValueError(f"unknown event type {event.get('type')!r}; expected 'end'")
        if self.done:
            return {"recorded": False, "reason": "the episode has ended"}
        raw, discounted = event.get("raw_reward"), event.get("reward")
        for key, value in (("raw_reward", raw), ("reward", discounted)):
            if value is not None and not _is_number(value):
                raise ValueError(f"{key}: expected a number or null, got {value!r}")
        self.done = True
        self.raw_reward = None if raw is None else float(raw)
        self.discounted_reward = None if discounted is None else float(discounted)
        reason = event.get("reason")
        self.reason = None if reason is None else str(reason)[:500]
        return {"recorded": True}

    def progress(self) -> dict[str, Any]:
        o = self.options
        reward = (
            episode_reward(o.reward, self.raw_reward, self.discounted_reward, o.success_threshold)
            if self.done
            else None
        )
        return {
            "episode": self.episode_id,
            "task": self.info.subdomain,
            "done": self.done,
            "raw_reward": self.raw_reward,
            "reward": reward,
            "reward_kind": o.reward,
            "success_threshold": o.success_threshold,
            "reason": self.reason,
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "episode": self.episode_id,
            "task": self.info.subdomain,
            "seed": self.seed,
            "fields": self.fields,
            **page_state,
        }
