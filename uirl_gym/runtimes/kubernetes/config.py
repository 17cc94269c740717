"""The settings of the Kubernetes runtime, and how they shape a session's pod.

Importable without the ``kubernetes`` client (the ``k8s`` extra): the trainers' config
holds these settings as its ``env.kubernetes`` section, and a config must load (and be
checked) on a machine that runs sessions elsewhere.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

PROXY_TOKEN_ENV_VAR = "UIRL_PROXY_TOKEN"
DEFAULT_ORPHAN_TTL_S = 900.0
# A label value: at most 63 characters, alphanumeric at both ends.
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


def _new_run_id() -> str:
    return uuid.uuid4().hex[:10]


def _help(default: Any = None, *, help: str, secret: bool = False) -> Any:
    # The help text lives once, here: the docstring, the trainers' --env.kubernetes.*
    # options and the field tables of the docs read it.
    return field(default=default, repr=not secret, metadata={"help": help, "secret": secret})


@dataclass
class KubernetesRuntimeConfig:
    """Settings of the Kubernetes runtime (each field's help: its ``metadata["help"]``,
    and the table in docs/kubernetes.md)."""

    # Cluster access
    namespace: str = _help("default", help="Where the session pods live.")
    kubeconfig: str | None = _help(help="kubeconfig path; None: $KUBECONFIG or ~/.kube/config.")
    context: str | None = _help(help="kubeconfig context; None: the current one.")
    in_cluster: bool | None = _help(
        help="Use the pod's service account; None: when running in a pod and no kubeconfig "
        "is named."
    )
    api_server: str | None = _help(
        help="An API URL that needs no credentials (kubectl proxy: http://127.0.0.1:8001); "
        "wins over the above."
    )
    # The pod
    image: str = _help(
        "uirl-session:latest", help="The session image (uirl_gym/deploy/Dockerfile)."
    )
    image_pull_policy: str | None = _help(help="Overrides the template's; None: keep it.")
    task: str = _help("simple_data_entry", help="The task of a pod's first episode.")
    template_path: str | None = _help(
        help="A pod template of your own (nodeSelector, tolerations, imagePullSecrets); "
        "None: uirl_gym/deploy/session-pod.yaml."
    )
    container_port: int = _help(8000, help="The port the session server listens on in the pod.")
    cpu_request: str | None = _help(help="Overrides the template's CPU request (250m); None: keep.")
    cpu_limit: str | None = _help(help="Overrides the template's CPU limit (1); None: keep.")
    memory_request: str | None = _help(
        help="Overrides the template's memory request (384Mi); None: keep."
    )
    memory_limit: str | None = _help(
        help="Overrides the template's memory limit (768Mi); None: keep."
    )
    # Routing
    proxy_url: str | None = _help(
        help="The routing proxy's URL (sessions at {proxy_url}/proxy/{id}); None: pod IPs, "
        "which only work inside the cluster."
    )
    proxy_token: str | None = _help(
        help="The proxy's bearer token (Secret uirl-proxy-token); None: $UIRL_PROXY_TOKEN if "
        "set. Never written to saved configs: prefer the variable.",
        secret=True,
    )
    # Pool
    pool_size: int = _help(
        2,
        help="Ready sessions kept waiting (per runtime: per training process), on top of the "
        "sessions in use.",
    )
    max_parallel_starts: int = _help(16, help="Pods being started at the same time, at most.")
    startup_timeout_s: float = _help(
        180.0, help="How long a pod may take to be reachable (schedule, pull, start)."
    )
    # Ownership and clean-up
    run_id: str | None = _help(
        help="The owner label of the runtime's pods; None: a random one. A fixed id lets a "
        "restarted trainer delete what its crashed predecessor left (the trainers add "
        "-r{rank} with several processes)."
    )
    orphan_ttl_s: float = _help(
        DEFAULT_ORPHAN_TTL_S,
        help="Pods expire this long after their last renewal (renewed every third of it).",
    )
    cleanup_on_start: bool = _help(
        True, help="Delete expired pods and this run id's pods at start-up."
    )

    def __post_init__(self) -> None:
        if self.run_id is None:
            self.run_id = _new_run_id()
        if self.pool_size < 0:
            raise ValueError(f"pool_size: expected >= 0, got {self.pool_size}")
        if self.max_parallel_starts < 1:
            raise ValueError(f"max_parallel_starts: expected >= 1, got {self.max_parallel_starts}")
        if not LABEL_VALUE_RE.match(self.run_id) or not self.run_id:
            raise ValueError(
                f"run_id: expected a label value (letters, digits, '-', '_', '.', at most 63, "
                f"starting and ending alphanumeric), got {self.run_id!r}"
            )
        if self.orphan_ttl_s < 60:
            raise ValueError(
                f"orphan_ttl_s: expected >= 60 (renewal happens every third of it), "
                f"got {self.orphan_ttl_s}"
            )
        if self.proxy_url is not None and not self.proxy_url.startswith(("http://", "https://")):
            raise ValueError(f"proxy_url: expected http(s)://host:port, got {self.proxy_url!r}")

    def bearer_token(self) -> str | None:
        """The proxy's token: ``proxy_token``, else ``$UIRL_PROXY_TOKEN`` (read at use, so
        that a saved or logged config never holds the variable's value)."""
        return self.proxy_token or os.environ.get(PROXY_TOKEN_ENV_VAR) or None

    def resources_override(self) -> dict[str, dict[str, str | None]]:
        """The pod resources these settings change (``None``: remove the template's)."""
        override: dict[str, dict[str, str | None]] = {"requests": {}, "limits": {}}
        for kind, resource, value in (
            ("requests", "cpu", self.cpu_request),
            ("limits", "cpu", self.cpu_limit),
            ("requests", "memory", self.memory_request),
            ("limits", "memory", self.memory_limit),
        ):
            if value is not None:
                override[kind][resource] = value
        return override
