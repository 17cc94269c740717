"""The installed ``miniwob`` wheel: which tasks it registers, where their pages are.

What the rest of the MiniWoB++ family reads about the wheel (:func:`miniwob_tasks`,
:func:`html_root`); it imports nothing of the family, so that ``task.py``, ``score.py``
and the family's registration in ``__init__.py`` all stand on it.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

logger = logging.getLogger(__name__)

PREFIX = "miniwob."
# The gym ids of the wheel: miniwob/<task>-v1.
_GYM_PREFIX, _GYM_SUFFIX = "miniwob/", "-v1"
# Pages that load a script under another licence than MiniWoB++'s MIT: jscolor
# (core/jscolor.min.js) is GPLv3. They are served (from the user's own install, never
# redistributed by uirl) and marked, so that a benchmark can leave them out.
THIRD_PARTY_LICENSES = {
    "use-colorwheel": "GPL-3.0 (jscolor)",
    "use-colorwheel-2": "GPL-3.0 (jscolor)",
}
# The task area in page pixels (MiniWoB's constants.py): the page draws it at its
# top-left; FlightWoB pages draw their instruction panel to the right of the form.
TASK_SIZE = (160, 210)
FLIGHT_SIZE = (540, 667)
# Tasks whose page, restarted in place, does not show what a fresh page shows for the
# same seed (besides those the wheel flags nondeterministic and FlightWoB's): found by
# tests/test_miniwob.py's in-page sweep; they get a fresh page per episode.
FRESH_PAGE_ONLY = frozenset(
    {
        # Canvas and SVG pages that draw on top of the last episode's drawing, and
        # pages whose handlers, cells or counters outlive a restart.
        "ascending-numbers",
        "bisect-angle",
        "circle-center",
        "click-shape",
        "copy-paste-2",
        "count-sides",
        "drag-circle",
        "drag-shapes",
        "drag-shapes-2",
        "drag-single-shape",
        "find-midpoint",
        "form-sequence-3",
        "hot-cold",
        "number-checkboxes",
        "odd-or-even",
        "right-angle",
        "tic-tac-toe",
        "use-colorwheel",
        "use-colorwheel-2",
    }
)


@dataclass(frozen=True)
class MiniWobInfo:
    """One MiniWoB++ task of the wheel.

    Attributes:
        subdomain: MiniWoB's task name (``click-test``; ``flight.AA``).
        nondeterministic: the wheel marks it so (a date picker's "today", page state
            kept across resets in its own env): the same seed may not give the same
            screen.
        third_party_license: a licence other than MIT its page loads code under, or None.
        page: the page's path under the wheel's ``html`` folder.
        size: the task area (width, height) in page pixels.
    """

    subdomain: str
    nondeterministic: bool
    third_party_license: str | None
    page: str
    size: tuple[int, int]

    @property
    def name(self) -> str:
        return PREFIX + self.subdomain

    @property
    def restarts_in_page(self) -> bool:
        """Whether an episode may restart in the page of the last one (no page load):
        not for the tasks the wheel flags nondeterministic (state kept across episodes),
        FlightWoB's (a form in a frame) and ``FRESH_PAGE_ONLY``."""
        return not (
            self.nondeterministic
            or self.subdomain.startswith("flight.")
            or self.subdomain in FRESH_PAGE_ONLY
        )


def installed() -> bool:
    """Whether the ``miniwob`` wheel is importable."""
    return importlib.util.find_spec("miniwob") is not None


def html_root() -> Traversable:
    """The wheel's ``html`` folder (``ModuleNotFoundError``: the wheel is not installed)."""
    return resources.files("miniwob").joinpath("html")


@functools.cache
def miniwob_tasks() -> dict[str, MiniWobInfo]:
    """Every task the wheel registers, by uirl task id (empty without the wheel)."""
    if not installed():
        return {}
    import gymnasium as gym
    import miniwob  # noqa: F401  (registers miniwob/<task>-v1)

    tasks = {}
    for env_id, spec in sorted(gym.registry.items()):
        if not (env_id.startswith(_GYM_PREFIX) and env_id.endswith(_GYM_SUFFIX)):
            continue
        sub = env_id[len(_GYM_PREFIX) : -len(_GYM_SUFFIX)]
        flight = sub.startswith("flight.")
        page = (
            f"flight/{sub.removeprefix('flight.')}/wrapper.html"
            if flight
            else f"miniwob/{sub}.html"
        )
        info = MiniWobInfo(
            subdomain=sub,
            nondeterministic=bool(spec.nondeterministic),
            third_party_license=THIRD_PARTY_LICENSES.get(sub),
            page=page,
            size=FLIGHT_SIZE if flight else TASK_SIZE,
        )
        if not html_root().joinpath(page).is_file():
            logger.warning("miniwob: %s is registered but its page %s is missing", env_id, page)
            continue
        tasks[info.name] = info
    return tasks
