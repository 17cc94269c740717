"""The browser errors the session server turns into HTTP answers, for every backend."""

from __future__ import annotations


class BrowserError(Exception):
    """The browser failed an action, or is gone (the server checks which)."""


def browser_errors() -> tuple[type[Exception], ...]:
    """The exception types a browser backend raises: ours, and Playwright's if installed."""
    try:
        from playwright.async_api import Error as PlaywrightError
    except ImportError:  # the CDP backend needs no Playwright
        return (BrowserError,)
    return (BrowserError, PlaywrightError)
