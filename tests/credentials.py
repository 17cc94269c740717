"""The credentials of the sessions this test run borrowed, by URL (tests only).

The library hands credentials from runtime to client in a SessionInfo; tests that talk
HTTP to a session's URL by hand (requests.get(f"{base}/oracle")) find its token here.
"""

from __future__ import annotations

from uirl_gym.protocol import SessionInfo

_BY_URL: dict[str, dict[str, str]] = {}


def remember(info: SessionInfo) -> SessionInfo:
    _BY_URL[info.base_url.rstrip("/")] = dict(info.headers)
    return info


def session_headers(base_url: str) -> dict[str, str]:
    """The token (and any other credential) of the borrowed session at ``base_url``."""
    return dict(_BY_URL[base_url.rstrip("/")])
