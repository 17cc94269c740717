"""The Kubernetes runtime: one pod per session, a warm pool of ready ones.

A pod runs the session server exactly as the local runtime runs it (see
``uirl_gym/deploy/session-pod.yaml``). Requests reach it through the routing proxy
(``proxy_url``, from outside the cluster) or at the pod's IP (inside the cluster).

The pool keeps ``pool_size`` sessions ready, so that :meth:`KubernetesRuntime.acquire`
never waits for a pod to start: it takes a ready session and a background thread
starts its replacement. One list + watch of this run's pods tells the pool when a pod
becomes ready, fails or disappears. Pods carry an expiry annotation that the runtime
renews; :func:`cleanup_orphans` (run at start-up, and as ``python -m
uirl_gym.runtimes.kubernetes cleanup``) deletes the pods of crashed runs.

Example:
    >>> from uirl_gym.env import UIEnv  # doctest: +SKIP
    >>> cfg = KubernetesRuntimeConfig(namespace="uirl", image="REGISTRY/uirl-session:0.1",
    ...                               proxy_url="http://127.0.0.1:8080")  # doctest: +SKIP
    >>> env = UIEnv(runtime=KubernetesRuntime(cfg))  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import atexit
import logging
import sys
import threading
import time
import uuid
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from uirl_gym.runtimes.base import RuntimeClosedError, SessionInfo, SessionStartError
from uirl_gym.runtimes.k8s_api import (
    EXPIRES_ANNOTATION,
    LABEL_VALUE_RE,
    POD_NAME_PREFIX,
    PodApi,
    PodApiError,
    PodCache,
    PodState,
    load_api_client,
    session_selector,
)
from uirl_gym.runtimes.k8s_pods import build_pod_manifest, cleanup_orphans, expiry, load_template

logger = logging.getLogger(__name__)

HTTP_POLL_S = 0.1
MAX_BACKOFF_S = 30.0


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
            resources (None: keep the template's: 500m/1 CPU, 512Mi/1Gi).
        proxy_url: the routing proxy's URL (sessions at ``{proxy_url}/proxy/{id}``);
            None routes to pod IPs directly, which works only inside the cluster.
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
    # Pool
    pool_size: int = 2
    max_parallel_starts: int = 4
    startup_timeout_s: float = 180.0
    # Ownership and clean-up
    run_id: str = field(default_factory=_new_run_id)
    orphan_ttl_s: float = 900.0
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


@dataclass
class _PodSession:
    info: SessionInfo
    pod_name: str
    lost: bool = False  # the pod failed or vanished while leased: never pool it again


_LIVE_RUNTIMES: weakref.WeakSet[KubernetesRuntime] = weakref.WeakSet()
_ATEXIT_INSTALLED = False


def _close_all_runtimes() -> None:
    for runtime in list(_LIVE_RUNTIMES):
        runtime.close()


class KubernetesRuntime:
    """Session servers as Kubernetes pods, with a warm pool.

    Attributes:
        config: the settings.
        api: the pod API (namespace ``config.namespace``).

    Methods:
        acquire: a ready session from the pool (waits only when the pool is empty).
        release: a healthy session goes back to the pool (extras deleted), others deleted.
        wait_pool_ready: block until ``pool_size`` sessions are ready.
        stats: counts of ready, leased and starting sessions.
        cleanup_orphans: delete expired session pods (and those of a given run id).
        close: stop the pool and delete every pod this runtime made.
    """

    def __init__(
        self, config: KubernetesRuntimeConfig | None = None, *, api: PodApi | None = None
    ) -> None:
        """Connect, clean up orphans, start the watch and the pool.

        Raises:
            KubernetesConfigError: no usable cluster configuration.
            PodTemplateError: the pod template is not a Pod.
        """
        self.config = cfg = config or KubernetesRuntimeConfig()
        self._template = load_template(cfg.template_path)
        if api is None:
            client = load_api_client(
                api_server=cfg.api_server,
                kubeconfig=cfg.kubeconfig,
                context=cfg.context,
                in_cluster=cfg.in_cluster,
            )
            api = PodApi(client, cfg.namespace)
        self.api = api
        self._cond = threading.Condition()
        self._ready: deque[_PodSession] = deque()
        self._leased: dict[str, _PodSession] = {}
        self._starting = 0
        self._waiters = 0
        self._failures: deque[SessionStartError] = deque()
        self._last_failure: str | None = None
        self._consecutive_failures = 0
        self._backoff_until = 0.0
        self._closed = False
        if cfg.cleanup_on_start:
            self.cleanup_orphans(run_id=cfg.run_id)
        self._cache = PodCache(api, session_selector(run_id=cfg.run_id), self._on_pod_change)
        self._cache.start()
        self._starter = ThreadPoolExecutor(cfg.max_parallel_starts, "uirl-k8s-start")
        self._deleter = ThreadPoolExecutor(2, "uirl-k8s-delete")
        self._refill = threading.Thread(target=self._refill_loop, name="uirl-k8s-pool", daemon=True)
        self._refill.start()
        _LIVE_RUNTIMES.add(self)
        _install_atexit()
        logger.info(
            "kubernetes runtime: namespace %s, run id %s, pool %d, route %s",
            cfg.namespace,
            cfg.run_id,
            cfg.pool_size,
            cfg.proxy_url or "pod IPs",
        )

    # -- the Runtime protocol ----------------------------------------------------------

    def acquire(self, timeout_s: float | None = None) -> SessionInfo:
        """A ready session: from the pool, else the next one that starts.

        Raises:
            SessionStartError: none became ready in ``timeout_s`` (default: the config's
                ``startup_timeout_s``), or a pod failed to start while this call waited.
            RuntimeClosedError: after :meth:`close`.
        """
        timeout_s = self.config.startup_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._check_open()
            self._waiters += 1
            self._cond.notify_all()  # the refill thread counts waiters as demand
            try:
                while True:
                    self._check_open()
                    if self._ready:
                        session = self._ready.popleft()
                        self._leased[session.info.session_id] = session
                        self._cond.notify_all()
                        return session.info
                    if self._failures:
                        raise self._failures.popleft()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SessionStartError(
                            f"no session ready after {timeout_s:.0f}s ({self._stats_locked()}); "
                            f"last start failure: {self._last_failure or 'none'}. Fix: raise "
                            "pool_size or startup_timeout_s, or see `kubectl -n "
                            f"{self.config.namespace} get pods -l {session_selector()}`"
                        )
                    self._cond.wait(remaining)
            finally:
                self._waiters -= 1

    def release(self, session: SessionInfo, *, healthy: bool = True) -> None:
        """Back to the pool when healthy and the pool has room; otherwise delete the pod."""
        with self._cond:
            entry = self._leased.pop(session.session_id, None)
            if entry is None:
                logger.debug("release of unknown session %s", session.session_id)
                return
            pod = self._cache.get(entry.pod_name)
            keep = (
                healthy
                and not self._closed
                and not entry.lost
                and pod is not None
                and pod.usable
                and len(self._ready) < self.config.pool_size + self._waiters
            )
            if keep:
                self._ready.append(entry)
            self._cond.notify_all()
        if not keep:
            self._delete_later(entry.pod_name)

    def close(self) -> None:
        """Stop the pool and delete every pod of this run. Safe to call twice."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            owned = [s.pod_name for s in (*self._ready, *self._leased.values())]
            self._ready.clear()
            self._leased.clear()
            self._cond.notify_all()
        self._refill.join()
        self._cache.stop()  # also wakes the start workers that wait for readiness
        self._starter.shutdown(wait=True, cancel_futures=True)
        self._deleter.shutdown(wait=True)
        for name in owned:
            self._delete(name)
        try:
            # Catches pods whose creation raced with close().
            left, _ = self.api.list(session_selector(run_id=self.config.run_id))
        except PodApiError as exc:
            logger.warning(
                "could not list this run's pods to delete them (%s); they expire after "
                "%.0fs, or run `python -m uirl_gym.runtimes.kubernetes cleanup`",
                exc,
                self.config.orphan_ttl_s,
            )
            left = []
        for pod in left:
            self._delete(pod.name)
        _LIVE_RUNTIMES.discard(self)

    def __enter__(self) -> KubernetesRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- more public methods -----------------------------------------------------------

    def wait_pool_ready(self, timeout_s: float | None = None) -> None:
        """Block until ``pool_size`` sessions are ready (e.g. before training starts).

        Raises:
            SessionStartError: not ready in time (default: ``startup_timeout_s``).
            RuntimeClosedError: after :meth:`close`.
        """
        timeout_s = self.config.startup_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self._ready) < self.config.pool_size:
                self._check_open()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionStartError(
                        f"pool not ready after {timeout_s:.0f}s: expected "
                        f"{self.config.pool_size} ready, got {self._stats_locked()}; last "
                        f"start failure: {self._last_failure or 'none'}"
                    )
                self._cond.wait(remaining)

    def stats(self) -> dict[str, int]:
        """``{"ready": n, "leased": n, "starting": n}``."""
        with self._cond:
            return {
                "ready": len(self._ready),
                "leased": len(self._leased),
                "starting": self._starting,
            }

    def cleanup_orphans(self, run_id: str | None = None) -> list[str]:
        """Delete expired session pods in the namespace, and all pods of ``run_id``.

        Never pass this runtime's own run id while it runs: its pods would go.

        Raises:
            PodApiError: the pods could not be listed.
        """
        return cleanup_orphans(self.api, run_id=run_id, default_ttl_s=self.config.orphan_ttl_s)

    # -- the pool ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("this KubernetesRuntime is closed")

    def _stats_locked(self) -> str:
        return f"{len(self._ready)} ready, {len(self._leased)} leased, {self._starting} starting"

    def _refill_loop(self) -> None:
        """Start pods while ready + starting < pool_size + waiting acquirers; renew leases."""
        heartbeat_s = self.config.orphan_ttl_s / 3
        next_heartbeat = time.monotonic() + heartbeat_s
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                deficit = 0
                if now >= self._backoff_until:
                    target = self.config.pool_size + self._waiters
                    deficit = target - len(self._ready) - self._starting
                if deficit > 0:
                    self._starting += deficit
                else:
                    wake = next_heartbeat
                    if now < self._backoff_until:
                        wake = min(wake, self._backoff_until)
                    self._cond.wait(max(0.0, wake - now))
            for _ in range(max(deficit, 0)):
                self._starter.submit(self._start_into_pool)
            if time.monotonic() >= next_heartbeat:
                self._renew_leases()
                next_heartbeat = time.monotonic() + heartbeat_s

    def _start_into_pool(self) -> None:
        try:
            session = self._start_one()
        except (SessionStartError, RuntimeClosedError) as exc:
            self._start_failed(exc)
            return
        except Exception as exc:  # a bug or an API surprise must not kill the pool
            logger.exception("unexpected error while starting a session pod")
            self._start_failed(SessionStartError(f"{type(exc).__name__}: {exc}"))
            return
        extras: list[_PodSession] = []
        with self._cond:
            self._starting -= 1
            if self._closed:
                extras.append(session)
            else:
                self._ready.append(session)
                self._consecutive_failures = 0
                # A session released healthy meanwhile may have filled the pool.
                while len(self._ready) > self.config.pool_size + self._waiters:
                    extras.append(self._ready.pop())
                self._cond.notify_all()
        for extra in extras:
            self._delete(extra.pod_name)

    def _start_failed(self, exc: Exception) -> None:
        with self._cond:
            self._starting -= 1
            if self._closed:
                return
            self._consecutive_failures += 1
            delay = min(MAX_BACKOFF_S, 0.5 * 2 ** (self._consecutive_failures - 1))
            self._backoff_until = time.monotonic() + delay
            self._last_failure = str(exc)
            if self._waiters > len(self._failures) and isinstance(exc, SessionStartError):
                self._failures.append(exc)
            self._cond.notify_all()
        logger.warning("session pod failed to start (next try in %.1fs): %s", delay, exc)

    def _start_one(self) -> _PodSession:
        cfg = self.config
        session_id = uuid.uuid4().hex[:12]
        name = POD_NAME_PREFIX + session_id
        manifest = build_pod_manifest(
            self._template,
            session_id=session_id,
            run_id=cfg.run_id,
            image=cfg.image,
            task=cfg.task,
            port=cfg.container_port,
            ttl_s=cfg.orphan_ttl_s,
            image_pull_policy=cfg.image_pull_policy,
            resources_override=cfg.resources_override(),
        )
        t0 = time.monotonic()
        deadline = t0 + cfg.startup_timeout_s
        try:
            self.api.create(manifest)
        except PodApiError as exc:
            raise SessionStartError(
                f"could not create pod {name} in namespace {cfg.namespace}: {exc}. Fix: check "
                f"`kubectl auth can-i create pods -n {cfg.namespace}` and the namespace"
            ) from exc
        try:
            pod = self._cache.wait_for(
                name, lambda p: p.usable or p.failure is not None or p.deleting, deadline
            )
            self._check_open()
            if pod is None or not pod.usable:
                raise SessionStartError(self._not_ready_message(name, pod, time.monotonic() - t0))
            base_url = self._route(session_id, pod)
            self._wait_http(base_url, deadline, name)
        except BaseException:
            self._delete(name)
            raise
        logger.info("session %s ready at %s in %.1fs", session_id, base_url, time.monotonic() - t0)
        return _PodSession(SessionInfo(session_id, base_url), name)

    def _not_ready_message(self, name: str, pod: PodState | None, waited_s: float) -> str:
        ns = self.config.namespace
        if pod is None:
            what = "was deleted before it was ready"
        elif pod.failure:
            what = f"failed: {pod.failure}"
        elif pod.deleting:
            what = "is being deleted"
        else:
            what = (
                f"not ready after {waited_s:.0f}s (phase {pod.phase}"
                f"{', ' + pod.waiting if pod.waiting else ''})"
            )
        return (
            f"pod {name} {what}. Fix: `kubectl -n {ns} describe pod {name}` and "
            f"`kubectl -n {ns} logs {name}`; check the image {self.config.image!r}, or raise "
            "startup_timeout_s"
        )

    def _route(self, session_id: str, pod: PodState) -> str:
        if self.config.proxy_url:
            return f"{self.config.proxy_url.rstrip('/')}/proxy/{session_id}"
        host = f"[{pod.ip}]" if pod.ip and ":" in pod.ip else pod.ip
        return f"http://{host}:{pod.port}"

    def _wait_http(self, base_url: str, deadline: float, name: str) -> None:
        """``GET /`` through the chosen route until 200: the pod is reachable from here."""
        last = "no answer"
        with requests.Session() as http:
            http.trust_env = False  # an HTTP(S)_PROXY variable must not capture pod traffic
            while time.monotonic() < deadline:
                self._check_open()
                try:
                    response = http.get(base_url + "/", timeout=2)
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                except requests.RequestException as exc:
                    last = f"{type(exc).__name__}: {exc}"
                pod = self._cache.get(name)
                if pod is None or pod.failure or pod.deleting:
                    raise SessionStartError(self._not_ready_message(name, pod, 0.0))
                time.sleep(HTTP_POLL_S)
        raise SessionStartError(
            f"pod {name} is ready but {base_url}/ does not answer 200 (last: {last}). Fix: "
            "check that the proxy runs and proxy_url is right, or that pod IPs are routable "
            "from here (they are only inside the cluster: use the proxy from outside)"
        )

    def _on_pod_change(self, old: PodState | None, new: PodState | None) -> None:
        """From the watch thread: a pooled pod that broke or vanished leaves the pool."""
        if new is not None and new.usable:
            return
        name = new.name if new is not None else old.name if old is not None else ""
        broken = None
        with self._cond:
            for session in list(self._ready):
                if session.pod_name == name:
                    self._ready.remove(session)
                    broken = session
                    self._cond.notify_all()  # the refill thread replaces it
            for session in self._leased.values():
                if session.pod_name == name and (new is None or new.failure or new.deleting):
                    session.lost = True
        if broken is not None:
            logger.warning("pooled session pod %s broke or vanished; replacing it", name)
            if new is not None:
                self._delete_later(name)

    def _renew_leases(self) -> None:
        with self._cond:
            names = [s.pod_name for s in (*self._ready, *self._leased.values())]
        expires = expiry(self.config.orphan_ttl_s)
        for name in names:
            try:
                self.api.patch_annotations(name, {EXPIRES_ANNOTATION: expires})
            except PodApiError as exc:
                logger.warning("could not renew the expiry of pod %s: %s", name, exc)

    def _delete_later(self, name: str) -> None:
        try:
            self._deleter.submit(self._delete, name)
        except RuntimeError:  # shut down: close() is deleting everything anyway
            self._delete(name)

    def _delete(self, name: str) -> None:
        try:
            self.api.delete(name)
        except PodApiError as exc:
            logger.warning("could not delete pod %s (it expires after its TTL): %s", name, exc)


