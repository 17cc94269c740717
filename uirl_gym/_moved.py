"""Old module paths that moved (issue 40), kept for one release.

Each old path is a three-line module that puts the new module in its place in
``sys.modules`` (so both names are the same module object: a test that patches one
patches the other) after a ``DeprecationWarning`` that names the new path. An old path
that was a command (``python -m uirl_gym.server``) runs the new one.
"""

from __future__ import annotations

import importlib
import runpy
import warnings
from types import ModuleType

REMOVED_IN = "the release after 2026-12"


def _warn(old: str, new: str, category: type[Warning] = DeprecationWarning) -> None:
    warnings.warn(
        f"{old} moved to {new}; the old path is removed in {REMOVED_IN}",
        category,
        stacklevel=4,
    )


def moved(old: str, new: str) -> ModuleType:
    """The module now at ``new``, after a deprecation warning for ``old``."""
    _warn(old, new)
    return importlib.import_module(new)


def run_moved(old: str, new: str) -> None:
    """``python -m old``: warn, then run ``python -m new`` with the same arguments.

    A FutureWarning (shown by default): a command's user is who must change it."""
    _warn(old, new, FutureWarning)
    runpy.run_module(new, run_name="__main__", alter_sys=True)
