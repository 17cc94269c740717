"""Session pods: the manifest, starting one, and the clean-up of orphaned ones.

A pod is made from ``uirl_gym/deploy/session-pod.yaml`` (or a copy named by
``template_path``); the runtime fills in the per-session fields. Every pod carries its
owner (``uirl/run-id``) and an expiry time (``uirl/expires-at``) that its runtime
renews while it runs, so that pods of a crashed trainer are found and deleted.
"""

from __future__ import annotations

import argparse
import copy
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import requests
import yaml

from uirl_gym.protocol import (
    TOKEN_ENV_VAR,
    TOKEN_HEADER,
    Route,
    SessionInfo,
    new_session_token,
    proxied_url,
)
from uirl_gym.runtimes.base import RuntimeClosedError, SessionStartError, server_command
from uirl_gym.runtimes.kubernetes.api import (
    APP_LABEL,
    APP_NAME,
    CONTAINER_NAME,
    EXPIRES_ANNOTATION,
    POD_NAME_PREFIX,
    PORT_NAME,
    RUN_LABEL,
    SESSION_LABEL,
    TTL_ANNOTATION,
    KubernetesConfigError,
    PodApi,
    PodApiError,
    PodCache,
    PodState,
    load_api_client,
    session_selector,
)
from uirl_gym.runtimes.kubernetes.config import DEFAULT_ORPHAN_TTL_S, KubernetesRuntimeConfig

logger = logging.getLogger(__name__)

# The pod's IP, from the downward API: the server answers requests addressed to it (the
# proxy's, the runtime's direct ones, the kubelet's probes) besides loopback ones.
POD_IP_ENV_VAR = "UIRL_POD_IP"
TEMPLATE_PACKAGE = "uirl_gym.deploy"
TEMPLATE_NAME = "session-pod.yaml"
HTTP_POLL_S = 0.1


class PodTemplateError(ValueError):
    """The pod template is not a usable Pod manifest."""


def load_template(path: str | None = None) -> dict[str, Any]:
    """The pod template as a dict: ``path``, else the one shipped in ``uirl_gym/deploy``.

    Raises:
        PodTemplateError: not a Pod with at least one container.
    """
    if path is None:
        text = resources.files(TEMPLATE_PACKAGE).joinpath(TEMPLATE_NAME).read_text()
        source = f"{TEMPLATE_PACKAGE}/{TEMPLATE_NAME}"
    else:
        text = Path(path).read_text()
        source = path
    manifest = yaml.safe_load(text)
    if not isinstance(manifest, dict) or manifest.get("kind") != "Pod":
        kind = manifest.get("kind") if isinstance(manifest, dict) else type(manifest).__name__
        raise PodTemplateError(f"{source}: expected a manifest of kind Pod, got {kind!r}")
    if not (manifest.get("spec") or {}).get("containers"):
        raise PodTemplateError(f"{source}: expected spec.containers with one container, got none")
    return manifest


def expiry(ttl_s: float, now: datetime | None = None) -> str:
    """The ``uirl/expires-at`` value ``ttl_s`` from now (RFC 3339, UTC)."""
    now = now or datetime.now(UTC)
    return (now + timedelta(seconds=ttl_s)).isoformat(timespec="seconds")


def pod_manifest_for(
    config: KubernetesRuntimeConfig,
    template: Mapping[str, Any],
    session_id: str,
    token: str | None = None,
) -> dict[str, Any]:
    """The pod of one session of a runtime with ``config``: ``template`` with the
    config's fields filled in (here, not a method of the config: ``k8s_config`` stays
    below this module and loads without the ``kubernetes`` client)."""
    assert config.run_id is not None  # set in __post_init__
    return build_pod_manifest(
        template,
        session_id=session_id,
        token=token,
        run_id=config.run_id,
        image=config.image,
        task=config.task,
        port=config.container_port,
        ttl_s=config.orphan_ttl_s,
        image_pull_policy=config.image_pull_policy,
        resources_override=config.resources_override(),
    )


