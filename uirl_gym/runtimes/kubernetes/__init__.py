"""The Kubernetes runtime: session pods with a warm pool, and the routing proxy.

- ``config``: :class:`KubernetesRuntimeConfig`, the runtime's settings, checked;
- ``api``: the one door to the Kubernetes API (the runtime's and the proxy's pod calls);
- ``pods``: pod manifests, start, readiness, deletion, orphan clean-up;
- ``runtime``: :class:`KubernetesRuntime` (the warm pool);
- ``proxy``: the routing proxy (``python -m uirl_gym.runtimes.kubernetes.proxy``), its
  own Deployment in the cluster.

``python -m uirl_gym.runtimes.kubernetes cleanup`` deletes the pods of crashed runs.
The names below are imported on first use, so that reading the settings
(``config``) needs neither the ``kubernetes`` client nor PyYAML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uirl_gym.runtimes.kubernetes.config import KubernetesRuntimeConfig
    from uirl_gym.runtimes.kubernetes.runtime import KubernetesRuntime

__all__ = ["KubernetesRuntime", "KubernetesRuntimeConfig"]

_HOMES = {
    "KubernetesRuntime": "uirl_gym.runtimes.kubernetes.runtime",
    "KubernetesRuntimeConfig": "uirl_gym.runtimes.kubernetes.config",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
