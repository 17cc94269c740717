"""The browser errors the session server turns into HTTP answers, for every backend."""

from __future__ import annotations


class BrowserError(Exception):
    """The browser failed an action, or is gone (the server checks which)."""


def browser_errors(with_playwright: bool) -> tuple[type[Exception], ...]:
    """The exception types a browser backend raises: ours, plus Playwright's for the
    Playwright backend (imported only then: the CDP backend never loads Playwright)."""
    if not with_playwright:
        return (BrowserError,)
    from playwright.async_api import Error as PlaywrightError

    return (BrowserError, PlaywrightError)
