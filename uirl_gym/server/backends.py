"""The ways a session server can drive Chromium, and the factory that picks one."""

from __future__ import annotations

import enum
import os
from typing import Any, Protocol

from uirl_gym.actions import Action
from uirl_gym.server.chromium import ImageFormat

BACKEND_ENV_VAR = "UIRL_BROWSER_BACKEND"


class BrowserBackend(enum.StrEnum):
    """``cdp``: DevTools over a pipe, straight from Python (the default).
    ``playwright``: through Playwright's Node driver (the earlier design, kept as an option).
    """

    CDP = "cdp"
    PLAYWRIGHT = "playwright"


def default_backend() -> BrowserBackend:
    """``$UIRL_BROWSER_BACKEND`` if set, else CDP.

    Raises:
        ValueError: the variable names no backend.
    """
    value = os.environ.get(BACKEND_ENV_VAR, "").strip().lower()
    if not value:
        return BrowserBackend.CDP
    try:
        return BrowserBackend(value)
    except ValueError:
        allowed = ", ".join(b.value for b in BrowserBackend)
        raise ValueError(
            f"${BACKEND_ENV_VAR}: unknown backend {value!r}; allowed: {allowed}"
        ) from None


class BrowserSessionLike(Protocol):
    """What the server needs of a backend's browser session."""

    app_url: str
    executable_path: str
    alive: bool
    launches: int

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def restart(self) -> None: ...
    async def new_episode(self, app_state: dict[str, Any], page_scale: float = 1.0) -> Any: ...
    async def responsive(self, timeout_s: float = 2.0) -> bool: ...
    async def act(self, action: Action) -> None: ...
    async def capture(self, fmt: ImageFormat = ..., jpeg_quality: int = 90) -> bytes: ...
    async def inspect(self) -> dict[str, Any]: ...


def make_browser_session(backend: BrowserBackend, **kwargs: Any) -> BrowserSessionLike:
    """A browser session of ``backend`` (Playwright is imported only when chosen)."""
    if backend is BrowserBackend.PLAYWRIGHT:
        from uirl_gym.server.browser import BrowserSession

        return BrowserSession(**kwargs)
    from uirl_gym.server.cdp_browser import CdpBrowserSession

    return CdpBrowserSession(**kwargs)