def _install_atexit() -> None:
    global _ATEXIT_INSTALLED
    if not _ATEXIT_INSTALLED:
        _ATEXIT_INSTALLED = True
        atexit.register(_close_all_runtimes)


def main(argv: list[str] | None = None) -> int:
    """``python -m uirl_gym.runtimes.kubernetes cleanup --namespace NS [--all-runs]``."""
    parser = argparse.ArgumentParser(prog="python -m uirl_gym.runtimes.kubernetes")
    commands = parser.add_subparsers(dest="command", required=True)
    cleanup = commands.add_parser("cleanup", help="delete orphaned session pods")
    cleanup.add_argument("--namespace", default="default")
    cleanup.add_argument(
        "--all-runs", action="store_true", help="every session pod, expired or not"
    )
    cleanup.add_argument("--run-id", help="also every pod of this run id")
    cleanup.add_argument(
        "--ttl-s",
        type=float,
        default=KubernetesRuntimeConfig.orphan_ttl_s,
        help="expiry of pods that lack the uirl/expires-at annotation",
    )
    cleanup.add_argument("--dry-run", action="store_true", help="list, do not delete")
    cleanup.add_argument("--kubeconfig")
    cleanup.add_argument("--context")
    cleanup.add_argument("--api-server", help="e.g. http://127.0.0.1:8001 (kubectl proxy)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
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
    verb = "would delete" if args.dry_run else "deleted"
    for name in names:
        print(f"{verb} pod/{name}")  # noqa: T201 - the command's output
    print(f"{verb} {len(names)} session pod(s) in namespace {args.namespace}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
