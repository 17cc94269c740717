"""The one door to the Kubernetes API: every pod call of the runtime and the proxy.

Everything that talks to the API server goes through :class:`PodApi` (create, read,
list, patch, delete, watch pods), so that API strings, labels and error mapping live in
one place. :class:`PodCache` keeps the pods of one label selector current with a single
list + watch (restarted on 410 Gone), so that waiting for many pods costs one stream.

Needs the ``k8s`` extra (``pip install uirl[k8s]``); nothing outside the Kubernetes
modules imports this one.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes import watch as k8s_watch
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
except ImportError as exc:  # the k8s extra is optional: say how to get it
    raise ImportError(
        f"the Kubernetes runtime and proxy need the `kubernetes` client ({exc}). "
        "Fix: pip install 'uirl[k8s]'"
    ) from exc

logger = logging.getLogger(__name__)

# -- API strings ---------------------------------------------------------------------
APP_LABEL = "app"
APP_NAME = "uirl-session"
SESSION_LABEL = "uirl/session-id"
RUN_LABEL = "uirl/run-id"
EXPIRES_ANNOTATION = "uirl/expires-at"
TTL_ANNOTATION = "uirl/ttl-s"
CONTAINER_NAME = "session"
PORT_NAME = "http"
DEFAULT_PORT = 8000
POD_NAME_PREFIX = "uirl-session-"
MERGE_PATCH = "application/merge-patch+json"
HTTP_GONE = 410
HTTP_NOT_FOUND = 404

TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})
# Container waiting reasons that never resolve by themselves (restartPolicy Never).
FATAL_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
# Session ids are label values and pod-name suffixes: a DNS label, lowercase.
SESSION_ID_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,46}[a-z0-9])?$")

REQUEST_TIMEOUT_S = (5.0, 30.0)  # (connect, read) of every non-watch call
WATCH_TIMEOUT_S = 60  # the server ends a watch after this; we resume from the last version
WATCH_RETRY_MAX_S = 10.0
MAX_GONE_REMEMBERED = 10_000


class KubernetesConfigError(Exception):
    """No usable Kubernetes API configuration (kubeconfig, context, in-cluster)."""


class PodApiError(Exception):
    """A pod API call failed.

    Attributes:
        status: the HTTP status (0 when the API server was not reached).
        reason: the API server's reason or the transport error.
    """

    def __init__(self, action: str, status: int, reason: str) -> None:
        super().__init__(f"{action}: HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


class PodWatchExpiredError(PodApiError):
    """The watch's resourceVersion is too old (410 Gone): list again, then watch."""