def build_pod_manifest(
    template: Mapping[str, Any],
    *,
    session_id: str,
    run_id: str,
    image: str,
    task: str,
    port: int,
    ttl_s: float,
    token: str | None = None,
    image_pull_policy: str | None = None,
    resources_override: Mapping[str, Mapping[str, str | None]] | None = None,
) -> dict[str, Any]:
    """The pod of one session: the template with the per-session fields set.

    The server answers requests addressed to the pod's IP (``--allowed-hosts
    $(UIRL_POD_IP)``, the IP from the downward API) besides loopback ones: the proxy's,
    the runtime's direct ones and the kubelet's probes all name it.

    Args:
        token: the session's token for ``/reset`` and ``/oracle``, set as the container's
            ``UIRL_SESSION_TOKEN`` (readable by whoever may ``get pods`` in the
            namespace: the trainer and the proxy; never by the agent).
        resources_override: ``{"requests": {"cpu": "1"}, "limits": {"memory": None}}``;
            a value of None removes that entry from the template's resources.
    """
    pod = copy.deepcopy(dict(template))
    meta = pod.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta["name"] = POD_NAME_PREFIX + session_id
    meta["labels"] = {
        **(meta.get("labels") or {}),
        APP_LABEL: APP_NAME,
        SESSION_LABEL: session_id,
        RUN_LABEL: run_id,
    }
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        EXPIRES_ANNOTATION: expiry(ttl_s),
        TTL_ANNOTATION: str(int(ttl_s)),
    }
    containers = pod["spec"]["containers"]
    container = next((c for c in containers if c.get("name") == CONTAINER_NAME), containers[0])
    container["image"] = image
    if image_pull_policy:
        container["imagePullPolicy"] = image_pull_policy
    container["command"] = server_command(
        session_id=session_id,
        task=task,
        host="0.0.0.0",
        port=port,
        # Kubernetes puts the variable's value in the command ($(NAME)).
        allowed_hosts=[f"$({POD_IP_ENV_VAR})"],
    )
    container.pop("args", None)
    ours = {TOKEN_ENV_VAR, POD_IP_ENV_VAR}
    env = [e for e in container.get("env") or [] if e.get("name") not in ours]
    env.append({"name": POD_IP_ENV_VAR, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if token is not None:
        env.append({"name": TOKEN_ENV_VAR, "value": token})
    container["env"] = env
    ports = [p for p in container.get("ports") or [] if p.get("name") != PORT_NAME]
    container["ports"] = [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}, *ports]
    for kind, values in (resources_override or {}).items():
        section = container.setdefault("resources", {}).setdefault(kind, {})
        for resource, value in values.items():
            if value is None:
                section.pop(resource, None)
            else:
                section[resource] = value
    return pod


def cleanup_orphans(
    api: PodApi,
    *,
    run_id: str | None = None,
    all_runs: bool = False,
    default_ttl_s: float,
    dry_run: bool = False,
    now: datetime | None = None,
) -> list[str]:
    """Delete session pods that nobody renews any more.

    A pod goes when its ``uirl/expires-at`` has passed (pods without the annotation:
    creation + ``default_ttl_s``), when it belongs to ``run_id``, or always with
    ``all_runs``. Pods are found by the label ``app=uirl-session`` only.

    Returns:
        The names of the deleted pods (with ``dry_run``: of those that would go).

    Raises:
        PodApiError: the pods could not be listed.
    """
    now = now or datetime.now(UTC)
    pods, _ = api.list(session_selector())
    doomed = []
    for pod in pods:
        expires = pod.expires_at(default_ttl_s)
        expired = expires is not None and expires <= now
        if all_runs or expired or (run_id is not None and pod.run_id == run_id):
            doomed.append(pod.name)
    if dry_run:
        return doomed
    deleted = []
    for name in doomed:
        try:
            api.delete(name)
        except PodApiError as exc:
            logger.warning("could not delete orphaned pod %s: %s", name, exc)
        else:
            deleted.append(name)
    if deleted:
        logger.info("deleted %d orphaned session pod(s): %s", len(deleted), ", ".join(deleted))
    return deleted


class PodStarter:
    """Starts one session pod and waits until it answers through the chosen route.

    Args:
        api: the pod API.
        cache: the watched pods of this run (readiness comes from its events).
        manifest_for: the pod manifest of a session id and its token.
        proxy_url: route through the proxy; None: to the pod IP.
        proxy_token: the proxy's bearer token (None: the proxy wants none).
        startup_timeout_s: create -> ``GET /`` 200, at most.
        is_closed: True once the runtime closes (the wait stops).
    """

    def __init__(
        self,
        api: PodApi,
        cache: PodCache,
        *,
        manifest_for: Callable[[str, str], dict[str, Any]],
        proxy_url: str | None,
        proxy_token: str | None = None,
        startup_timeout_s: float,
        is_closed: Callable[[], bool],
    ) -> None:
        self.api = api
        self.cache = cache
        self.manifest_for = manifest_for
        self.proxy_url = proxy_url
        self.proxy_token = proxy_token
        self.startup_timeout_s = startup_timeout_s
        self.is_closed = is_closed

    def start(self) -> tuple[SessionInfo, str]:
        """Create a pod, wait until it is ready and reachable; returns (session, pod name).

        The pod is deleted again when anything fails.

        Raises:
            SessionStartError: the pod could not be created, failed, vanished or was not
                reachable in time.
            RuntimeClosedError: the runtime closed meanwhile.
        """
        session_id = uuid.uuid4().hex[:12]
        token = new_session_token()
        manifest = self.manifest_for(session_id, token)
        name = manifest["metadata"]["name"]
        t0 = time.monotonic()
        deadline = t0 + self.startup_timeout_s
        try:
            self.api.create(manifest)
        except PodApiError as exc:
            ns = self.api.namespace
            raise SessionStartError(
                f"could not create pod {name} in namespace {ns}: {exc}. Fix: check "
                f"`kubectl auth can-i create pods -n {ns}` and that the namespace exists"
            ) from exc
        try:
            pod = self.cache.wait_for(
                name, lambda p: p.usable or p.failure is not None or p.deleting, deadline
            )
            self._check_open()
            if pod is None or not pod.usable:
                raise SessionStartError(self._not_ready(name, pod, time.monotonic() - t0))
            base_url = self.route(session_id, pod)
            self._wait_http(base_url, deadline, name)
        except BaseException:
            self._delete_quietly(name)
            raise
        logger.info("session %s ready at %s in %.1fs", session_id, base_url, time.monotonic() - t0)
        headers = {TOKEN_HEADER: token, **self._proxy_headers()}
        return SessionInfo(session_id, base_url, headers=headers), name

    def _proxy_headers(self) -> dict[str, str]:
        if self.proxy_url and self.proxy_token:
            return {"Authorization": f"Bearer {self.proxy_token}"}
        return {}

    def route(self, session_id: str, pod: PodState) -> str:
        """The session's base URL: through the proxy, or at the pod's IP and port."""
        if self.proxy_url:
            return proxied_url(self.proxy_url, session_id)
        host = f"[{pod.ip}]" if pod.ip and ":" in pod.ip else pod.ip
        return f"http://{host}:{pod.port}"

    def _check_open(self) -> None:
        if self.is_closed():
            raise RuntimeClosedError("the KubernetesRuntime closed while a pod was starting")

    def _not_ready(self, name: str, pod: PodState | None, waited_s: float) -> str:
        ns = self.api.namespace
        if pod is None:
            what = "was deleted before it was ready"
        elif pod.failure:
            what = f"failed: {pod.failure}"
        elif pod.deleting:
            what = "is being deleted"
        else:
            waiting = f", {pod.waiting}" if pod.waiting else ""
            what = f"not ready after {waited_s:.0f}s (phase {pod.phase}{waiting})"
        return (
            f"pod {name} {what}. Fix: see `kubectl -n {ns} describe pod {name}` and "
            f"`kubectl -n {ns} logs {name}`; check the image, or raise startup_timeout_s"
        )

    def _wait_http(self, base_url: str, deadline: float, name: str) -> None:
        """``GET /`` through the route until 200: the pod is reachable from here."""
        last = "no answer"
        with requests.Session() as http:
            http.trust_env = False  # an HTTP(S)_PROXY variable must not capture pod traffic
            http.headers.update(self._proxy_headers())
            while time.monotonic() < deadline:
                self._check_open()
                try:
                    response = http.get(base_url + Route.STATUS, timeout=2)
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                except requests.RequestException as exc:
                    last = f"{type(exc).__name__}: {exc}"
                pod = self.cache.get(name)
                if pod is None or pod.failure or pod.deleting:
                    raise SessionStartError(self._not_ready(name, pod, 0.0))
                time.sleep(HTTP_POLL_S)
        raise SessionStartError(
            f"pod {name} is ready but {base_url}/ did not answer 200 (last: {last}). Fix: "
            "check that the proxy runs and proxy_url is right, or that pod IPs are routable "
            "from here (only inside the cluster; from outside, use the proxy)"
        )

    def _delete_quietly(self, name: str) -> None:
        try:
            self.api.delete(name)
        except PodApiError as exc:
            logger.warning("could not delete pod %s (it expires after its TTL): %s", name, exc)


def cleanup_main(argv: list[str] | None = None) -> int:
    """``python -m uirl_gym.runtimes.kubernetes cleanup --namespace NS [--all-runs]``."""
    parser = argparse.ArgumentParser(prog="python -m uirl_gym.runtimes.kubernetes")
    commands = parser.add_subparsers(dest="command", required=True)
    cleanup = commands.add_parser("cleanup", help="delete orphaned session pods")
    cleanup.add_argument("--namespace", default="default")
    cleanup.add_argument("--all-runs", action="store_true", help="every session pod")
    cleanup.add_argument("--run-id", help="also every pod of this run id")
    cleanup.add_argument(
        "--ttl-s",
        type=float,
        default=DEFAULT_ORPHAN_TTL_S,
        help="expiry of pods that lack the uirl/expires-at annotation",
    )
    cleanup.add_argument("--dry-run", action="store_true", help="list, do not delete")
    cleanup.add_argument("--kubeconfig")
    cleanup.add_argument("--context")
    cleanup.add_argument("--api-server", help="e.g. http://127.0.0.1:8001 (kubectl proxy)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        client = load_api_client(
            api_server=args.api_server, kubeconfig=args.kubeconfig, context=args.context
        )
        names = cleanup_orphans(
            PodApi(client, args.namespace),
            run_id=args.run_id,
            all_runs=args.all_runs,
            default_ttl_s=args.ttl_s,
            dry_run=args.dry_run,
        )
    except (KubernetesConfigError, PodApiError) as exc:
        logger.error("cleanup failed: %s", exc)
        return 1
    verb = "would delete" if args.dry_run else "deleted"
    for name in names:
        print(f"{verb} pod/{name}")  # noqa: T201 - the command's output
    print(f"{verb} {len(names)} session pod(s) in namespace {args.namespace}")  # noqa: T201
    return 0
