"""The settings of the Kubernetes runtime, and how they shape a session's pod."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uirl_gym.runtimes.k8s_api import LABEL_VALUE_RE
from uirl_gym.runtimes.k8s_pods import DEFAULT_ORPHAN_TTL_S, build_pod_manifest

PROXY_TOKEN_ENV_VAR = "UIRL_PROXY_TOKEN"


def _new_run_id() -> str:
    return uuid.uuid4().hex[:10]


@dataclass
class KubernetesRuntimeConfig:
    """Settings of the Kubernetes runtime.

    Attributes:
        namespace: where the session pods live.
        kubeconfig: kubeconfig path (None: ``$KUBECONFIG`` or ``~/.kube/config``).
        context: kubeconfig context (None: the current one).
        in_cluster: use the pod's service account (None: when running in a pod).
        api_server: an API URL needing no credentials (``kubectl proxy``); wins over the rest.
        image: the session image (``uirl_gym/deploy/Dockerfile``).
        image_pull_policy: overrides the template's (None: keep it).
        task: the task id the session servers run.
        template_path: a pod template of your own (None: the shipped one).
        container_port: the port the session server listens on inside the pod.
        cpu_request, cpu_limit, memory_request, memory_limit: override the template's
            resources (None: keep the template's: 500m/1 CPU, 640Mi/1Gi).
        proxy_url: the routing proxy's URL (sessions at ``{proxy_url}/proxy/{id}``);
            None routes to pod IPs directly, which works only inside the cluster.
        proxy_token: the bearer token the proxy requires (its ``--token-file``, from the
            ``uirl-proxy-token`` Secret); None: ``$UIRL_PROXY_TOKEN`` if set, else none.
        pool_size: how many ready sessions wait for :meth:`KubernetesRuntime.acquire`.
        max_parallel_starts: pods being started at the same time, at most.
        startup_timeout_s: how long a pod may take to be ready (pull, schedule, start).
        run_id: the owner label of every pod of this runtime (a fixed id lets a restarted
            trainer delete what its crashed predecessor left).
        orphan_ttl_s: pods expire this long after their last renewal (renewed every
            third of it while the runtime lives).
        cleanup_on_start: delete expired pods and this run id's pods at start-up.
    """

    # Cluster access
    namespace: str = "default"
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    api_server: str | None = None
    # The pod
    image: str = "uirl-session:latest"
    image_pull_policy: str | None = None
    task: str = "simple_data_entry"
    template_path: str | None = None
    container_port: int = 8000
    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None
    # Routing
    proxy_url: str | None = None
    proxy_token: str | None = field(default=None, repr=False)
    # Pool
    pool_size: int = 2
    max_parallel_starts: int = 16
    startup_timeout_s: float = 180.0
    # Ownership and clean-up
    run_id: str = field(default_factory=_new_run_id)
    orphan_ttl_s: float = DEFAULT_ORPHAN_TTL_S
    cleanup_on_start: bool = True

    def __post_init__(self) -> None:
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
        if self.proxy_token is None:
            self.proxy_token = os.environ.get(PROXY_TOKEN_ENV_VAR) or None

    def pod_manifest(
        self, template: Mapping[str, Any], session_id: str, token: str | None = None
    ) -> dict[str, Any]:
        """The pod of one session: ``template`` with this config's fields filled in."""
        return build_pod_manifest(
            template,
            session_id=session_id,
            token=token,
            run_id=self.run_id,
            image=self.image,
            task=self.task,
            port=self.container_port,
            ttl_s=self.orphan_ttl_s,
            image_pull_policy=self.image_pull_policy,
            resources_override=self.resources_override(),
        )

    def resources_override(self) -> dict[str, dict[str, str | None]]:
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