def selector(labels: Mapping[str, str]) -> str:
    """An equality label selector, e.g. ``app=uirl-session,uirl/run-id=abc``."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def session_selector(session_id: str | None = None, run_id: str | None = None) -> str:
    """The selector of uirl session pods, narrowed to one session and/or one run."""
    labels = {APP_LABEL: APP_NAME}
    if session_id is not None:
        labels[SESSION_LABEL] = session_id
    if run_id is not None:
        labels[RUN_LABEL] = run_id
    return selector(labels)


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass
class PodState:
    """What the runtime and the proxy need to know of a pod (parsed from API JSON).

    Attributes:
        name, labels, annotations, phase: as in the pod object.
        ready: the pod's Ready condition is True.
        ip: ``status.podIP`` (None until scheduled and started).
        port: the container port named ``http`` (else the first one, else 8000).
        created_at: ``metadata.creationTimestamp``.
        deleting: ``metadata.deletionTimestamp`` is set.
        failure: why the pod can never become ready (terminal phase, image pull error).
        waiting: why it is not ready yet (unschedulable, container creating), for errors.
    """

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    phase: str = "Pending"
    ready: bool = False
    ip: str | None = None
    port: int = DEFAULT_PORT
    created_at: datetime | None = None
    deleting: bool = False
    failure: str | None = None
    waiting: str | None = None

    @property
    def session_id(self) -> str | None:
        return self.labels.get(SESSION_LABEL)

    @property
    def run_id(self) -> str | None:
        return self.labels.get(RUN_LABEL)

    @property
    def usable(self) -> bool:
        """Ready, routable and not on its way out."""
        return self.ready and bool(self.ip) and not self.deleting and self.failure is None

    def expires_at(self, default_ttl_s: float) -> datetime | None:
        """The expiry annotation, else creation + ``default_ttl_s``."""
        expires = _parse_time(self.annotations.get(EXPIRES_ANNOTATION))
        if expires is None and self.created_at is not None:
            expires = datetime.fromtimestamp(self.created_at.timestamp() + default_ttl_s, UTC)
        return expires

    @classmethod
    def from_dict(cls, pod: Mapping[str, Any]) -> PodState:
        """Parse a pod as the API serves it (camelCase JSON)."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        phase = status.get("phase") or "Pending"
        failure, waiting = _container_problems(status)
        if phase in TERMINAL_PHASES:
            failure = f"pod phase {phase} ({status.get('reason') or ''} {failure or ''})".strip()
        scheduled = conditions.get("PodScheduled") or {}
        if scheduled.get("status") == "False":
            waiting = f"unschedulable: {scheduled.get('message') or scheduled.get('reason')}"
        return cls(
            name=meta.get("name", ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            phase=phase,
            ready=(conditions.get("Ready") or {}).get("status") == "True",
            ip=status.get("podIP") or None,
            port=_http_port(spec),
            created_at=_parse_time(meta.get("creationTimestamp")),
            deleting=bool(meta.get("deletionTimestamp")),
            failure=failure,
            waiting=waiting,
        )


def _container_problems(status: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(fatal problem, transient waiting reason) from the container statuses."""
    failure = waiting = None
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if "waiting" in state and state["waiting"]:
            reason = state["waiting"].get("reason") or ""
            text = f"{reason}: {state['waiting'].get('message') or ''}".strip(": ")
            if reason in FATAL_WAITING_REASONS:
                failure = text
            else:
                waiting = text
        elif "terminated" in state and state["terminated"]:
            term = state["terminated"]
            failure = (
                f"container exited with code {term.get('exitCode')} "
                f"({term.get('reason') or ''}: {term.get('message') or ''})"
            )
    return failure, waiting


def _http_port(spec: Mapping[str, Any]) -> int:
    ports = [p for c in spec.get("containers") or [] for p in c.get("ports") or []]
    for port in ports:
        if port.get("name") == PORT_NAME:
            return int(port["containerPort"])
    return int(ports[0]["containerPort"]) if ports else DEFAULT_PORT


def load_api_client(
    *,
    api_server: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool | None = None,
) -> k8s_client.ApiClient:
    """An API client from, in this order: an explicit URL, in-cluster, a kubeconfig.

    Args:
        api_server: an API URL that needs no credentials, e.g. ``kubectl proxy``'s
            ``http://127.0.0.1:8001``.
        kubeconfig: kubeconfig path (default: ``$KUBECONFIG`` or ``~/.kube/config``).
        context: kubeconfig context (default: the current one).
        in_cluster: use the pod's service account; None means "when running in a pod
            and no kubeconfig was named".

    Raises:
        KubernetesConfigError: the chosen source is missing or invalid.
    """
    configuration = k8s_client.Configuration()
    if api_server:
        configuration.host = api_server.rstrip("/")
        return k8s_client.ApiClient(configuration)
    if in_cluster is None:
        in_cluster = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    try:
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
    except (ConfigException, OSError) as exc:
        source = "in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or ''}"
        raise KubernetesConfigError(
            f"could not load the Kubernetes configuration from the {source}: {exc}. "
            "Fix: point `kubeconfig`/`context` at a cluster (`kubectl config get-contexts`), "
            "run inside a pod with a service account, or set `api_server` "
            "(e.g. `kubectl proxy` -> http://127.0.0.1:8001)."
        ) from exc
    return k8s_client.ApiClient(configuration)


class PodApi:
    """Pod calls in one namespace, through the official client; errors as PodApiError.

    Methods:
        create, read, list, patch_annotations, delete: one API call each.
        can_i: whether this client may use a verb on pods here (an access review).
        watch: a stream of (event type, PodState, resourceVersion); ``stop()`` ends it.
    """

    def __init__(self, api_client: k8s_client.ApiClient, namespace: str) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self._core = k8s_client.CoreV1Api(api_client)
        self._authorization = k8s_client.AuthorizationV1Api(api_client)

    def _to_state(self, pod: Any) -> PodState:
        return PodState.from_dict(self.api_client.sanitize_for_serialization(pod))

    def _call(self, action: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT_S, **kwargs)
        except ApiException as exc:
            raise PodApiError(action, int(exc.status or 0), _api_reason(exc)) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise PodApiError(action, 0, f"{type(exc).__name__}: {exc}") from exc

    def create(self, manifest: Mapping[str, Any]) -> PodState:
        name = manifest["metadata"]["name"]
        pod = self._call(
            f"create pod {name}", self._core.create_namespaced_pod, self.namespace, manifest
        )
        return self._to_state(pod)

    def read(self, name: str) -> PodState | None:
        """The pod, or None when it does not exist."""
        try:
            pod = self._call(
                f"read pod {name}", self._core.read_namespaced_pod, name, self.namespace
            )
        except PodApiError as exc:
            if exc.status == HTTP_NOT_FOUND:
                return None
            raise
        return self._to_state(pod)

    def list(self, label_selector: str) -> tuple[list[PodState], str]:
        """The pods matching ``label_selector``, and the list's resourceVersion."""
        pods = self._call(
            f"list pods {label_selector}",
            self._core.list_namespaced_pod,
            self.namespace,
            label_selector=label_selector,
        )
        return [self._to_state(p) for p in pods.items], pods.metadata.resource_version or ""

    def patch_annotations(self, name: str, annotations: Mapping[str, str]) -> bool:
        """Merge ``annotations`` into the pod's; False when the pod is gone."""
        body = {"metadata": {"annotations": dict(annotations)}}
        try:
            self._call(
                f"patch pod {name}",
                self._core.patch_namespaced_pod,
                name,
                self.namespace,
                body,
                _content_type=MERGE_PATCH,
            )
        except PodApiError as exc:
            if exc.status == HTTP_NOT_FOUND:
                return False
            raise
        return True

    def delete(self, name: str, grace_period_s: int | None = None) -> bool:
        """Delete a pod; a pod that is already gone counts as deleted (returns False)."""
        try:
            self._call(
                f"delete pod {name}",
                self._core.delete_namespaced_pod,
                name,
                self.namespace,
                grace_period_seconds=grace_period_s,
            )
        except PodApiError as exc:
            if exc.status == HTTP_NOT_FOUND:
                return False
            raise
        return True

    def can_i(self, verb: str) -> bool:
        """Whether this client may ``verb`` pods in the namespace (``kubectl auth can-i``:
        a SelfSubjectAccessReview, which every authenticated user may make)."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": self.namespace,
                    "verb": verb,
                    "resource": "pods",
                }
            },
        }
        answer = self._call(
            f"review access to {verb} pods",
            self._authorization.create_self_subject_access_review,
            review,
        )
        return bool(answer.status is not None and answer.status.allowed)

    def watch(self, label_selector: str, resource_version: str) -> PodWatchStream:
        """Changes after ``resource_version``; the server ends the stream after a while."""
        return PodWatchStream(self, label_selector, resource_version)


class PodWatchStream:
    """One watch request: iterate for ``(type, PodState, resourceVersion)``; stop() ends it."""

    def __init__(self, api: PodApi, label_selector: str, resource_version: str) -> None:
        self._api = api
        self._selector = label_selector
        self._resource_version = resource_version
        self._watch = k8s_watch.Watch()

    def __iter__(self) -> Iterator[tuple[str, PodState, str]]:
        action = f"watch pods {self._selector}"
        try:
            for event in self._watch.stream(
                self._api._core.list_namespaced_pod,
                self._api.namespace,
                label_selector=self._selector,
                resource_version=self._resource_version,
                timeout_seconds=WATCH_TIMEOUT_S,
                # The read timeout only guards against a silent, dead connection.
                _request_timeout=(REQUEST_TIMEOUT_S[0], WATCH_TIMEOUT_S + 30),
            ):
                raw = event["raw_object"]
                version = (raw.get("metadata") or {}).get("resourceVersion", "")
                yield event["type"], PodState.from_dict(raw), version
        except ApiException as exc:
            error = PodWatchExpiredError if exc.status == HTTP_GONE else PodApiError
            raise error(action, int(exc.status or 0), _api_reason(exc)) from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            # OSError/ValueError: the socket was shut down by stop() mid-read.
            raise PodApiError(action, 0, f"{type(exc).__name__}: {exc}") from exc

    def stop(self) -> None:
        """End the stream (also from another thread: the blocked read returns)."""
        self._watch.stop()


def _api_reason(exc: ApiException) -> str:
    return f"{exc.reason}: {(exc.body or '')[:500]}".strip(": ")


PodListener = Callable[[PodState | None, PodState | None], None]


class PodCache:
    """The pods of one selector, kept current by one list + watch thread.

    ``listener(old, new)`` is called from the watch thread on every change (``new`` is
    None when the pod is gone). Waiters block on :meth:`wait_for` instead of polling.

    Methods:
        start / stop: run and end the list + watch thread.
        get: the last known state of a pod (None when unknown or gone).
        wait_for: block until a predicate holds for a pod, or a deadline.
    """

    def __init__(self, api: PodApi, label_selector: str, listener: PodListener | None = None):
        self._api = api
        self._selector = label_selector
        self._listener = listener
        self._pods: dict[str, PodState] = {}
        # Names of deleted pods, oldest first, bounded: a long-running watcher (the
        # proxy) sees every session ever deleted.
        self._gone: dict[str, None] = {}
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._stream: PodWatchStream | None = None
        self._thread = threading.Thread(target=self._run, name="uirl-k8s-watch", daemon=True)
        self.synced = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        stream = self._stream
        if stream is not None:
            stream.stop()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=REQUEST_TIMEOUT_S[1])

    def get(self, name: str) -> PodState | None:
        with self._cond:
            return self._pods.get(name)

    def wait_for(
        self, name: str, done: Callable[[PodState], bool], deadline: float
    ) -> PodState | None:
        """The pod once ``done(pod)`` holds; None if it is gone, on timeout or on stop.

        A pod that was never seen and is not known to be gone counts as "not yet":
        the ADDED event of a just-created pod may still be on its way.
        """
        with self._cond:
            while not self._stopped.is_set():
                pod = self._pods.get(name)
                if pod is not None and done(pod):
                    return pod
                if pod is None and name in self._gone:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return pod
                self._cond.wait(remaining)
        return None

    def _apply(self, event_type: str, pod: PodState) -> None:
        with self._cond:
            old = self._pods.get(pod.name)
            if event_type == "DELETED":
                self._pods.pop(pod.name, None)
                self._gone[pod.name] = None
                if len(self._gone) > MAX_GONE_REMEMBERED:
                    del self._gone[next(iter(self._gone))]
                new = None
            else:
                self._pods[pod.name] = new = pod
            self._cond.notify_all()
        if self._listener is not None and (old is not None or new is not None):
            self._listener(old, new)

    def _resync(self) -> str:
        pods, version = self._api.list(self._selector)
        fresh = {p.name: p for p in pods}
        with self._cond:
            vanished = [p for name, p in self._pods.items() if name not in fresh]
        for pod in vanished:
            self._apply("DELETED", pod)
        for pod in pods:
            self._apply("MODIFIED", pod)
        self.synced.set()
        return version

    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                version = self._resync()
                while not self._stopped.is_set():
                    self._stream = self._api.watch(self._selector, version)
                    for event_type, pod, pod_version in self._stream:
                        if event_type in ("ADDED", "MODIFIED", "DELETED"):
                            self._apply(event_type, pod)
                        version = pod_version or version
                        failures = 0
            except PodWatchExpiredError:
                logger.info("pod watch expired (410 Gone); listing again")
            except PodApiError as exc:
                if self._stopped.is_set():
                    return
                failures += 1
                delay = min(WATCH_RETRY_MAX_S, 0.2 * 2**failures)
                logger.warning("pod watch failed (%s); retrying in %.1fs", exc, delay)
                self._stopped.wait(delay)
