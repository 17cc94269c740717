"""The runtime contract: where session servers come from.

The env never starts or finds servers itself: it asks a runtime for a session
(:meth:`Runtime.acquire`), uses its URL, and gives it back (:meth:`Runtime.release`)
healthy (reusable) or not (destroyed). Every runtime serves the same HTTP protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class UIRuntimeError(Exception):
    """Base class of runtime errors."""


class SessionStartError(UIRuntimeError):
    """A session server did not become ready; the message carries its log's tail."""


class RuntimeClosedError(UIRuntimeError):
    """The runtime was closed; it hands out no more sessions."""


@dataclass(frozen=True)
class SessionInfo:
    """A ready session server.

    Attributes:
        session_id: unique within the runtime.
        base_url: the protocol's root, e.g. ``http://127.0.0.1:41234``.
    """

    session_id: str
    base_url: str


@runtime_checkable
class Runtime(Protocol):
    """Hands out ready sessions and takes them back."""

    def acquire(self, timeout_s: float | None = None) -> SessionInfo:
        """A ready session, started or taken from a pool.

        Raises:
            SessionStartError: it did not become ready in time.
            RuntimeClosedError: after :meth:`close`.
        """
        ...

    def release(self, session: SessionInfo, *, healthy: bool = True) -> None:
        """Give a session back: kept for reuse when healthy, destroyed otherwise."""
        ...

    def close(self) -> None:
        """Stop every session this runtime started. Safe to call twice."""
        ...
