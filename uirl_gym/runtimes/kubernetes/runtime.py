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

import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from uirl_gym.protocol import SessionInfo
from uirl_gym.runtimes.base import RuntimeClosedError, SessionStartError, close_at_exit
from uirl_gym.runtimes.kubernetes.api import (
    EXPIRES_ANNOTATION,
    PodApi,
    PodApiError,
    PodCache,
    PodState,
    load_api_client,
    session_selector,
)
from uirl_gym.runtimes.kubernetes.config import KubernetesRuntimeConfig
from uirl_gym.runtimes.kubernetes.pods import (
    PodStarter,
    cleanup_orphans,
    expiry,
    load_template,
    pod_manifest_for,
)

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0


@dataclass
class _PodSession:
    info: SessionInfo
    pod_name: str
    lost: bool = False  # the pod failed or vanished while leased: never pool it again


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

        Args:
            config: the settings (defaults: namespace ``default``, pool of 2).
            api: a ready pod API (tests, custom clients); None builds one from ``config``.

        Raises:
            KubernetesConfigError: no usable cluster configuration.
            PodTemplateError: the pod template is not a Pod.
            PodApiError: the start-up clean-up could not list pods (API down, RBAC).
        """
        self.config = cfg = config or KubernetesRuntimeConfig()
        self._template = load_template(cfg.template_path)
        self._owns_client = api is None
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
        self._start_pod = PodStarter(
            api,
            self._cache,
            manifest_for=lambda sid, token: pod_manifest_for(cfg, self._template, sid, token),
            proxy_url=cfg.proxy_url,
            proxy_token=cfg.bearer_token(),
            startup_timeout_s=cfg.startup_timeout_s,
            is_closed=lambda: self._closed,
        )
        self._starter = ThreadPoolExecutor(cfg.max_parallel_starts, "uirl-k8s-start")
        self._deleter = ThreadPoolExecutor(2, "uirl-k8s-delete")
        self._refill = threading.Thread(target=self._refill_loop, name="uirl-k8s-pool", daemon=True)
        self._refill.start()
        close_at_exit(self)
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
                        self._cond.notify_all()  # one fewer ready: the refill starts another
                        pod = self._cache.get(session.pod_name)
                        if pod is None or not pod.usable:
                            # It broke between its last check and now (a watch event
                            # racing with the start): never hand it out.
                            self._delete_later(session.pod_name)
                            continue
                        self._leased[session.info.session_id] = session
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
                if self._waiters == 0:
                    self._failures.clear()  # meant for waiters that are gone: stale now

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
        if self._owns_client:
            self.api.api_client.close()

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
            info, pod_name = self._start_pod.start()
            session = _PodSession(info, pod_name)
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


__all__ = ["KubernetesRuntime", "KubernetesRuntimeConfig"]
